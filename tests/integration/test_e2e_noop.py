"""Determined's no-op e2e scenarios (``test_noop.py``) on pydet, with pydet's no-op fixture
(tests/e2e_fixtures/no_op): pause and resume, an experiment whose trial never fits, warm
starts, NaN validations, the startup hook, config overrides, max_concurrent_trials, kill
and archive."""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Iterator

import pytest

from tests.cluster import ACTIVE_STATES, Cluster, cluster_fixture, wait_until
from tests.e2e_fixtures import NO_OP, SINGLE, TERMINAL, only_trial


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("noop-cluster"), agents=1, slots=4)


@pytest.mark.slow
def test_noop_pause_and_activate_resumes_from_the_checkpoint(cluster: Cluster) -> None:
    exp_id = cluster.create(
        SINGLE, NO_OP, "--config", "hyperparameters.training_batch_seconds=0.01"
    )
    cluster.wait_state(exp_id, "RUNNING", timeout=60)
    time.sleep(1.5)  # a step or more of progress
    cluster.det("experiment", "pause", str(exp_id))
    assert cluster.wait_state(exp_id, "PAUSED", *TERMINAL) == "PAUSED"
    # Its process checkpoints and exits within a step (Determined allows 20 s).
    wait_until(lambda: only_trial(cluster, exp_id)["state"] == "PAUSED", 20, "the trial to stop")
    cluster.det("experiment", "activate", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"
    logs = cluster.logs(int(str(only_trial(cluster, exp_id)["id"])))
    assert "resumed at " in logs and "resumed at 0 " not in logs


@pytest.mark.slow
def test_an_experiment_whose_trial_never_fits_pauses_and_stays_queued(
    cluster: Cluster,
) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, "--config", "resources.slots_per_trial=100")
    cluster.det("experiment", "pause", str(exp_id))
    assert cluster.wait_state(exp_id, "PAUSED", *TERMINAL) == "PAUSED"
    cluster.det("experiment", "activate", str(exp_id))
    assert cluster.wait_state(exp_id, *ACTIVE_STATES, *TERMINAL) == "QUEUED"
    for _ in range(3):
        assert cluster.state(exp_id) == "QUEUED"
        time.sleep(0.5)
    cluster.det("experiment", "kill", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL) == "CANCELED"


def test_a_paused_experiment_is_killed(cluster: Cluster) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, "--paused")
    assert cluster.state(exp_id) == "PAUSED"
    cluster.det("experiment", "kill", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL) == "CANCELED"


def test_nan_validations_do_not_stop_completion(cluster: Cluster) -> None:
    exp_id = cluster.create(NO_OP / "single-nan-validations.yaml", NO_OP)
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"


def test_the_startup_hook_runs_before_the_trial(cluster: Cluster) -> None:
    exp_id = cluster.create(NO_OP / "startup-hook.yaml", NO_OP)
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"


def test_a_config_override_reaches_the_stored_config(cluster: Cluster) -> None:
    exp_id = cluster.create(
        SINGLE, NO_OP, "--paused", "--config", "reproducibility.experiment_seed=8200"
    )
    config = cluster.experiment(exp_id)["config"]
    assert config["reproducibility"]["experiment_seed"] == 8200
    cluster.det("experiment", "kill", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL) == "CANCELED"


@pytest.mark.slow
def test_warm_start_from_a_trial_and_from_a_checkpoint(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    first = cluster.create(SINGLE, NO_OP)
    assert cluster.wait_state(first, *TERMINAL) == "COMPLETED"
    source = only_trial(cluster, first)
    uuid = source["latest_checkpoint_uuid"]
    assert uuid
    for key, value in (("source_trial_id", source["id"]), ("source_checkpoint_uuid", uuid)):
        exp_id = cluster.create(
            SINGLE,
            NO_OP,
            "--config",
            f"searcher.{key}={value}",
            "--config",
            "searcher.max_length.batches=700",
        )
        assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"
        trial = only_trial(cluster, exp_id)
        assert trial["warm_start_checkpoint_uuid"] == uuid
        logs = cluster.logs(int(str(trial["id"])))
        assert "resumed at 500 batches" in logs, logs
        assert trial["total_batches_processed"] == 700


@pytest.mark.slow
def test_max_concurrent_trials_bounds_the_running_trials(cluster: Cluster) -> None:
    exp_id = cluster.create(NO_OP / "random-concurrent.yaml", NO_OP)
    most = 0
    deadline = time.monotonic() + 120
    while (state := cluster.state(exp_id)) not in TERMINAL:
        assert time.monotonic() < deadline, "the search did not end in 120 s"
        running = [t for t in cluster.trials(exp_id) if t["state"] not in (*TERMINAL, "QUEUED")]
        most = max(most, len(running))
        time.sleep(0.2)
    assert state == "COMPLETED"
    assert len(cluster.trials(exp_id)) == 4
    assert 1 <= most <= 2


@pytest.mark.slow
def test_only_an_ended_experiment_is_archived_and_listing_hides_it(cluster: Cluster) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, "--paused")
    proc = cluster.det("experiment", "archive", str(exp_id), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"experiment {exp_id} is still running" in proc.stderr
    cluster.det("experiment", "kill", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL) == "CANCELED"
    cluster.det("experiment", "archive", str(exp_id))

    def listed(*flags: str) -> set[int]:
        out = cluster.det("experiment", "list", "--json", *flags).stdout
        return {int(e["id"]) for e in json.loads(out)}

    assert exp_id not in listed() and exp_id in listed("--all")
    cluster.det("experiment", "unarchive", str(exp_id))
    assert exp_id in listed()
