"""Searches that grow on a real cluster: ``det experiment continue ID --max-trials N`` raises
a completed or running search's budget; it goes on from its saved state, and no trial runs
twice."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.cluster import ACTIVE_STATES, Cluster, cluster_fixture, wait_until
from tests.integration.test_search import TERMINAL, cluster_trials_from_db, make_context

SCRIPT = """
    import time
    import determined as det

    x = det.get_cluster_info().trial.hparams["x"]
    with det.core.init() as core_context:
        for op in core_context.searcher.operations():
            time.sleep(SLEEP)
            core_context.train.report_validation_metrics(op.length, {"loss": x + 1 / op.length})
            op.report_completed(x + 1 / op.length)
"""


def config(searcher: str) -> str:
    return f"""
    entrypoint: python3 train.py
    hyperparameters:
      x: {{type: double, minval: 0, maxval: 1}}
    searcher: {searcher}
    max_restarts: 0
    reproducibility: {{experiment_seed: 3}}
    """


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("grow-cluster"), agents=1, slots=2)


def create(cluster: Cluster, tmp_path: pathlib.Path, name: str, searcher: str, sleep: float) -> int:
    script = SCRIPT.replace("SLEEP", str(sleep))
    cfg = make_context(tmp_path, name, script, config(searcher))
    return cluster.create(cfg, cfg.parent / name)


def request_ids(cluster: Cluster, exp_id: int) -> list[str]:
    return [rid for rid, _ in cluster_trials_from_db(cluster, exp_id)]


@pytest.mark.parametrize(
    "searcher",
    [
        "{name: random, metric: loss, max_trials: 3, max_length: 2, max_concurrent_trials: 2}",
        "{name: optuna, sampler: tpe, metric: loss, max_trials: 3, max_length: 2,"
        " max_concurrent_trials: 2}",
    ],
    ids=["random", "optuna"],
)
def test_a_completed_search_continues_with_more_trials(
    cluster: Cluster, tmp_path: pathlib.Path, searcher: str
) -> None:
    exp_id = create(cluster, tmp_path, "done", searcher, sleep=0.2)
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=120) == "COMPLETED"
    assert request_ids(cluster, exp_id) == ["r1", "r2", "r3"]
    out = cluster.det("experiment", "continue", str(exp_id), "--max-trials", "5").stdout
    assert f"Continued experiment {exp_id} with max_trials 5" in out
    assert cluster.state(exp_id) in (*ACTIVE_STATES, "COMPLETED")
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=120) == "COMPLETED"
    trials = cluster.trials(exp_id)
    assert [t["state"] for t in trials] == ["COMPLETED"] * 5
    assert request_ids(cluster, exp_id) == [f"r{n}" for n in range(1, 6)]
    assert len({t["hparams"]["x"] for t in trials}) == 5
    assert "max_trials: 5" in cluster.det("experiment", "config", str(exp_id)).stdout


def test_a_running_asha_search_fills_its_brackets(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    searcher = (
        "{name: adaptive_asha, metric: loss, max_trials: 4, max_length: 4, divisor: 2,"
        " mode: aggressive, max_rungs: 2, max_concurrent_trials: 2}"
    )
    exp_id = create(cluster, tmp_path, "asha", searcher, sleep=1.5)
    wait_until(lambda: cluster.trials(exp_id), 60, "the first trials")
    assert cluster.state(exp_id) in ACTIVE_STATES
    cluster.det("experiment", "continue", str(exp_id), "--max-trials", "8")
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=180) == "COMPLETED"
    trials = cluster.trials(exp_id)
    assert request_ids(cluster, exp_id) == [f"r{n}" for n in range(1, 9)]
    assert all(t["state"] == "COMPLETED" for t in trials)
    assert {t["searcher_length"] for t in trials} == {2, 4}


def test_continue_refuses_what_cannot_grow_with_the_field_named(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = create(cluster, tmp_path, "single", "{name: single, metric: loss, max_length: 1}", 0)
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=120) == "COMPLETED"
    proc = cluster.det("experiment", "continue", str(exp_id), "--max-trials", "4", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "searcher.max_trials: a single search has no max_trials to raise" in proc.stderr
    searcher = "{name: random, metric: loss, max_trials: 2, max_length: 1}"
    exp_id = create(cluster, tmp_path, "small", searcher, 0)
    assert cluster.wait_state(exp_id, *TERMINAL, timeout=120) == "COMPLETED"
    proc = cluster.det("experiment", "continue", str(exp_id), "--max-trials", "2", check=False)
    assert "searcher.max_trials: 2 must be more than the experiment's 2" in proc.stderr
    proc = cluster.det("experiment", "continue", "9999", "--max-trials", "3", check=False)
    assert proc.returncode != 0 and "experiment 9999 not found" in proc.stderr
    assert cluster.state(exp_id) == "COMPLETED"  # a refused continue changes nothing
