"""The SDK's experiment and trial calls against a real cluster, after Determined's e2e
``test_experiment_manipulation`` and ``test_stream_metrics``, and the methods those do not
reach: names, notes and labels, the submitted code, TensorBoard files, Pachyderm configs."""

from __future__ import annotations

import pathlib
import tarfile
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest

from determined.common.api import errors
from determined.experimental import client
from tests.cluster import Cluster, cluster_fixture

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

PREEMPTIBLE = pathlib.Path(__file__).parent / "contexts" / "preemptible"

METRICS = textwrap.dedent(
    """
    import determined as det

    scale = det.get_cluster_info().trial.hparams["scale"]
    with det.core.init() as core:
        for i in range(10):
            metrics = {"x": scale ** i}
            core.train.report_training_metrics(steps_completed=i + 1, metrics=metrics)
            core.train.report_validation_metrics(steps_completed=i + 1, metrics=metrics)
    """
)


def config(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 100000},
        "max_restarts": 0,
        **extra,
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("sdk-exp"), slots=2)


@pytest.fixture(scope="module")
def metrics_exp(
    det: client.Determined, tmp_path_factory: pytest.TempPathFactory
) -> client.Experiment:
    """Two trials (scale 0.5 and 0.25) that report x = scale ** i at steps 1 to 10."""
    code = tmp_path_factory.mktemp("metrics")
    (code / "train.py").write_text(METRICS)
    cfg = config(
        "metrics",
        hyperparameters={"scale": {"type": "categorical", "vals": [0.5, 0.25]}},
        searcher={"name": "grid", "metric": "x", "max_length": 1},
    )
    exp = det.create_experiment(cfg, str(code))
    assert exp.wait(interval=0.2, timeout=120) == client.ExperimentState.COMPLETED
    return exp


def test_stream_metrics(det: client.Determined, metrics_exp: client.Experiment) -> None:
    trial = next(t for t in metrics_exp.get_trials() if t.hparams == {"scale": 0.5})
    for group in ("training", "validation"):
        for reports in (
            list(trial.stream_metrics(group)),
            list(trial.iter_metrics(group)),
            list(det.stream_trials_metrics([trial.id], group)),
        ):
            assert len(reports) == 10
            for i, actual in enumerate(reports):
                assert actual == client.TrialMetrics(
                    trial_id=trial.id,
                    trial_run_id=1,
                    steps_completed=i + 1,
                    end_time=actual.end_time,
                    metrics={"x": 0.5**i},
                    group=group,
                )
    legacy = list(det.stream_trials_training_metrics([trial.id]))
    assert all(isinstance(m, client.TrainingMetrics) for m in legacy)
    assert [m.total_batches for m in legacy] == list(range(1, 11))
    validation = list(trial.stream_validation_metrics())
    assert isinstance(validation[0], client.ValidationMetrics) and validation[0].group == (
        "validation"
    )


def test_iter_trials_metrics_goes_trial_by_trial(
    det: client.Determined, metrics_exp: client.Experiment
) -> None:
    ids = sorted(t.id for t in metrics_exp.list_trials())
    reports = list(det.iter_trials_metrics(list(reversed(ids)), group="training"))
    assert [(m.trial_id, m.steps_completed) for m in reports] == [
        (t, s) for t in ids for s in range(1, 11)
    ]
    with pytest.raises(errors.NotFoundException, match="trial 987654 not found"):
        list(det.iter_trials_metrics([ids[0], 987654], group="training"))
    with pytest.raises(ValueError, match="metric group"):
        list(det.iter_trials_metrics(ids, group=""))


def test_iter_trials_sorts_and_orders(metrics_exp: client.Experiment) -> None:
    best_first = list(metrics_exp.iter_trials(sort_by=client.TrialSortBy.BEST_VALIDATION_METRIC))
    assert [t.hparams for t in best_first] == [{"scale": 0.25}, {"scale": 0.5}]
    by_id = metrics_exp.list_trials(order_by=client.OrderBy.DESC)
    assert [t.id for t in by_id] == sorted((t.id for t in by_id), reverse=True)
    old_order = metrics_exp.list_trials(order_by=client.TrialOrderBy.DESCENDING)
    assert [t.id for t in old_order] == [t.id for t in by_id]


def test_names_notes_and_labels(det: client.Determined, metrics_exp: client.Experiment) -> None:
    exp = det.get_experiment(metrics_exp.id)
    exp.set_name("renamed")
    exp.set_description("a description")
    exp.set_notes("some notes")
    exp.set_labels({"a", "b"})
    exp.add_label("c")
    assert exp.labels == {"a", "b", "c"}
    exp.remove_label("a")
    exp.add_label("b")
    assert exp.labels == {"b", "c"}
    again = det.get_experiment(metrics_exp.id)
    assert (again.name, again.description, again.notes, again.labels) == (
        "renamed",
        "a description",
        "some notes",
        {"b", "c"},
    )
    assert again.config is not None
    assert (again.config["name"], sorted(again.config["labels"])) == ("renamed", ["b", "c"])
    assert [e.id for e in det.list_experiments(labels=["c"])] == [exp.id]
    with pytest.raises(errors.APIException, match="name: must not be empty"):
        exp.set_name(" ")


def test_download_code(metrics_exp: client.Experiment, tmp_path: pathlib.Path) -> None:
    path = metrics_exp.download_code(str(tmp_path / "out"))
    assert path == str(tmp_path / "out" / f"exp-{metrics_exp.id}_model_def.tar.gz")
    with tarfile.open(path) as tar:
        member = tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith("train.py")))
        assert member is not None and member.read().decode() == METRICS


def test_tensorboard_files_are_deleted(
    det: client.Determined, metrics_exp: client.Experiment
) -> None:
    config = metrics_exp.config or {}
    storage = config["checkpoint_storage"]
    root = pathlib.Path(storage["host_path"], storage.get("storage_path") or "")
    trees = list(root.glob(f"*/tensorboard/experiment/{metrics_exp.id}"))
    assert trees, "the trials wrote TensorBoard files (tensorboard_mode AUTO)"
    det.get_experiment(metrics_exp.id).delete_tensorboard_files()
    assert not any(tree.exists() for tree in trees)


def test_pachyderm_config(det: client.Determined, tmp_path: pathlib.Path) -> None:
    (tmp_path / "train.py").write_text("print('never run')\n")
    pachyderm = {"dataset": {"commit": "abc123", "repo": "r", "branch": "main"}}
    exp = det.create_experiment(
        config("pach", integrations={"pachyderm": pachyderm}), str(tmp_path), activate=False
    )
    plain = det.create_experiment(config("plain"), str(tmp_path), activate=False)
    try:
        assert det.get_experiment(exp.id).get_pachyderm_config()["dataset"]["commit"] == "abc123"
        with pytest.raises(ValueError, match=f"No Pachyderm configuration found.*{plain.id}"):
            plain.get_pachyderm_config()
    finally:
        exp.kill()
        plain.kill()


def test_experiment_manipulation(det: client.Determined) -> None:
    def make_live_experiment() -> client.Experiment:
        exp = det.create_experiment(config("live"), str(PREEMPTIBLE))
        exp.await_first_trial()
        return exp

    exp = make_live_experiment()
    exp.pause()
    with pytest.raises(ValueError, match="Make sure the experiment is active"):
        exp.wait(interval=0.1)
    exp.activate()
    exp.cancel()
    assert exp.wait(interval=0.2) == client.ExperimentState.CANCELED
    assert isinstance(exp.config, dict)
    exp.delete()
    deleting = exp

    exp = make_live_experiment()
    exp.kill()
    assert exp.wait(interval=0.2) == client.ExperimentState.CANCELED
    exp.archive()
    assert det.get_experiment(exp.id).archived
    exp.unarchive()
    assert not det.get_experiment(exp.id).archived

    exp = make_live_experiment()
    exp.get_trials()[0].kill()
    assert exp.wait(interval=0.2) == client.ExperimentState.CANCELED

    with pytest.raises(errors.NotFoundException, match=f"experiment {deleting.id} not found"):
        for _ in range(300):
            det.get_experiment(deleting.id).get_trials()
            time.sleep(0.1)


def test_a_trial_knows_its_experiment_and_missing_ids_are_named(
    det: client.Determined, metrics_exp: client.Experiment
) -> None:
    trial = metrics_exp.list_trials()[0]
    assert client.Trial(trial.id, det._session).get_experiment().id == metrics_exp.id
    with pytest.raises(errors.NotFoundException, match="experiment 987654 not found"):
        det.get_experiment(987654)
    with pytest.raises(errors.NotFoundException, match="trial 987653 not found"):
        det.get_trial(987653)
    with pytest.raises(errors.NotFoundException, match="experiment 987652 not found"):
        client.Experiment(987652, det._session).set_name("x")
    with pytest.raises(errors.NotFoundException, match="experiment 987651 not found"):
        client.Experiment(987651, det._session).add_label("x")
