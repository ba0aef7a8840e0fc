"""Stop-driven adaptive ASHA (``time_metric`` + ``max_time``), checked against its definition:
a trial is ranked in a rung once, the first time its reported ``time_metric`` reaches the
rung's threshold (``max_time / divisor**(R-1-k)``), and is stopped unless it is among the best
``max(1, floor(n / divisor))`` of the ``n`` results there (ties go to the newcomer).
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from pydet.master.search import searcher
from tests.unit.search_sim import Call, SimTrial, Simulator, config, replay

HPS = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}}


def by_time(**fields: Any) -> dict[str, Any]:
    return {
        "name": "adaptive_asha",
        "metric": "loss",
        "time_metric": "batches",
        "max_time": 400,
        "mode": "aggressive",
        **fields,
    }


def noisy(trial: SimTrial, length: int, rng: random.Random) -> float:
    return abs(float(trial.hparams["x"]) - 0.4) + 10 / (1 + length) + rng.gauss(0, 0.02)


def check_stops(log: list[Call], thresholds: list[int], divisor: float) -> int:
    """Replays the reports into reference rungs; returns how many stops were checked."""
    rungs: list[list[float]] = [[] for _ in thresholds]
    reached: dict[str, int] = {}
    stops = 0
    for call in log:
        if call.event == "on_trial_exited_early" and call.args[1] != "invalid_hp":
            k = reached.get(call.args[0], 0)
            if k < len(thresholds) and call.args[0] not in stopped(log, call):
                rungs[k].append(math.inf)
                reached[call.args[0]] = k + 1
        if call.event != "on_validation_reported":
            continue
        rid, metrics, _ = call.args
        t, loss = metrics["batches"], metrics["loss"]
        stop = False
        k = reached.get(rid, 0)
        while k < len(thresholds) and t >= thresholds[k]:
            rank = sum(1 for m in rungs[k] if m < loss)
            rungs[k].append(loss)
            reached[rid] = k + 1
            if k < len(thresholds) - 1 and rank >= max(1, math.floor(len(rungs[k]) / divisor)):
                stop = True
                break
            k += 1
        got = [op for op in call.ops if isinstance(op, searcher.Stop)]
        assert got == ([searcher.Stop(rid)] if stop else []), call
        stops += stop
    return stops


def stopped(log: list[Call], until: Call) -> set[str]:
    out: set[str] = set()
    for call in log:
        if call is until:
            break
        out.update(op.request_id for op in call.ops if isinstance(op, searcher.Stop))
    return out


@pytest.mark.parametrize(
    ("max_trials", "divisor", "max_rungs", "limit", "every"),
    [(8, 2, 3, 0, 50), (16, 4, 3, 4, 25), (30, 3, 4, 5, 40), (12, 2, 3, 12, 400)],
)
def test_trials_are_stopped_exactly_when_they_fall_out_of_a_rungs_top_share(
    max_trials: int, divisor: float, max_rungs: int, limit: int, every: int
) -> None:
    cfg = config(
        by_time(
            max_trials=max_trials,
            divisor=divisor,
            max_rungs=max_rungs,
            max_concurrent_trials=limit,
        ),
        HPS,
    )
    sim = Simulator(
        searcher.new_search(cfg, seed=1),
        metric_fn=noisy,
        order="random",
        seed=3,
        time_metric="batches",
        report_every=every,
    ).run()
    assert sim.shutdown
    rungs = min(max_rungs, 1 + max(r for r in range(20) if divisor**r <= max_trials))
    thresholds = [int(400 / divisor ** (rungs - 1 - k)) for k in range(rungs)]
    stops = check_stops(sim.log, thresholds, divisor)
    assert stops == sum(1 for t in sim.trials.values() if t.ended == "stopped") > 0
    # One op each, to max_time; trials that were not stopped trained all the way.
    assert all(t.lengths == [400] for t in sim.trials.values())
    assert all(t.trained == 400 for t in sim.trials.values() if t.ended == "closed")
    assert len(sim.trials) == max_trials
    assert sim.progress[-1] == 1.0 and sim.progress == sorted(sim.progress)


def test_a_stopped_trial_makes_room_for_a_new_one_within_the_limit() -> None:
    cfg = config(by_time(max_trials=10, divisor=2, max_rungs=3, max_concurrent_trials=3), HPS)
    sim = Simulator(
        searcher.new_search(cfg, seed=0),
        metric_fn=noisy,
        order="random",
        time_metric="batches",
        report_every=100,
    ).run()
    assert sim.shutdown and sim.max_working == 3 and len(sim.trials) == 10
    for call in sim.log:
        if any(isinstance(op, searcher.Stop) for op in call.ops) and call is not sim.log[-1]:
            created = [op for op in call.ops if isinstance(op, searcher.Create)]
            assert len(created) <= 1


def test_reports_without_the_time_metric_decide_nothing() -> None:
    cfg = config(by_time(max_trials=4, divisor=2, max_rungs=2), HPS)
    s = searcher.new_search(cfg, seed=0)
    s.initial_operations()
    assert s.on_trial_created("r1") == [searcher.ValidateAfter("r1", 400)]
    assert s.on_validation_reported("r1", {"loss": 1.0}, 300) == []
    assert s.on_validation_reported("r1", {"batches": 300}, 300) == []
    assert s.on_validation_reported("r1", {"batches": "300", "loss": 1.0}, 300) == []
    # First in its rung: it goes on.
    assert s.on_validation_reported("r1", {"batches": 200, "loss": 1.0}, 200) == []
    s.on_trial_created("r2")
    assert s.on_validation_reported("r2", {"batches": 250, "loss": 2.0}, 250) == [
        searcher.Stop("r2")
    ]


def test_larger_is_better_stops_the_smaller_metric() -> None:
    cfg = config(by_time(max_trials=2, divisor=2, max_rungs=2, smaller_is_better=False), HPS)
    s = searcher.new_search(cfg, seed=0)
    s.initial_operations()
    s.on_trial_created("r1")
    s.on_trial_created("r2")
    assert s.on_validation_reported("r1", {"batches": 200, "loss": 0.9}, 200) == []
    assert s.on_validation_reported("r2", {"batches": 200, "loss": 0.1}, 200) == [
        searcher.Stop("r2")
    ]


def test_length_driven_searchers_ignore_plain_validation_reports() -> None:
    for cfg in (
        config({"name": "single", "metric": "loss", "max_length": 10}),
        config(
            {"name": "adaptive_asha", "metric": "loss", "max_trials": 4, "max_length": 100},
            HPS,
        ),
    ):
        s = searcher.new_search(cfg, seed=0)
        s.initial_operations()
        s.on_trial_created("r1")
        assert s.on_validation_reported("r1", {"batches": 100, "loss": 9.0}, 100) == []


def test_failed_and_invalid_trials_in_stop_driven_search() -> None:
    cfg = config(by_time(max_trials=6, divisor=2, max_rungs=3, max_concurrent_trials=2), HPS)
    fail = {"r2": (0, "invalid_hp"), "r3": (0, "errored")}
    sim = Simulator(
        searcher.new_search(cfg, seed=0),
        metric_fn=noisy,
        time_metric="batches",
        report_every=100,
        fail=fail,
    ).run()
    assert sim.shutdown
    # The invalid trial is replaced; the errored one counts.
    assert len(sim.trials) == 7
    check_stops(sim.log, [100, 200, 400], 2)


def test_stop_driven_search_is_deterministic_and_restores_mid_search() -> None:
    cfg = config(by_time(max_trials=12, divisor=2, max_rungs=3, max_concurrent_trials=4), HPS)
    fail = {"r4": (0, "invalid_hp"), "r6": (0, "user_canceled")}

    def run() -> Simulator:
        return Simulator(
            searcher.new_search(cfg, seed=5),
            metric_fn=noisy,
            order="random",
            seed=2,
            time_metric="batches",
            report_every=60,
            fail=fail,
        ).run()

    a, b = run(), run()
    assert [(c.event, c.args, c.ops) for c in a.log] == [(c.event, c.args, c.ops) for c in b.log]
    for split in range(0, len(a.log), max(1, len(a.log) // 10)):
        replay(
            a.log,
            lambda: searcher.new_search(cfg, seed=5),
            restore_at=split,
            restored=lambda: searcher.new_search(cfg, seed=99),
        )
