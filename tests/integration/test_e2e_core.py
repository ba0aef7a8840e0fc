"""Determined's Core API e2e scenarios (``test_core.py``) on pydet, with pydet's
counterparts of its ``core_api`` fixtures (tests/e2e_fixtures/core_api): reports in every
order, a kill of an experiment that ignores its preemption, max_concurrent_trials refilled
after a kill, archive, and an invalid experiment refused at create."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from determined.experimental import client
from tests.cluster import Cluster, cluster_fixture, wait_until
from tests.e2e_fixtures import NO_OP, SINGLE, TERMINAL

CORE = pathlib.Path(__file__).parents[1] / "e2e_fixtures" / "core_api"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("core-cluster"), agents=1, slots=2)


def test_reports_in_every_order_are_all_stored(cluster: Cluster, det: client.Determined) -> None:
    exp_id = cluster.create(CORE / "workload_order.yaml", CORE)
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"
    (trial,) = det.get_experiment(exp_id).list_trials()
    training = [m.steps_completed for m in trial.iter_metrics("training")]
    validation = [m.steps_completed for m in trial.iter_metrics("validation")]
    assert len(training) == len(validation) == 11
    assert training == sorted(training) and validation == sorted(validation)
    assert len(trial.list_checkpoints()) == 11


@pytest.mark.slow
def test_a_kill_ends_an_experiment_that_ignores_its_cancel(cluster: Cluster) -> None:
    exp_id = cluster.create(CORE / "sleep.yaml", CORE)
    cluster.wait_state(exp_id, "RUNNING", timeout=60)
    cluster.det("experiment", "cancel", str(exp_id))
    assert cluster.wait_state(exp_id, "STOPPING_CANCELED", *TERMINAL) == "STOPPING_CANCELED"
    cluster.det("experiment", "kill", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=60) == "CANCELED"


@pytest.mark.slow
def test_max_concurrent_trials_refills_after_a_kill(cluster: Cluster) -> None:
    exp_id = cluster.create(CORE / "sleep-random.yaml", CORE)
    try:
        first = wait_until(lambda: cluster.trials(exp_id), 60, "the first trial")
        assert len(first) == 1
        cluster.det("trial", "kill", str(first[0]["id"]))
        wait_until(lambda: len(cluster.trials(exp_id)) >= 2, 60, "a second trial")
        cluster.det("experiment", "pause", str(exp_id))
        assert cluster.wait_state(exp_id, "PAUSED", *TERMINAL) == "PAUSED"
        assert len(cluster.trials(exp_id)) == 2  # never more than one at a time
    finally:
        cluster.det("experiment", "kill", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=60) == "CANCELED"


@pytest.mark.slow
def test_archive_and_unarchive_show_in_describe(cluster: Cluster) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, "--paused")
    assert cluster.experiment(exp_id)["archived"] is False
    proc = cluster.det("experiment", "archive", str(exp_id), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    cluster.det("experiment", "cancel", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL) == "CANCELED"
    cluster.det("experiment", "archive", str(exp_id))
    assert cluster.experiment(exp_id)["archived"] is True
    cluster.det("experiment", "unarchive", str(exp_id))
    assert cluster.experiment(exp_id)["archived"] is False


def test_an_invalid_experiment_is_refused_at_create(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    # Determined's invalid_experiment fixture: a config its schema refuses.
    bad = tmp_path / "invalid.yaml"
    bad.write_text(
        "entrypoint: python3 model_def.py\n"
        "searcher: {name: single, metric: validation_error, max_length: {batches: -100}}\n"
        "hyperparameters: {global_batch_size: 0}\n"
    )
    proc = cluster.det("experiment", "create", str(bad), str(NO_OP), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "searcher.max_length.batches" in proc.stderr
    assert "Created experiment" not in proc.stdout
