"""``det experiment continue`` as Determined's e2e tests drive it (``test_continue*``), with
pydet's no-op fixture (tests/e2e_fixtures/no_op): an ended experiment runs again with an
override config, a single trial from its latest checkpoint, a search's unfinished trials
as they were; what Determined refuses is refused with the field named."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from determined.experimental import client
from tests.cluster import ACTIVE_STATES, Cluster, cluster_fixture, wait_until
from tests.e2e_fixtures import NO_OP, SINGLE, TERMINAL, only_trial

CRASH = ("--config", "hyperparameters.metrics_sigma=-1.0")
ASSERTION = "assert 0 <= metrics_sigma"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("continue-cluster"), agents=1, slots=4)


def continue_(cluster: Cluster, exp_id: int, *extra: str) -> str:
    return cluster.det("experiment", "continue", str(exp_id), *extra).stdout


def test_a_broken_config_is_fixed_by_continuing_with_an_override(cluster: Cluster) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, *CRASH)
    assert cluster.wait_state(exp_id, *TERMINAL) == "ERROR"
    before, trial_before = cluster.experiment(exp_id), only_trial(cluster, exp_id)
    assert "Continued experiment" in continue_(
        cluster, exp_id, "--config", "hyperparameters.metrics_sigma=1.0"
    )
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"
    trial = only_trial(cluster, exp_id)
    assert trial["state"] == "COMPLETED"
    # As Determined's test_continue_trial_time: the same start, a later end.
    after = cluster.experiment(exp_id)
    assert after["start_time"] == before["start_time"]
    assert after["end_time"] > before["end_time"]
    assert trial["start_time"] == trial_before["start_time"]
    assert trial["end_time"] > trial_before["end_time"]  # type: ignore[operator]  # JSON
    logs = cluster.logs(int(str(trial["id"])))
    assert ASSERTION in logs  # the first run's failure stays in the trial's logs
    assert trial["hparams"]["metrics_sigma"] == 1.0  # type: ignore[index]  # JSON


def test_config_file_and_flags_merge_and_follow_runs_to_the_end(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, *CRASH)
    assert cluster.wait_state(exp_id, *TERMINAL) == "ERROR"
    override = tmp_path / "override.yaml"
    override.write_text("name: checkThis\nhyperparameters: {metrics_sigma: -1.0}\n")
    out = continue_(
        cluster,
        exp_id,
        "--config-file",
        str(override),
        "--config",
        "hyperparameters.metrics_sigma=1.0",
        "-f",
    )
    assert "COMPLETED" in out  # -f follows the trial until the experiment ends
    assert cluster.state(exp_id) == "COMPLETED"
    assert cluster.experiment(exp_id)["config"]["name"] == "checkThis"


def test_reports_past_the_checkpoint_a_continue_starts_from_are_replaced(
    cluster: Cluster, det: client.Determined
) -> None:
    fail = ("--config", "hyperparameters.checkpoint_every=200")
    exp_id = cluster.create(SINGLE, NO_OP, *fail, "--config", "hyperparameters.fail_at_batches=300")
    assert cluster.wait_state(exp_id, *TERMINAL) == "ERROR"
    trial = det.get_trial(int(str(only_trial(cluster, exp_id)["id"])))
    assert [m.steps_completed for m in trial.iter_metrics("training")] == [100, 200, 300]
    continue_(cluster, exp_id, "--config", "hyperparameters.fail_at_batches=-1")
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"
    # The first run's report at 300 is archived: the second run started from 200.
    assert [m.steps_completed for m in trial.iter_metrics("training")] == [100, 200, 300, 400, 500]
    assert "resumed at 200 batches" in cluster.logs(trial.id)


@pytest.mark.slow
def test_each_continue_has_max_restarts_of_its_own(cluster: Cluster) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, *CRASH, "--config", "max_restarts=2")
    assert cluster.wait_state(exp_id, *TERMINAL) == "ERROR"
    trial_id = int(str(only_trial(cluster, exp_id)["id"]))

    def runs() -> int:
        return cluster.logs(trial_id).count(ASSERTION)

    assert runs() == 3 and only_trial(cluster, exp_id)["restarts"] == 2
    continue_(cluster, exp_id)
    assert cluster.wait_state(exp_id, *TERMINAL) == "ERROR"
    assert runs() == 6 and only_trial(cluster, exp_id)["restarts"] == 2
    continue_(cluster, exp_id, "--config", "max_restarts=1")
    assert cluster.wait_state(exp_id, *TERMINAL) == "ERROR"
    assert runs() == 8 and only_trial(cluster, exp_id)["restarts"] == 1


@pytest.mark.parametrize("batches", [pytest.param(499, marks=pytest.mark.slow), 800])
def test_a_completed_trial_continues_to_a_new_length_from_its_checkpoint(
    cluster: Cluster, batches: int
) -> None:
    exp_id = cluster.create(SINGLE, NO_OP)
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"
    continue_(
        cluster,
        exp_id,
        "--config",
        f"searcher.max_length.batches={batches}",
        "--config",
        "searcher.name=single",
    )
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"
    trial = only_trial(cluster, exp_id)
    assert trial["state"] == "COMPLETED"
    logs = cluster.logs(int(str(trial["id"])))
    assert "resumed at 500 batches" in logs  # not trained again from the start
    assert trial["total_batches_processed"] == max(batches, 500)


def test_a_killed_single_trial_completes_when_continued(cluster: Cluster) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, "--config", "hyperparameters.training_batch_seconds=1")
    trial = wait_until(lambda: cluster.trials(exp_id), 60, "the trial")[0]
    cluster.det("trial", "kill", str(trial["id"]))
    assert cluster.wait_state(exp_id, *TERMINAL) == "CANCELED"
    continue_(cluster, exp_id, "--config", "hyperparameters.training_batch_seconds=0")
    assert cluster.wait_state(exp_id, *TERMINAL) == "COMPLETED"
    assert only_trial(cluster, exp_id)["state"] == "COMPLETED"


@pytest.mark.slow
@pytest.mark.parametrize(("fixture", "count"), [("random-short.yaml", 3), ("grid-short.yaml", 6)])
def test_a_search_continues_the_trials_that_did_not_complete(
    cluster: Cluster, fixture: str, count: int
) -> None:
    exp_id = cluster.create(NO_OP / fixture, NO_OP)
    trials = wait_until(
        lambda: len(t := cluster.trials(exp_id)) == count and t, 60, f"{count} trials"
    )
    for t in trials:
        if int(t["id"]) % 2 == 0:
            cluster.det("trial", "kill", str(t["id"]))
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=180) in ("COMPLETED", "CANCELED")
    assert any(t["state"] == "CANCELED" for t in cluster.trials(exp_id))
    continue_(cluster, exp_id)
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=180) == "COMPLETED"
    trials = cluster.trials(exp_id)
    assert len(trials) == count and all(t["state"] == "COMPLETED" for t in trials)
    proc = cluster.det("experiment", "continue", str(exp_id), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "nothing is left to continue" in proc.stderr


def test_what_determined_refuses_is_refused_with_the_field_named(cluster: Cluster) -> None:
    exp_id = cluster.create(SINGLE, NO_OP, "--config", "hyperparameters.training_batch_seconds=1")
    wait_until(lambda: cluster.state(exp_id) in ACTIVE_STATES, 30, "the experiment to run")
    proc = cluster.det("experiment", "continue", str(exp_id), check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"experiment {exp_id} is ACTIVE; only an ended experiment" in proc.stderr
    cluster.det("experiment", "kill", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL) == "CANCELED"
    for flags, message in [
        (("--config", "searcher.name=random"), "searcher.name: experiment"),
        (("--config", "project=other"), "project: cannot be changed"),
        (("--config", "resources.slots_per_trial=-2"), "resources.slots_per_trial"),
    ]:
        proc = cluster.det("experiment", "continue", str(exp_id), *flags, check=False)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert message in proc.stderr, proc.stderr
    assert cluster.state(exp_id) == "CANCELED"  # a refused continue changes nothing
