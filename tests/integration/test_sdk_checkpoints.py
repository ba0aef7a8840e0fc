"""The SDK's checkpoint calls against a real cluster, after Determined's e2e
``test_completed_experiment_and_checkpoint_apis`` and ``test_checkpoint_apis``: one trial
reports ten validations and ten checkpoints (all kept), and the tests look them up, sort
them, remove some of their files, delete them and read the metrics of a trial that used one.
"""

from __future__ import annotations

import json
import os
import pathlib
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from determined import errors as det_errors
from determined.common.api import errors
from determined.experimental import client
from tests.cluster import Cluster, cluster_fixture

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

TEN = textwrap.dedent(
    """
    import pathlib

    import determined as det

    with det.core.init() as core:
        for step in range(1, 11):
            x = 0.9 ** step
            core.train.report_training_metrics(steps_completed=step, metrics={"x": x})
            core.train.report_validation_metrics(steps_completed=step, metrics={"x": x, "z": step})
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
                pathlib.Path(path, "state").write_text(f"state {step}")
                pathlib.Path(path, "model").mkdir()
                pathlib.Path(path, "model", "w.bin").write_text("w" * step)
    """
)

INFERENCE = textwrap.dedent(
    """
    import types

    import determined as det

    with det.core.init() as core:
        used = types.SimpleNamespace(uuid=det.get_cluster_info().trial.hparams["uuid"])
        core.experimental.report_task_using_checkpoint(used)
        for step in (1, 2):
            core.train.report_metrics("inference", steps_completed=step, metrics={"acc": step})
        core.train.report_training_metrics(steps_completed=2, metrics={"loss": 0.5})
    """
)

NO_VALIDATION = textwrap.dedent(
    """
    import pathlib

    import determined as det

    with det.core.init() as core:
        with core.checkpoint.store_path({"steps_completed": 1}) as (path, _):
            pathlib.Path(path, "only").write_text("no validation reported")
    """
)


def config(name: str, entrypoint: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "entrypoint": entrypoint,
        "searcher": {"name": "single", "metric": "x", "smaller_is_better": True, "max_length": 1},
        "max_restarts": 0,
        **extra,
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("sdk-ckpt"))


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("code")
    for name, text in (("ten.py", TEN), ("infer.py", INFERENCE), ("once.py", NO_VALIDATION)):
        (directory / name).write_text(text)
    return directory


@pytest.fixture(scope="module")
def ten(det: client.Determined, code: pathlib.Path) -> client.Experiment:
    keep_all = {"checkpoint_storage": {"save_trial_best": 10}}
    exp = det.create_experiment(config("ten", "python3 ten.py", **keep_all), str(code))
    assert exp.wait(interval=0.2, timeout=120) == client.ExperimentState.COMPLETED
    return exp


def test_completed_experiment_and_checkpoint_apis(
    det: client.Determined, ten: client.Experiment
) -> None:
    trial = ten.await_first_trial()
    assert [t.id for t in ten.get_trials()] == [trial.id]
    ckpt = trial.top_checkpoint()
    # The smallest x is the last step's.
    assert ckpt.metadata == {"steps_completed": 10}
    assert ckpt.training is not None
    assert (ckpt.training.trial_id, ckpt.training.experiment_id) == (trial.id, ten.id)
    assert ckpt.training.experiment_config["searcher"]["metric"] == "x"
    assert ckpt.training.validation_metrics["avgMetrics"]["z"] == 10

    # Various ways to look it up.
    assert trial.select_checkpoint(uuid=ckpt.uuid).uuid == ckpt.uuid
    assert trial.select_checkpoint(latest=True).uuid == ckpt.uuid
    assert trial.select_checkpoint(best=True).uuid == ckpt.uuid
    assert trial.select_checkpoint(best=True, sort_by="z", smaller_is_better=False).uuid == (
        ckpt.uuid
    )
    assert trial.get_checkpoints()[0].uuid == ckpt.uuid
    assert ten.top_checkpoint().uuid == ckpt.uuid
    assert [c.uuid for c in ten.top_n_checkpoints(100)] == [ckpt.uuid]
    assert ten.list_checkpoints(max_results=1)[0].uuid == ckpt.uuid
    assert det.get_checkpoint(ckpt.uuid).uuid == ckpt.uuid
    assert trial.get_experiment().id == ten.id

    with pytest.raises(AssertionError, match="Exactly one of latest, best, or uuid"):
        trial.select_checkpoint(latest=True, best=True)
    with pytest.raises(AssertionError, match="sort_by and order_by"):
        ten.list_checkpoints(sort_by="x")


def test_checkpoints_sort_by_field_and_metric(ten: client.Experiment) -> None:
    trial = ten.list_trials()[0]
    assert len(trial.get_checkpoints()) == 10

    end_times = [
        c.report_time
        for c in trial.get_checkpoints(
            sort_by=client.CheckpointSortBy.END_TIME, order_by=client.OrderBy.DESC
        )
    ]
    assert end_times == sorted(end_times, reverse=True)  # type: ignore[type-var]
    uuids = [
        c.uuid
        for c in trial.get_checkpoints(
            sort_by=client.CheckpointSortBy.UUID, order_by=client.OrderBy.ASC
        )
    ]
    assert uuids == sorted(uuids)
    steps = [
        (c.metadata or {})["steps_completed"]
        for c in trial.get_checkpoints(
            sort_by=client.CheckpointSortBy.BATCH_NUMBER, order_by=client.OrderBy.DESC
        )
    ]
    assert steps == list(range(10, 0, -1))
    by_x = [
        c.training.validation_metrics["avgMetrics"]["x"]  # type: ignore[union-attr]
        for c in trial.get_checkpoints(sort_by="x", order_by=client.OrderBy.ASC)
    ]
    assert by_x == sorted(by_x) and len(by_x) == 10
    by_z = ten.list_checkpoints(sort_by="z", order_by=client.OrderBy.DESC, max_results=3)
    assert [c.steps_completed for c in by_z] == [10, 9, 8]
    # Determined's client-side ranking: the best of each trial (one trial here).
    assert len(ten.top_n_checkpoints(5, sort_by="z", smaller_is_better=False)) == 1


def test_remove_files_then_delete_a_checkpoint(
    ten: client.Experiment, tmp_path: pathlib.Path
) -> None:
    trial = ten.list_trials()[0]
    first, second = trial.list_checkpoints(
        sort_by=client.CheckpointSortBy.BATCH_NUMBER, order_by=client.OrderBy.ASC
    )[:2]

    first.delete()
    states = {c.uuid: c.state for c in trial.get_checkpoints()}
    assert states[first.uuid] == client.CheckpointState.DELETED
    # An experiment lists completed checkpoints only; a trial every state.
    assert first.uuid not in [c.uuid for c in ten.list_checkpoints()]
    assert first.uuid in [c.uuid for c in trial.list_checkpoints()]
    first.reload()
    with pytest.raises(det_errors.CheckpointStateException, match="STATE_DELETED"):
        first.download(str(tmp_path / "deleted"))
    with pytest.raises(errors.APIException, match=f"checkpoint {first.uuid} was deleted"):
        first.remove_files(["state"])

    second.remove_files(["state"])
    second.reload()
    assert second.state == client.CheckpointState.PARTIALLY_DELETED
    assert second.resources is not None
    assert "state" not in second.resources and "model/w.bin" in second.resources
    path = second.download(str(tmp_path / "partial"))
    assert sorted(os.listdir(path)) == ["metadata.json", "model"]
    assert json.loads(pathlib.Path(path, "metadata.json").read_text()) == {"steps_completed": 2}

    second.remove_files(["model/**"])
    second.reload()
    assert second.state == client.CheckpointState.PARTIALLY_DELETED
    assert list(second.resources or {}) == ["metadata.json"]
    second.remove_files(["**"])  # no file left: deleted
    second.reload()
    assert (second.state, second.resources) == (client.CheckpointState.DELETED, {})


def test_download_through_the_master(
    cluster: Cluster, ten: client.Experiment, tmp_path: pathlib.Path
) -> None:
    ckpt = ten.list_checkpoints(max_results=1)[0]
    path = ckpt.download(str(tmp_path / "master"), mode=client.DownloadMode.MASTER)
    assert pathlib.Path(path, "state").read_text() == "state 10"
    assert pathlib.Path(path, "model", "w.bin").read_text() == "w" * 10
    assert json.loads(pathlib.Path(path, "metadata.json").read_text()) == {"steps_completed": 10}
    # Storage this machine cannot see: AUTO falls back to the master; DIRECT cannot.
    ckpt.storage = {"type": "shared_fs", "host_path": str(tmp_path / "not-mounted-here")}
    auto = ckpt.download(str(tmp_path / "auto"))
    assert pathlib.Path(auto, "state").read_text() == "state 10"
    with pytest.raises(errors.APIException, match=r"not in .*not-mounted-here"):
        ckpt.download(str(tmp_path / "direct"), mode=client.DownloadMode.DIRECT)
    # The route is the master's HTTP API's: a user's session, and the checkpoint named.
    assert cluster.fetch(f"/checkpoints/{ckpt.uuid}", None)[0] == 401
    status, body = cluster.fetch(f"/checkpoints/{ckpt.uuid}", cluster.token)
    assert (status, body[:2]) == (200, b"\x1f\x8b")
    status, body = cluster.fetch("/checkpoints/no-such-uuid", cluster.token)
    assert status == 404
    assert json.loads(body)["error"]["error"] == "checkpoint no-such-uuid not found"
    gone = client.Checkpoint(ckpt._session, "no-such-uuid")
    gone.state = client.CheckpointState.COMPLETED
    with pytest.raises(det_errors.ProxiedDownloadFailed, match="no-such-uuid not found"):
        gone.download(str(tmp_path / "gone"), mode=client.DownloadMode.MASTER)


def test_the_metrics_of_trials_that_used_a_checkpoint(
    det: client.Determined, ten: client.Experiment, code: pathlib.Path
) -> None:
    ckpt = ten.list_checkpoints(max_results=1)[0]
    assert list(ckpt.get_metrics()) == []
    cfg = config("infer", "python3 infer.py", hyperparameters={"uuid": ckpt.uuid})
    exp = det.create_experiment(cfg, str(code))
    assert exp.wait(interval=0.2, timeout=120) == client.ExperimentState.COMPLETED
    user = exp.list_trials()[0]
    inference = list(ckpt.get_metrics("inference"))
    assert [(m.trial_id, m.group, m.steps_completed, m.metrics) for m in inference] == [
        (user.id, "inference", 1, {"acc": 1}),
        (user.id, "inference", 2, {"acc": 2}),
    ]
    assert inference[0].trial_run_id == 1
    assert {m.group for m in ckpt.get_metrics()} == {"inference", "training"}


def test_top_checkpoint_needs_no_validation(det: client.Determined, code: pathlib.Path) -> None:
    exp = det.create_experiment(config("once", "python3 once.py"), str(code))
    assert exp.wait(interval=0.2, timeout=120) == client.ExperimentState.COMPLETED
    ckpt = exp.top_checkpoint()
    assert ckpt.training is not None and ckpt.training.validation_metrics == {}
    assert [c.uuid for c in exp.list_checkpoints()] == [ckpt.uuid]
    none = det.create_experiment(config("none", "true"), str(code), activate=False)
    with pytest.raises(AssertionError, match=f"No checkpoints found for experiment {none.id}"):
        none.top_checkpoint()
    none.kill()


def test_a_missing_checkpoint_is_named(det: client.Determined) -> None:
    with pytest.raises(errors.NotFoundException, match="checkpoint no-such-uuid not found"):
        det.get_checkpoint("no-such-uuid")
    with pytest.raises(errors.NotFoundException, match="checkpoint no-such-uuid not found"):
        client.Checkpoint(det._session, "no-such-uuid").remove_files(["state"])
    with pytest.raises(ValueError, match="globs is a list"):
        client.Checkpoint(det._session, "no-such-uuid").remove_files("state")  # type: ignore[arg-type]
