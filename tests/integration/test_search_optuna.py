"""An Optuna search on a real cluster: TPE proposes the trials, the median pruner stops the
poor ones through the preemption signal, and a master killed mid-search continues the same
study (no trial repeated, none lost)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture
from tests.integration.test_search import (
    TERMINAL,
    cluster_trials_from_db,
    kill_master_mid_search,
    make_context,
    validations,
)

SCRIPT = """
    import time
    import determined as det

    x = det.get_cluster_info().trial.hparams["x"]

    def train(core_context, op):
        for step in range(1, op.length + 1):
            time.sleep(0.3)
            core_context.train.report_training_metrics(step, {"loss": x + 1 / step})
            op.report_progress(step)
            if step % 2 == 0:
                core_context.train.report_validation_metrics(step, {"loss": x + 1 / step})
            if core_context.preempt.should_preempt():
                print(f"pruned at step {step}")
                return False
        op.report_completed(x + 1 / op.length)
        return True

    with det.core.init() as core_context:
        for op in core_context.searcher.operations():
            if not train(core_context, op):
                break
"""
CONFIG = """
    entrypoint: python3 train.py
    hyperparameters:
      x: {type: double, minval: 0, maxval: 1}
    searcher:
      name: optuna
      sampler: tpe
      metric: loss
      max_trials: 10
      max_length: 12
      max_concurrent_trials: 2
      pruner: {type: median, n_startup_trials: 2, n_warmup_steps: 2}
    max_restarts: 0
    reproducibility: {experiment_seed: 5}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("optuna-cluster"), agents=2, slots=2)


@pytest.mark.slow
def test_optuna_search_prunes_trials_and_survives_a_master_restart(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = make_context(tmp_path, "optuna", SCRIPT, CONFIG)
    exp_id = cluster.create(cfg, cfg.parent / "optuna")
    before = kill_master_mid_search(cluster, exp_id, done=3, total=10, timeout=180)
    state = cluster.wait_state(exp_id, *TERMINAL, timeout=240)
    trials = cluster.trials(exp_id)
    assert state == "COMPLETED", trials
    # Every trial the study asked for ran once: none repeated, none lost in the restart.
    ids = [rid for rid, _ in cluster_trials_from_db(cluster, exp_id)]
    assert sorted(ids, key=lambda r: int(r[1:])) == [f"r{n}" for n in range(1, 11)]
    assert [rid for rid, _ in before] == ids[: len(before)]
    assert all(t["state"] == "COMPLETED" for t in trials), [t["state"] for t in trials]
    assert len({t["hparams"]["x"] for t in trials}) == 10
    pruned = [t for t in trials if t["total_batches_processed"] < 12]
    finished = [t for t in trials if t["total_batches_processed"] == 12]
    assert pruned and finished, [(t["hparams"]["x"], t["total_batches_processed"]) for t in trials]
    # The x values come from TPE's random start-up (its first ten trials), fixed by the seed:
    # with two trials at a time, the high ones meet two finished trials with lower losses.
    for t in pruned:
        # Stopped through the preemption signal after a validation the pruner judged.
        assert validations(cluster, t["id"])
        assert "pruned at step" in cluster.logs(t["id"])
    # The median pruner stops the trials doing worse than the finished ones' median.
    best_finished = min(t["hparams"]["x"] for t in finished)
    assert all(t["hparams"]["x"] > best_finished for t in pruned)


def test_preview_search_counts_an_optuna_search(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    cfg = make_context(tmp_path, "preview", SCRIPT, CONFIG)
    out = cluster.det("preview-search", str(cfg)).stdout
    assert "name: optuna" in out
    assert "This search will create a total of 10 trial(s)." in out
    assert "At most 2 trial(s) run at a time." in out
    assert "Its median pruner may stop trials before their training length." in out
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 1]
    assert [[int(c) for c in row] for row in rows[1:]] == [[10, 12]]
    bad = cluster.det(
        "preview-search",
        str(cfg),
        "--config",
        "searcher.sampler=cmaes",
        "--config",
        "hyperparameters.x={type: categorical, vals: [1, 2]}",
        check=False,
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "hyperparameters.x: the cmaes sampler (searcher.sampler) cannot" in bad.stderr


PARETO_SCRIPT = """
    import determined as det

    hp = det.get_cluster_info().trial.hparams
    with det.core.init() as core_context:
        for op in core_context.searcher.operations():
            metrics = {"loss": hp["x"], "speed": hp["x"] * hp["y"]}
            core_context.train.report_validation_metrics(op.length, metrics)
            op.report_completed(hp["x"])
"""
PARETO_CONFIG = """
    entrypoint: python3 train.py
    hyperparameters:
      x: {type: double, minval: 0, maxval: 1}
      y: {type: double, minval: 0.2, maxval: 1}
    searcher:
      name: optuna
      sampler: nsga2
      metrics: [{name: loss}, {name: speed, smaller_is_better: false}]
      max_trials: 8
      max_length: 1
      max_concurrent_trials: 4
    reproducibility: {experiment_seed: 9}
"""


def test_a_multi_objective_search_shows_its_pareto_front(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = make_context(tmp_path, "pareto", PARETO_SCRIPT, PARETO_CONFIG)
    exp_id = cluster.create(cfg, cfg.parent / "pareto")
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=120) == "COMPLETED"
    (described,) = json.loads(cluster.det("experiment", "describe", str(exp_id), "--json").stdout)
    points = {
        t["id"]: (t["hparams"]["x"], t["hparams"]["x"] * t["hparams"]["y"])
        for t in described["trials"]
    }
    assert len(points) == 8
    # Lower loss and higher speed are better: x trades one for the other, y only costs speed.
    expected = [
        tid
        for tid, (loss, speed) in points.items()
        if not any(
            lo <= loss and sp >= speed and (lo, sp) != (loss, speed) for lo, sp in points.values()
        )
    ]
    assert described["pareto_front"] == sorted(expected)
    assert 0 < len(expected) < 8
    text = cluster.det("experiment", "describe", str(exp_id)).stdout
    assert "Pareto front (loss lower, speed higher is better):" in text
    for tid in expected:
        assert f"  trial {tid}: loss " in text
