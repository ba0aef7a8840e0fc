"""Hyperparameter searches on a real cluster of two agents with two slots each.

The grid, random and adaptive ASHA searches are stage 5 of ``examples/digits`` (the Core API
walkthrough's PyTorch classifier, ``4_hparams.py``, unchanged) and stop-driven ASHA is
``examples/search``; they run as a user runs them. Failures, invalid hyperparameters,
checkpoint retention and a master restart use tiny scripts without torch so that they take
seconds. Every search is seeded (``--config reproducibility.experiment_seed=N``), so the
hyperparameters it samples are the same on every run.
"""

from __future__ import annotations

import itertools
import json
import math
import pathlib
import signal
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import EXAMPLES, Cluster, cluster_fixture, wait_until

DIGITS = EXAMPLES / "digits"
SEARCH = EXAMPLES / "search"
TERMINAL = ("COMPLETED", "ERROR", "CANCELED")
# 4_hparams.py trains on 80% of the 1,797 digits; steps are batches, lengths are epochs.
TRAIN_RECORDS = 1797 - 1797 // 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("search-cluster"), agents=2, slots=2)


# -- helpers -------------------------------------------------------------------------------------


def run_search(
    cluster: Cluster,
    config: pathlib.Path,
    context: pathlib.Path,
    *overrides: str,
    timeout: float = 240,
) -> tuple[int, list[dict[str, Any]]]:
    """Create the experiment, wait until it ends; its id and its trials (list-trials --json)."""
    args = [arg for o in overrides for arg in ("--config", o)]
    exp_id = cluster.create(config, context, *args)
    state = cluster.wait_state(exp_id, *TERMINAL, timeout=timeout)
    trials = cluster.trials(exp_id)
    assert state == "COMPLETED", f"experiment {exp_id} ended {state}: {trials}"
    return exp_id, trials


def digits_search(cluster: Cluster, name: str, seed: int) -> tuple[int, list[dict[str, Any]]]:
    return run_search(
        cluster,
        DIGITS / f"5_{name}.yaml",
        DIGITS,
        f"reproducibility.experiment_seed={seed}",
    )


def batches(epochs: int, hparams: dict[str, Any]) -> int:
    """Steps (batches) after ``epochs`` epochs of 4_hparams.py at the trial's batch size."""
    return epochs * math.ceil(TRAIN_RECORDS / hparams.get("batch_size", 32))


def validations(cluster: Cluster, trial_id: int) -> list[tuple[int, dict[str, Any]]]:
    """(steps_completed, metrics) of each validation report of a trial, oldest first."""
    out = json.loads(cluster.det("trial", "describe", str(trial_id), "--json").stdout)
    return [
        (r["steps_completed"], r["metrics"]) for r in out["workloads"] if r["group"] == "validation"
    ]


def training_steps(cluster: Cluster, trial_id: int) -> list[int]:
    out = json.loads(cluster.det("trial", "describe", str(trial_id), "--json").stdout)
    return [r["steps_completed"] for r in out["workloads"] if r["group"] == "training"]


def make_context(tmp_path: pathlib.Path, name: str, script: str, config: str) -> pathlib.Path:
    """A context directory holding train.py, and the config file beside it (returned)."""
    ctx = tmp_path / name
    ctx.mkdir()
    (ctx / "train.py").write_text(textwrap.dedent(script))
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(textwrap.dedent(config))
    return cfg


def assert_in_bounds(hp: dict[str, Any]) -> None:
    """The search space of examples/digits/5_random.yaml and 5_adaptive.yaml."""
    assert set(hp) == {"lr", "momentum", "hidden", "batch_size"}
    assert isinstance(hp["lr"], float) and 10**-2.5 <= hp["lr"] <= 10**-1
    assert isinstance(hp["momentum"], float) and 0.5 <= hp["momentum"] <= 0.95
    assert isinstance(hp["hidden"], int) and 16 <= hp["hidden"] <= 128
    assert hp["batch_size"] in (16, 32, 64)


# -- the examples ----------------------------------------------------------------------------


@pytest.mark.slow
def test_grid_search_runs_each_point_of_the_product_once(cluster: Cluster) -> None:
    exp_id, trials = digits_search(cluster, "grid", seed=1)
    points = [t["hparams"] for t in trials]
    expected = [
        {"lr": lr, "hidden": h, "momentum": 0.9}
        for lr, h in itertools.product([10**-2, 10**-1], [32, 64])
    ]
    assert len(points) == 4
    for want in expected:
        matches = [
            p
            for p in points
            if all(
                math.isclose(p[k], v) if isinstance(v, float) else p[k] == v
                for k, v in want.items()
            )
        ]
        assert len(matches) == 1, f"grid point {want} ran {len(matches)} times"
    for t in trials:
        assert t["state"] == "COMPLETED" and t["searcher_length"] == 2
        assert t["total_batches_processed"] == batches(2, t["hparams"])
        assert t["best_validation_metric"] is not None
    # list-trials shows hyperparameters, state, steps and the best validation metric.
    table = cluster.det("experiment", "list-trials", str(exp_id)).stdout
    header = table.splitlines()[0]
    for column in ("H-Params", "State", "Steps", "Best Validation"):
        assert column in header
    assert '"hidden": 64' in table and "COMPLETED" in table


@pytest.mark.slow
def test_random_search_runs_max_trials_with_distinct_hparams_in_bounds(cluster: Cluster) -> None:
    _, trials = digits_search(cluster, "random", seed=2)
    assert_four_distinct_two_epoch_trials(trials)


def assert_four_distinct_two_epoch_trials(trials: list[dict[str, Any]]) -> None:
    """5_random.yaml's and 5_optuna.yaml's budget: four trials of two epochs, all different."""
    assert len(trials) == 4
    for t in trials:
        assert t["state"] == "COMPLETED"
        assert_in_bounds(t["hparams"])
        assert t["total_batches_processed"] == batches(2, t["hparams"])
        assert t["best_validation_metric"] is not None
    assert len({json.dumps(t["hparams"], sort_keys=True) for t in trials}) == 4


@pytest.mark.slow
def test_optuna_tpe_search_over_digits_runs_its_budget_in_bounds(cluster: Cluster) -> None:
    exp_id, trials = digits_search(cluster, "optuna", seed=4)
    assert_four_distinct_two_epoch_trials(trials)
    best = min(t["best_validation_metric"] for t in trials)
    described = json.loads(cluster.det("experiment", "describe", "--json", str(exp_id)).stdout)
    assert described[0]["experiment"]["searcher_type"] == "optuna"
    assert described[0]["experiment"]["best_trial_searcher_metric"] == pytest.approx(best)


@pytest.mark.slow
def test_pbt_over_digits_forks_the_best_trial_from_its_checkpoint(cluster: Cluster) -> None:
    exp_id, trials = digits_search(cluster, "pbt", seed=5)
    # Three members, then one child that replaces the worst after round 1.
    assert len(trials) == 4 and all(t["state"] == "COMPLETED" for t in trials)
    for t in trials:
        assert_in_bounds({**t["hparams"], "hidden": 64})
    founders = [t for t in trials if not t.get("parent_trial_id")]
    assert {t["hparams"]["hidden"] for t in trials} == {64}
    children = [t for t in trials if t.get("parent_trial_id")]
    assert len(founders) == 3 and len(children) == 1
    child = children[0]
    # The parent was the best of round 1: the lowest val_loss after one epoch.
    after_one_epoch = {
        t["id"]: next(m["val_loss"] for step, m in validations(cluster, t["id"])) for t in founders
    }
    assert child["parent_trial_id"] == min(after_one_epoch, key=lambda i: after_one_epoch[i])
    # The child started from the parent's checkpoint: 4_hparams.py says what it loaded.
    logs = cluster.det("trial", "logs", str(child["id"])).stdout
    assert "loaded checkpoint" in logs, logs[-2000:]
    assert child["warm_start_checkpoint_uuid"]
    out = cluster.det("experiment", "describe", str(exp_id)).stdout
    assert "Lineage" in out


@pytest.mark.slow
def test_adaptive_asha_promotes_the_best_which_continue_from_their_checkpoint(
    cluster: Cluster,
) -> None:
    exp_id, trials = digits_search(cluster, "adaptive", seed=3)
    assert len(trials) == 6
    assert all(t["state"] == "COMPLETED" for t in trials)
    for t in trials:
        assert_in_bounds(t["hparams"])
    top = [t for t in trials if t["searcher_length"] == 6]
    bottom = [t for t in trials if t["searcher_length"] == 2]
    assert len(top) + len(bottom) == 6
    # ASHA promotes the best third (divisor 3) of the first rung; being asynchronous, it may
    # promote a trial that a later result pushes out of that third, but never more than
    # one per result.
    assert 2 <= len(top) <= 4, [t["searcher_length"] for t in trials]
    assert all(t["total_batches_processed"] == batches(6, t["hparams"]) for t in top)
    assert all(t["total_batches_processed"] == batches(2, t["hparams"]) for t in bottom)
    # The rung's result is what the script reports: its best val_loss of epochs 1 and 2.
    at_first_rung = {
        t["id"]: min(
            m["val_loss"]
            for step, m in validations(cluster, t["id"])
            if step <= batches(2, t["hparams"])
        )
        for t in trials
    }
    best_two = sorted(at_first_rung, key=lambda i: at_first_rung[i])[:2]
    assert {t["id"] for t in top} >= set(best_two)
    for t in top:
        # Promotion continued the trial: one training report per epoch, none trained twice.
        steps = training_steps(cluster, t["id"])
        assert steps == [batches(e, t["hparams"]) for e in range(1, 7)]
    # describe names the winner.
    (described,) = json.loads(cluster.det("experiment", "describe", str(exp_id), "--json").stdout)
    best = described["best_trial"]
    assert best["id"] == min(trials, key=lambda t: t["best_validation_metric"])["id"]
    text = cluster.det("experiment", "describe", str(exp_id)).stdout
    assert f"Best trial {best['id']}: val_loss" in text
    assert "hidden:" in text and "lr:" in text


@pytest.mark.slow
def test_stop_driven_asha_stops_losers_which_end_completed(cluster: Cluster) -> None:
    # The digits are cached beside the cluster, not in the user's home.
    cache = cluster.root / "digits.npz"
    _, trials = run_search(
        cluster,
        SEARCH / "adaptive_time.yaml",
        SEARCH,
        "reproducibility.experiment_seed=4",
        f"environment.environment_variables=[DIGITS_CACHE={cache}]",
        "max_restarts=0",
    )
    assert len(trials) == 6
    assert all(t["state"] == "COMPLETED" for t in trials), [t["state"] for t in trials]
    assert all(t["restarts"] == 0 for t in trials)
    stopped = [t for t in trials if t["total_batches_processed"] < 600]
    finished = [t for t in trials if t["total_batches_processed"] == 600]
    assert stopped and finished and len(stopped) + len(finished) == 6
    for t in stopped:
        # Stopped only after its validation passed the first rung (200 batches).
        assert t["total_batches_processed"] >= 200
        reported = [m["batches"] for _, m in validations(cluster, t["id"])]
        assert max(reported) >= 200
        assert "stopping at batch" in cluster.logs(t["id"])


def test_preview_search_shows_the_plan_without_running_it(cluster: Cluster) -> None:
    out = cluster.det("preview-search", str(DIGITS / "5_adaptive.yaml")).stdout
    assert "Using search configuration:" in out
    assert "name: adaptive_asha" in out
    assert "This search will create a total of 6 trial(s)." in out
    assert "Trials" in out and "Training Length" in out
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 1]
    lengths = {int(length): int(n) for n, length in rows[1:]}
    assert set(lengths) == {2, 6} and sum(lengths.values()) == 6
    grid = json.loads(cluster.det("preview-search", str(DIGITS / "5_grid.yaml"), "--json").stdout)
    assert grid == {
        "entries": [{"num_trials": 4, "length": 2}],
        "unit": "",
        "total_trials": 4,
        "max_concurrent_trials": 4,
    }
    timed = cluster.det("preview-search", str(SEARCH / "adaptive_time.yaml")).stdout
    assert "Training Length (batches)" in timed
    overridden = cluster.det(
        "preview-search", str(DIGITS / "5_random.yaml"), "--config", "searcher.max_trials=7"
    ).stdout
    assert "a total of 7 trial(s)" in overridden
    bad = cluster.det(
        "preview-search",
        str(DIGITS / "5_random.yaml"),
        "--config",
        "searcher.max_trials=0",
        check=False,
    )
    assert bad.returncode == 1 and "searcher.max_trials" in bad.stderr


# -- failures, invalid hyperparameters, retention --------------------------------------------


def test_erroring_trial_ends_in_error_and_the_search_completes(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = make_context(
        tmp_path,
        "crash",
        """
        import determined as det

        x = det.get_cluster_info().trial.hparams["x"]
        with det.core.init() as core_context:
            for op in core_context.searcher.operations():
                if x <= 4:
                    raise SystemExit(f"x={x}: this value crashes")
                loss = x / 10
                core_context.train.report_validation_metrics(op.length, {"loss": loss})
                op.report_completed(loss)
        """,
        """
        entrypoint: python3 train.py
        hyperparameters:
          x: {type: int, minval: 1, maxval: 12}
        searcher:
          name: adaptive_asha
          metric: loss
          max_length: 9
          max_trials: 6
          divisor: 3
          max_rungs: 2
          mode: aggressive
        max_restarts: 0
        reproducibility: {experiment_seed: 5}
        """,
    )
    _, trials = run_search(cluster, cfg, cfg.parent / "crash")
    assert len(trials) == 6
    xs = {t["id"]: t["hparams"]["x"] for t in trials}
    crashed = [t for t in trials if xs[t["id"]] <= 4]
    assert crashed, f"seed 5 samples no crashing value any more: {sorted(xs.values())}"
    for t in crashed:
        assert t["state"] == "ERROR"
        assert t["restarts"] == 0  # it failed once, and max_restarts is 0: never restarted
        assert "this value crashes" in cluster.logs(t["id"])
    assert all(t["state"] == "COMPLETED" for t in trials if t not in crashed)


def test_invalid_hparams_end_trials_as_invalid_and_random_search_replaces_them(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = make_context(
        tmp_path,
        "invalid",
        """
        import determined as det

        x = det.get_cluster_info().trial.hparams["x"]
        if x <= 3:
            raise det.InvalidHP(f"x={x} is too small for this model")
        with det.core.init() as core_context:
            for op in core_context.searcher.operations():
                core_context.train.report_validation_metrics(op.length, {"loss": 1 / x})
                op.report_completed(1 / x)
        """,
        """
        entrypoint: python3 train.py
        hyperparameters:
          x: {type: int, minval: 1, maxval: 10}
        searcher: {name: random, metric: loss, max_trials: 4, max_length: 1}
        max_restarts: 3
        reproducibility: {experiment_seed: 6}
        """,
    )
    _, trials = run_search(cluster, cfg, cfg.parent / "invalid")
    invalid = [t for t in trials if t["early_exit"] == "invalid_hp"]
    valid = [t for t in trials if t["early_exit"] == ""]
    assert invalid, "seed 6 samples no invalid value any more"
    assert len(valid) == 4 and len(trials) == 4 + len(invalid)
    for t in invalid:
        assert t["hparams"]["x"] <= 3
        # Invalid is not failed: the trial is not restarted and does not end in ERROR.
        assert t["restarts"] == 0 and t["state"] == "COMPLETED"
        assert "det.InvalidHP" in cluster.logs(t["id"])
    for t in valid:
        assert t["hparams"]["x"] > 3 and t["state"] == "COMPLETED"
        assert t["best_validation_metric"] == pytest.approx(1 / t["hparams"]["x"])


def test_retention_deletes_checkpoint_files_and_marks_them_deleted(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    storage = tmp_path / "checkpoints"
    cfg = make_context(
        tmp_path,
        "retention",
        """
        import determined as det

        offset = det.get_cluster_info().trial.hparams["offset"]
        # The best step is not the latest; a NaN (a diverging step) is no metric at all.
        losses = [0.5, 0.2, float("nan"), 0.3, 0.6]
        with det.core.init() as core_context:
            for op in core_context.searcher.operations():
                for step, loss in enumerate(losses, start=1):
                    core_context.train.report_validation_metrics(step, {"loss": loss + offset})
                    with core_context.checkpoint.store_path({"steps_completed": step}) as (
                        path,
                        _,
                    ):
                        (path / "weights").write_text(f"step {step}")
                op.report_completed(losses[-1] + offset)
        """,
        f"""
        entrypoint: python3 train.py
        hyperparameters:
          offset: {{type: categorical, vals: [0.0, 1.0]}}
        searcher: {{name: grid, metric: loss, max_length: 1}}
        checkpoint_storage:
          type: shared_fs
          host_path: {storage}
          save_experiment_best: 1
          save_trial_best: 0
          save_trial_latest: 1
        max_restarts: 0
        """,
    )
    exp_id, trials = run_search(cluster, cfg, cfg.parent / "retention")
    offsets = {t["id"]: t["hparams"]["offset"] for t in trials}
    best_trial = next(i for i, o in offsets.items() if o == 0.0)
    checkpoints = json.loads(
        cluster.det("experiment", "list-checkpoints", str(exp_id), "--json").stdout
    )
    assert len(checkpoints) == 10
    # Determined's shape: the trial and searcher metric are the checkpoint's training metadata.
    kept = {
        (c["training"]["trial_id"], c["steps_completed"])
        for c in checkpoints
        if c["state"] != "DELETED"
    }
    # Each trial's latest, and the experiment's best (loss 0.2 at step 2 of offset 0).
    assert kept == {(t, 5) for t in offsets} | {(best_trial, 2)}
    losses = [0.5, 0.2, None, 0.3, 0.6]
    for c in checkpoints:
        # Each checkpoint carries the searcher metric of the validation at its step.
        loss = losses[c["steps_completed"] - 1]
        want = None if loss is None else pytest.approx(loss + offsets[c["training"]["trial_id"]])
        assert c["training"]["searcher_metric"] == want, c
        files = storage / c["uuid"]
        if c["state"] == "DELETED":
            assert not files.exists(), f"{files} of a deleted checkpoint is still there"
        else:
            assert (files / "weights").read_text() == f"step {c['steps_completed']}"
    table = cluster.det("experiment", "lc", str(exp_id)).stdout
    assert table.count("DELETED") == 7


# -- a promotion racing with the trial's exit ---------------------------------------------------


def test_trial_promoted_while_its_process_exits_still_trains_to_the_next_rung(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    # Two trials, rungs at 1 and 2 (divisor 2). The first reports the better loss at once; as
    # the only result in the rung it is not promoted yet and is told there is nothing more to
    # do, and its process takes a few seconds to exit (as an interpreter tearing down torch
    # does). Meanwhile the second reports a worse loss, which promotes the first.
    cfg = make_context(
        tmp_path,
        "race",
        f"""
        import os
        import time
        import determined as det

        try:
            os.close(os.open({str(tmp_path / "first")!r}, os.O_CREAT | os.O_EXCL))
            first = True
        except FileExistsError:
            first = False
        with det.core.init() as core_context:
            for op in core_context.searcher.operations():
                if not first:
                    time.sleep(2)
                loss = 0.0 if first else 1.0
                core_context.train.report_validation_metrics(op.length, {{"loss": loss}})
                op.report_completed(loss)
        print("no more operations", flush=True)
        time.sleep(5)
        """,
        """
        entrypoint: python3 train.py
        hyperparameters:
          x: {type: double, minval: 0, maxval: 1}
        searcher:
          name: adaptive_asha
          metric: loss
          max_length: 2
          max_trials: 2
          divisor: 2
          max_rungs: 2
          mode: aggressive
        max_restarts: 0
        """,
    )
    _, trials = run_search(cluster, cfg, cfg.parent / "race")
    promoted = [t for t in trials if t["searcher_length"] == 2]
    assert len(promoted) == 1
    assert promoted[0]["total_batches_processed"] == 2, promoted[0]


# -- pausing and canceling a search whose trials wait for the searcher's verdict -------------

WAITING_SCRIPT = """
    import time
    import determined as det

    x = det.get_cluster_info().trial.hparams["x"]
    with det.core.init() as core_context:
        for op in core_context.searcher.operations():
            time.sleep(0.5 + 4 * x)  # the smallest x reports first and waits to be promoted
            if op.length == 9:
                time.sleep(15)  # promoted: the search cannot end before the test steps in
            core_context.train.report_validation_metrics(op.length, {"loss": x})
            op.report_completed(x)
"""
WAITING_CONFIG = """
    entrypoint: python3 train.py
    hyperparameters:
      x: {type: double, minval: 0, maxval: 1}
    searcher:
      name: adaptive_asha
      metric: loss
      max_length: 9
      max_trials: 6
      divisor: 3
      max_rungs: 2
      mode: aggressive
      max_concurrent_trials: 4
    max_restarts: 0
    reproducibility: {experiment_seed: 8}
"""


def start_when_one_waits(cluster: Cluster, tmp_path: pathlib.Path, name: str) -> int:
    """Start the search above and return once its first trial has reported its rung."""
    cfg = make_context(tmp_path, name, WAITING_SCRIPT, WAITING_CONFIG)
    exp_id = cluster.create(cfg, cfg.parent / name)
    wait_until(
        lambda: any(t["best_validation_metric"] is not None for t in cluster.trials(exp_id)),
        60,
        "a first result in the bottom rung",
        interval=0.2,
    )
    return exp_id


@pytest.mark.slow
def test_pause_parks_trials_waiting_for_the_verdict_and_activate_finishes_the_search(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = start_when_one_waits(cluster, tmp_path, "pause-waiting")
    cluster.det("experiment", "pause", str(exp_id))
    wait_until(
        lambda: {t["state"] for t in cluster.trials(exp_id)} <= {"PAUSED", "COMPLETED"},
        60,
        "every unfinished trial to be PAUSED, those waiting for the searcher included",
        interval=0.3,
    )
    # The phase tells those waiting for the verdict from those with work left.
    phases = {t["phase"] for t in cluster.trials(exp_id)}
    assert phases <= {"PAUSED", "PAUSED_AWAITING_VERDICT", "COMPLETED"}, phases
    cluster.det("experiment", "activate", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=120) == "COMPLETED"
    trials = cluster.trials(exp_id)
    assert len(trials) == 6 and all(t["state"] == "COMPLETED" for t in trials), trials
    assert {t["total_batches_processed"] for t in trials} == {3, 9}


def test_cancel_ends_a_search_whose_trials_wait_for_the_verdict(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = start_when_one_waits(cluster, tmp_path, "cancel-waiting")
    before = len(cluster.trials(exp_id))
    cluster.det("experiment", "cancel", str(exp_id))
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=60) == "CANCELED"
    trials = cluster.trials(exp_id)
    # No trial is left behind, and none was started after the cancel.
    assert all(t["state"] in ("CANCELED", "COMPLETED") for t in trials), trials
    assert len(trials) == before


# -- a master restart in the middle of a search -------------------------------------------------


def cluster_trials_from_db(cluster: Cluster, exp_id: int) -> list[tuple[str, str]]:
    """(request_id, state) of each trial, read from the master's store."""
    rows = cluster.sql(
        "SELECT request_id, state FROM trials WHERE experiment_id = ? ORDER BY id", (exp_id,)
    )
    return [(str(r[0]), str(r[1])) for r in rows]


def kill_master_mid_search(
    cluster: Cluster, exp_id: int, *, done: int, total: int, timeout: float = 120
) -> list[tuple[str, str]]:
    """Once ``done`` trials have completed and fewer than ``total`` exist, kill the master
    (SIGKILL) while trials run and start it again; the trials stored before the restart."""

    def some_done_some_not() -> bool:
        states = [t["state"] for t in cluster.trials(exp_id)]
        return states.count("COMPLETED") >= done and len(states) < total

    wait_until(some_done_some_not, timeout, "the search to be under way", interval=0.3)
    cluster.stop_master(signal.SIGKILL)
    before = cluster_trials_from_db(cluster, exp_id)
    assert any(state == "ACTIVE" for _, state in before), "no trial ran when the master died"
    time.sleep(1.0)
    cluster.start_master()
    return before


@pytest.mark.slow
def test_master_killed_mid_search_continues_the_same_search(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = make_context(
        tmp_path,
        "restart",
        """
        import time
        import determined as det

        x = det.get_cluster_info().trial.hparams["x"]
        with det.core.init() as core_context:
            for op in core_context.searcher.operations():
                for step in range(1, op.length + 1):
                    time.sleep(0.2)
                    core_context.train.report_training_metrics(step, {"loss": x / step})
                    op.report_progress(step)
                core_context.train.report_validation_metrics(op.length, {"loss": x})
                op.report_completed(x)
        """,
        """
        entrypoint: python3 train.py
        hyperparameters:
          x: {type: double, minval: 0, maxval: 1}
        searcher: {name: random, metric: loss, max_trials: 10, max_length: 10,
                   max_concurrent_trials: 4}
        reproducibility: {experiment_seed: 7}
        """,
    )
    exp_id = cluster.create(cfg, cfg.parent / "restart")
    kill_master_mid_search(cluster, exp_id, done=3, total=10)
    state = cluster.wait_state(exp_id, *TERMINAL, timeout=180)
    trials = cluster.trials(exp_id)
    assert state == "COMPLETED", trials
    assert len(trials) == 10
    assert all(t["state"] == "COMPLETED" for t in trials), [t["state"] for t in trials]
    # The trials that ran through the outage kept running: the harness retried its calls.
    assert all(t["restarts"] == 0 for t in trials)
    assert len({t["hparams"]["x"] for t in trials}) == 10
    ids = [rid for rid, _ in cluster_trials_from_db(cluster, exp_id)]
    assert sorted(ids) == sorted(f"r{n}" for n in range(1, 11))
