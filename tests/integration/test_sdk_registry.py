"""Workspaces, projects and the model registry through the Python SDK, against a real
cluster, the way Determined's SDK demo and its e2e tests (test_model_registry,
test_workspace_org) use them: a team's workspace and project, experiments created in the
project and moved, their best checkpoints registered as versions of models, labels and
metadata twiddled, and the refusals a script meets (unknown names, duplicates, another
user's workspace)."""

from __future__ import annotations

import pathlib
import warnings
from collections.abc import Iterator

import pytest

from determined.common import errors
from determined.experimental import client
from tests.cluster import Cluster, cluster_fixture

TRAIN = """
import pathlib

import determined as det

with det.core.init() as core:
    scale = det.get_cluster_info().trial.hparams["scale"]
    for op in core.searcher.operations():
        for step in range(1, op.length + 1):
            loss = scale / step
            core.train.report_validation_metrics(steps_completed=step, metrics={"loss": loss})
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
                pathlib.Path(path, "weights").write_text(f"{scale}:{step}")
        op.report_completed(scale / op.length)
"""


def config(name: str, scale: float) -> dict[str, object]:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "hyperparameters": {"scale": scale},
        "searcher": {"name": "single", "metric": "loss", "max_length": 2},
        "max_restarts": 0,
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("sdk-registry"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("model")
    (path / "train.py").write_text(TRAIN)
    return path


@pytest.fixture(scope="module")
def team(det: client.Determined) -> Iterator[client.Workspace]:
    workspace = det.create_workspace("sdk-team")
    yield workspace


def test_a_team_keeps_its_experiments_in_its_workspace(
    det: client.Determined, team: client.Workspace, model_dir: pathlib.Path
) -> None:
    assert det.get_workspace("sdk-team").id == team.id
    names = [w.name for w in det.list_workspaces()]
    assert names[0] == "Uncategorized" and "sdk-team" in names
    vision = team.create_project("vision", description="image models")
    assert (vision.name, vision.workspace_id, vision.n_experiments) == ("vision", team.id, 0)
    assert team.get_project("vision").id == vision.id
    assert [p.name for p in team.list_projects()] == ["vision"]
    with pytest.raises(errors.AlreadyExists):
        team.create_project("vision")
    with pytest.raises(errors.NotFound, match="Project 'nlp' not found in this workspace"):
        team.get_project("nlp")
    with pytest.raises(errors.NotFound, match="Workspace nowhere not found"):
        det.get_workspace("nowhere")

    # Created in the project by id; listed by project; moved.
    exp = det.create_experiment(config("in-vision", 1.0), model_dir, project_id=vision.id)
    assert (exp.project_id, exp.workspace_id) == (vision.id, team.id)
    assert [e.id for e in det.list_experiments(project_id=vision.id)] == [exp.id]
    assert [e.id for e in vision.list_experiments()] == [exp.id]
    assert exp.wait(interval=0.5, timeout=180) == client.ExperimentState.COMPLETED
    vision.reload()
    assert (vision.n_experiments, vision.n_active_experiments) == (1, 0)
    exp.move_to_project("Uncategorized", "Uncategorized")
    assert exp.project_id == 1
    assert det.list_experiments(project_id=vision.id) == []

    # A project's notes, name, key and description.
    vision.add_note("Plan", "# train bigger")
    vision.add_note("Results", "none yet")
    assert [n["name"] for n in vision.notes or []] == ["Plan", "Results"]
    vision.remove_note("Plan")
    assert vision.notes == [{"name": "Results", "contents": "none yet"}]
    with pytest.raises(ValueError, match="No note with name 'Plan'"):
        vision.remove_note("Plan")
    vision.set_name("vision2")
    vision.set_key("VIS2")
    vision.set_description("bigger image models")
    fresh = team.get_project("vision2")
    assert (fresh.key, fresh.description) == ("VIS2", "bigger image models")

    # An archived project takes no new experiment, and the error says so.
    vision.archive()
    with pytest.raises(errors.FailedPrecondition, match="archived and cannot add new experiments"):
        det.create_experiment(config("late", 1.0), model_dir, project_id=vision.id)
    vision.unarchive()

    # A workspace holding experiments is not deleted; the count is in the refusal.
    exp.move_to_project("sdk-team", "vision2")
    with pytest.raises(errors.FailedPrecondition, match="'sdk-team' holds 1 experiment;"):
        det.delete_workspace("sdk-team")


def test_the_model_registry_as_determineds_e2e_test_uses_it(
    det: client.Determined, model_dir: pathlib.Path
) -> None:
    runs = [det.create_experiment(config(f"mnist-{i}", 1.0 + i), model_dir) for i in (1, 2)]
    for run in runs:
        assert run.wait(interval=0.5, timeout=180) == client.ExperimentState.COMPLETED

    mnist = det.create_model("mnist", "simple computer vision model", labels=["a", "b"])
    assert (mnist.metadata, mnist.labels, mnist.workspace_id) == ({}, ["a", "b"], 1)
    with pytest.raises(errors.AlreadyExists, match="a model named 'mnist' exists"):
        det.create_model("mnist", "simple computer vision model")

    mnist.add_metadata({"testing": "metadata"})
    assert det.get_model(mnist.name).metadata == {"testing": "metadata"}
    assert mnist.model_id is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert det.get_model_by_id(mnist.model_id).name == "mnist"
    assert det.get_model(mnist.model_id).username == "admin"
    mnist.add_metadata({"some_key": "some_value", "layers": 3})
    mnist.add_metadata({"testing": "override"})
    mnist.remove_metadata(["some_key"])
    assert det.get_model("mnist").metadata == {"testing": "override", "layers": 3}
    mnist.set_labels(["hello", "world"])
    mnist.set_description("abcde")
    stored = det.get_model("mnist")
    assert (stored.labels, stored.description) == (["hello", "world"], "abcde")
    mnist.archive()
    assert det.get_model("mnist").archived is True
    with pytest.raises(errors.FailedPrecondition, match="archived and cannot register"):
        mnist.register_version(runs[0].top_checkpoint().uuid)
    mnist.unarchive()

    # Each run's best checkpoint becomes a version.
    for number, run in enumerate(runs, start=1):
        best = run.top_checkpoint()
        version = mnist.register_version(best.uuid)
        assert version.model_version == number
        latest = mnist.get_version()
        assert latest is not None and latest.checkpoint is not None
        assert latest.checkpoint.uuid == best.uuid
    first = mnist.get_version(1)
    assert first is not None
    first.set_name("Test 2021")
    first.set_notes("# Hello Markdown")
    again = mnist.get_version(1)
    assert again is not None and (again.name, again.notes) == ("Test 2021", "# Hello Markdown")
    with pytest.warns(FutureWarning):
        assert [v.model_version for v in mnist.get_versions()] == [2, 1]
    assert [v.model_version for v in mnist.list_versions(client.OrderBy.ASC)] == [1, 2]
    with pytest.raises(errors.NotFound, match="version 7 of model 'mnist' not found"):
        mnist.get_version(7)
    # The registry keeps its checkpoints: their deletion is refused, naming the model.
    assert first.checkpoint is not None
    with pytest.raises(errors.FailedPrecondition, match="registered to mnist"):
        first.checkpoint.delete()
    with pytest.raises(errors.FailedPrecondition, match="registered to mnist"):
        first.checkpoint.remove_files(["**"])  # it keeps every file too
    latest = mnist.get_version()
    assert latest is not None
    latest.delete()
    assert len(mnist.list_versions()) == 1

    tform = det.create_model("transformer", "all you need is attention")
    det.create_model("ac - Dc", "a test name model")
    assert [m.name for m in det.list_models(sort_by=client.ModelSortBy.NAME)] == [
        "ac - Dc",
        "mnist",
        "transformer",
    ]
    tform.set_labels(["world", "test", "zebra"])
    assert det.get_model_labels() == ["world", "hello", "test", "zebra"]
    tform.add_label("prod")
    tform.remove_label("test")
    assert det.get_model("transformer").labels == ["world", "zebra", "prod"]
    det.create_workspace("model-zoo")
    tform.move_to_workspace("model-zoo")
    assert det.get_model("transformer").workspace_id == det.get_workspace("model-zoo").id
    tform.delete()
    with pytest.raises(errors.NotFound, match="model 'transformer' not found"):
        det.get_model("transformer")


def test_a_user_moves_experiments_only_into_their_own_workspaces(
    cluster: Cluster, det: client.Determined, team: client.Workspace, model_dir: pathlib.Path
) -> None:
    cluster.det("user", "create", "bob", "--password", "bob-password-1")
    bob = client.Determined(master=cluster.address, user="bob", password="bob-password-1")
    try:
        mine = bob.create_experiment(config("bobs", 1.0), model_dir, activate=False)
        own = bob.create_workspace("bobs-space").create_project("lab")
        mine.move_to_project("bobs-space", "lab")
        assert mine.project_id == own.id
        team.create_project("shared")
        with pytest.raises(errors.PermissionDenied, match="owner of workspace"):
            mine.move_to_project("sdk-team", "shared")
        with pytest.raises(errors.PermissionDenied, match="only the owner of workspace"):
            bob.delete_workspace("sdk-team")
        # Back to where everybody's experiments go.
        mine.move_to_project("Uncategorized", "Uncategorized")
        mine.kill()
    finally:
        bob.close()
