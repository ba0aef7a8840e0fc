"""Length-driven adaptive ASHA, checked against the definition of the algorithm.

Expected layouts and counts are computed here from Determined's documented rules and from
ASHA's promotion rule (Li et al.): with ``m`` results in a rung, every trial among the best
``floor(m / divisor)`` is promoted, at the moment it first is; nothing is ever demoted.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from typing import Any

import pytest

from pydet.master.search import searcher
from tests.unit.search_sim import Call, SimTrial, Simulator, config, replay

HPS = {
    "x": {"type": "double", "minval": 0.0, "maxval": 1.0},
    "depth": {"type": "int", "minval": 1, "maxval": 8},
}


def asha(**fields: Any) -> dict[str, Any]:
    return {"name": "adaptive_asha", "metric": "loss", "max_length": {"batches": 1600}, **fields}


def worst_last(trial: SimTrial, length: int, rng: random.Random) -> float:
    """Every result is worse than all earlier ones of its rung."""
    return float(trial.index)


def best_last(trial: SimTrial, length: int, rng: random.Random) -> float:
    return -float(trial.index)


def noisy(trial: SimTrial, length: int, rng: random.Random) -> float:
    x, depth = float(trial.hparams["x"]), int(trial.hparams["depth"])
    return abs(x - 0.3) + depth / (1 + length) + rng.gauss(0, 0.05)


# -- the layout, from Determined's definition ------------------------------------------


def expected_brackets(
    mode: str, divisor: float, max_rungs: int, max_trials: int, length: int
) -> list[tuple[int, int]]:
    """(rungs, trials) per bracket."""

    def fit(n: int) -> int:
        return max(r for r in range(1, 64) if divisor ** (r - 1) <= n)

    most = min(max_rungs, fit(length), fit(max_trials))
    rungs = {
        "aggressive": [most],
        "standard": list(range((most - 1) // 2 + 1, most + 1)),
        "conservative": list(range(1, most + 1)),
    }[mode]
    rungs.sort(reverse=True)
    weights = [divisor ** (r - 1) / r for r in rungs]
    trials = [max(int(w / sum(weights) * max_trials), 1) for w in weights]
    trials[0] += max(0, max_trials - sum(trials))
    return list(zip(rungs, trials, strict=True))


def lengths_of(rungs: int, divisor: float, max_length: int) -> list[int]:
    return [max(1, int(max_length / divisor ** (rungs - 1 - k))) for k in range(rungs)]


# -- checking decisions against the promotion rule ---------------------------------------


def check_promotions(log: list[Call], brackets: dict[int, list[int]], divisor: float) -> None:
    """Replays every reported result into reference rungs and checks that the searcher's
    answer promotes exactly the trials that have just entered their rung's top share."""
    first_length: dict[str, int] = {}
    rungs: dict[tuple[int, int], list[tuple[float, int, str]]] = {}
    promoted: set[tuple[int, int, str]] = set()
    for call in log:
        for op in call.ops:
            if isinstance(op, searcher.ValidateAfter):
                first_length.setdefault(op.request_id, op.length)
        if call.event != "on_validation_completed":
            continue
        rid, metric, length = call.args
        bracket = first_length[rid]
        lengths = brackets[bracket]
        k = lengths.index(length)
        if k == len(lengths) - 1:
            assert searcher.Close(rid) in call.ops
            continue
        results = rungs.setdefault((bracket, k), [])
        results.append((metric, len(results), rid))
        top = [r for _, _, r in sorted(results)[: math.floor(len(results) / divisor)]]
        due = [r for r in top if (bracket, k, r) not in promoted]
        promoted.update((bracket, k, r) for r in due)
        got = [op for op in call.ops if isinstance(op, searcher.ValidateAfter)]
        assert got == [searcher.ValidateAfter(r, lengths[k + 1]) for r in due], call


def final_counts(sim: Simulator) -> dict[int, Counter[int]]:
    """Per bracket (named by its first length): how many trials ended at each length."""
    out: dict[int, Counter[int]] = {}
    for t in sim.trials.values():
        out.setdefault(t.lengths[0], Counter())[t.trained] += 1
    return out


# -- tests -----------------------------------------------------------------------------------


def test_rung_lengths_are_max_length_over_powers_of_the_divisor() -> None:
    cfg = config(asha(max_trials=16, divisor=4, max_rungs=3, mode="aggressive"), HPS)
    sim = Simulator(searcher.new_search(cfg, seed=0), metric_fn=worst_last).run()
    assert {length for t in sim.trials.values() for length in t.lengths} == {100, 400, 1600}
    assert all(t.lengths[0] == 100 for t in sim.trials.values())


def test_sixteen_trials_divisor_four_three_rungs_give_16_4_1() -> None:
    cfg = config(asha(max_trials=16, divisor=4, max_rungs=3, mode="aggressive"), HPS)
    sim = Simulator(searcher.new_search(cfg, seed=0), metric_fn=worst_last).run()
    reached = Counter(length for t in sim.trials.values() for length in t.lengths)
    assert reached == {100: 16, 400: 4, 1600: 1}
    assert sim.shutdown and all(t.ended == "closed" for t in sim.trials.values())


CASES = [
    ("aggressive", 4.0, 3, 16, 16),
    ("standard", 4.0, 3, 16, 16),
    ("conservative", 4.0, 3, 16, 16),
    ("aggressive", 2.0, 4, 16, 4),
    ("standard", 2.0, 5, 40, 6),
    ("conservative", 3.0, 4, 60, 5),
    ("standard", 4.0, 5, 100, 0),
]


@pytest.mark.parametrize(("mode", "divisor", "max_rungs", "max_trials", "limit"), CASES)
def test_rung_sizes_follow_the_definition_for_each_mode_and_divisor(
    mode: str, divisor: float, max_rungs: int, max_trials: int, limit: int
) -> None:
    cfg = config(
        asha(
            max_trials=max_trials,
            divisor=divisor,
            max_rungs=max_rungs,
            mode=mode,
            max_concurrent_trials=limit,
        ),
        HPS,
    )
    method = searcher.new_search(cfg, seed=1)
    sim = Simulator(method, metric_fn=worst_last).run()
    assert sim.shutdown
    layout = expected_brackets(mode, divisor, max_rungs, max_trials, 1600)
    counts = final_counts(sim)
    assert len(counts) == len(layout)
    for rungs, trials in layout:
        lengths = lengths_of(rungs, divisor, 1600)
        sizes = [trials]
        for _ in range(rungs - 1):
            sizes.append(math.floor(sizes[-1] / divisor))
        ended = {
            lengths[k]: sizes[k] - (sizes[k + 1] if k + 1 < rungs else 0) for k in range(rungs)
        }
        assert counts[lengths[0]] == {n: c for n, c in ended.items() if c}, (rungs, trials)
    check_promotions(
        sim.log,
        {lengths_of(r, divisor, 1600)[0]: lengths_of(r, divisor, 1600) for r, _ in layout},
        divisor,
    )
    assert sim.progress[0] == 0.0 and sim.progress[-1] == 1.0
    assert sim.progress == sorted(sim.progress)


@pytest.mark.parametrize("metric_fn", [best_last, noisy], ids=["best-last", "noisy"])
@pytest.mark.parametrize("order", ["fifo", "random"])
@pytest.mark.parametrize(("mode", "divisor", "max_rungs", "max_trials", "limit"), CASES[:5])
def test_promotions_are_exactly_those_of_the_asynchronous_rule(
    mode: str,
    divisor: float,
    max_rungs: int,
    max_trials: int,
    limit: int,
    order: str,
    metric_fn: Any,
) -> None:
    cfg = config(
        asha(
            max_trials=max_trials,
            divisor=divisor,
            max_rungs=max_rungs,
            mode=mode,
            max_concurrent_trials=limit,
        ),
        HPS,
    )
    sim = Simulator(
        searcher.new_search(cfg, seed=2), metric_fn=metric_fn, order=order, seed=7
    ).run()
    assert sim.shutdown
    layout = expected_brackets(mode, divisor, max_rungs, max_trials, 1600)
    check_promotions(
        sim.log,
        {lengths_of(r, divisor, 1600)[0]: lengths_of(r, divisor, 1600) for r, _ in layout},
        divisor,
    )
    # Asynchronous promotion never promotes fewer than the synchronous rule would.
    for rungs, trials in layout:
        lengths = lengths_of(rungs, divisor, 1600)
        bracket = [t for t in sim.trials.values() if t.lengths[0] == lengths[0]]
        assert len(bracket) == trials
        reached = [sum(1 for t in bracket if length in t.lengths) for length in lengths]
        for k in range(rungs - 1):
            assert reached[k + 1] >= math.floor(reached[k] / divisor)


@pytest.mark.parametrize(("limit", "bound"), [(1, 2), (3, 3), (5, 5), (16, 16)])
def test_concurrency_limit_is_never_exceeded(limit: int, bound: int) -> None:
    # standard mode with these settings has two brackets; a limit below that is raised to it.
    cfg = config(
        asha(max_trials=30, divisor=4, max_rungs=3, mode="standard", max_concurrent_trials=limit),
        HPS,
    )
    sim = Simulator(
        searcher.new_search(cfg, seed=3), metric_fn=noisy, order="random", seed=limit
    ).run()
    assert sim.shutdown and len(sim.trials) == 30
    assert sim.max_working == bound


def test_an_errored_trial_counts_as_the_worst_result_of_its_rung() -> None:
    cfg = config(asha(max_trials=4, divisor=2, max_rungs=2, mode="aggressive", max_length=100), HPS)
    # r1 would have been the best; it fails before reporting.
    sim = Simulator(
        searcher.new_search(cfg, seed=0), metric_fn=worst_last, fail={"r1": (0, "errored")}
    ).run()
    assert sim.shutdown
    assert {rid: t.lengths for rid, t in sim.trials.items()} == {
        "r1": [50],
        "r2": [50, 100],
        "r3": [50, 100],
        "r4": [50],
    }
    assert sim.trials["r1"].ended == "errored"


def test_a_trial_that_fails_after_promotion_is_worst_in_the_higher_rung() -> None:
    cfg = config(asha(max_trials=8, divisor=2, max_rungs=3, mode="aggressive", max_length=400), HPS)
    # r1 is promoted at once (best of the first two) and fails in rung 1.
    sim = Simulator(
        searcher.new_search(cfg, seed=0), metric_fn=worst_last, fail={"r1": (1, "errored")}
    ).run()
    assert sim.shutdown
    assert sim.trials["r1"].lengths == [100, 200] and sim.trials["r1"].ended == "errored"
    top = [rid for rid, t in sim.trials.items() if 400 in t.lengths]
    # Rung 1 holds r1 (worst), r2, r3, r4: the best two of four go on, r1 is not among them.
    assert top == ["r2", "r3"]


def test_invalid_hyperparameters_are_replaced_and_leave_no_result() -> None:
    cfg = config(asha(max_trials=4, divisor=2, max_rungs=2, mode="aggressive", max_length=100), HPS)
    sim = Simulator(
        searcher.new_search(cfg, seed=0), metric_fn=worst_last, fail={"r2": (0, "invalid_hp")}
    ).run()
    assert sim.shutdown
    assert sorted(sim.trials, key=lambda r: int(r[1:])) == ["r1", "r2", "r3", "r4", "r5"]
    assert sim.trials["r2"].ended == "invalid_hp"
    rung0 = [c for c in sim.calls("on_validation_completed") if c.args[2] == 50]
    assert [c.args[0] for c in rung0] == ["r1", "r3", "r4", "r5"]
    # Four valid results: the best two (r1, r3) go on, as if r2 had never been.
    assert [rid for rid, t in sim.trials.items() if 100 in t.lengths] == ["r1", "r3"]


def test_larger_is_better_promotes_the_largest_metric() -> None:
    cfg = config(
        asha(
            max_trials=4,
            divisor=4,
            max_rungs=2,
            mode="aggressive",
            max_length=100,
            smaller_is_better=False,
        ),
        HPS,
    )
    sim = Simulator(searcher.new_search(cfg, seed=0), metric_fn=worst_last).run()
    assert [rid for rid, t in sim.trials.items() if 100 in t.lengths] == ["r4"]


def test_a_parked_trial_that_is_canceled_and_later_promoted_counts_as_worst() -> None:
    cfg = config(asha(max_trials=4, divisor=2, max_rungs=2, mode="aggressive", max_length=100), HPS)
    s = searcher.new_search(cfg, seed=0)
    ops = s.initial_operations()
    assert [type(o) for o in ops] == [searcher.Create] * 4
    for rid in ("r1", "r2", "r3", "r4"):
        assert s.on_trial_created(rid) == [searcher.ValidateAfter(rid, 50)]
    assert s.on_validation_completed("r1", 5.0, 50) == []  # waits: none due out of one
    assert s.on_trial_exited_early("r1", "user_canceled") == []
    # r1 is now due, but cannot train: it takes the worst result of rung 1, no op is issued.
    assert s.on_validation_completed("r2", 9.0, 50) == []
    assert s.on_validation_completed("r3", 1.0, 50) == [searcher.ValidateAfter("r3", 100)]
    # The bottom rung is complete: its losers are closed.
    assert s.on_validation_completed("r4", 7.0, 50) == [searcher.Close("r4"), searcher.Close("r2")]
    assert s.on_validation_completed("r3", 0.5, 100) == [searcher.Close("r3")]
    assert s.on_trial_closed("r2") == []
    assert s.on_trial_closed("r4") == []
    assert s.on_trial_closed("r3") == [searcher.Shutdown()]
    assert s.progress() == 1.0


def test_a_trial_that_ends_without_finishing_its_op_does_not_stall_the_search() -> None:
    cfg = config(asha(max_trials=2, divisor=2, max_rungs=2, mode="aggressive", max_length=100), HPS)
    s = searcher.new_search(cfg, seed=0)
    s.initial_operations()
    s.on_trial_created("r1")
    s.on_trial_created("r2")
    assert s.on_validation_completed("r2", 3.0, 50) == []
    # r1's code returned before reporting: it counts as failed, which makes r2 the best half.
    assert s.on_trial_closed("r1") == [searcher.ValidateAfter("r2", 100)]
    assert s.on_validation_completed("r2", 2.0, 100) == [searcher.Close("r2")]
    assert s.on_trial_closed("r2") == [searcher.Shutdown()]


def test_stop_once_decides_at_once_and_never_parks_a_trial() -> None:
    cfg = config(
        asha(max_trials=16, divisor=4, max_rungs=3, mode="aggressive", stop_once=True), HPS
    )
    sim = Simulator(searcher.new_search(cfg, seed=0), metric_fn=noisy, order="random", seed=5).run()
    assert sim.shutdown
    lengths = [100, 400, 1600]
    rungs: dict[int, list[float]] = {}
    for call in sim.calls("on_validation_completed"):
        rid, metric, length = call.args
        k = lengths.index(length)
        ranked = rungs.setdefault(k, [])
        rank = sum(1 for m in ranked if m < metric)  # ties go to the newcomer
        ranked.append(metric)
        keep = k < 2 and rank < max(1, math.floor(len(ranked) / 4))
        expected = searcher.ValidateAfter(rid, lengths[k + 1]) if keep else searcher.Close(rid)
        assert [
            op for op in call.ops if not isinstance(op, searcher.Create | searcher.Shutdown)
        ] == [expected]


@pytest.mark.parametrize("stop_once", [False, True])
def test_same_seed_and_events_give_the_same_operations_and_state_round_trips(
    stop_once: bool,
) -> None:
    cfg = config(
        asha(
            max_trials=20,
            divisor=3,
            max_rungs=4,
            mode="standard",
            max_concurrent_trials=4,
            stop_once=stop_once,
        ),
        HPS,
    )
    fail = {"r3": (0, "invalid_hp"), "r5": (1, "errored"), "r8": (0, "user_canceled")}

    def run(seed: int) -> Simulator:
        return Simulator(
            searcher.new_search(cfg, seed=seed), metric_fn=noisy, order="random", seed=9, fail=fail
        ).run()

    a, b = run(42), run(42)
    assert [(c.event, c.args, c.ops) for c in a.log] == [(c.event, c.args, c.ops) for c in b.log]
    assert a.shutdown
    for split in range(0, len(a.log), max(1, len(a.log) // 12)):
        replay(
            a.log,
            lambda: searcher.new_search(cfg, seed=42),
            restore_at=split,
            restored=lambda: searcher.new_search(cfg, seed=7),
        )


def test_nan_is_worst_infinities_rank_and_state_stays_strict_json() -> None:
    cfg = config(asha(max_trials=4, divisor=2, max_rungs=2, mode="aggressive", max_length=100), HPS)
    s = searcher.new_search(cfg, seed=0)
    s.initial_operations()
    for rid in ("r1", "r2", "r3", "r4"):
        s.on_trial_created(rid)
    assert s.on_validation_completed("r1", math.nan, 50) == []
    # NaN loses to any number, even a poor one.
    assert s.on_validation_completed("r2", 5.0, 50) == [searcher.ValidateAfter("r2", 100)]
    assert s.on_validation_completed("r3", -math.inf, 50) == [searcher.ValidateAfter("r3", 100)]
    state = json.loads(json.dumps(s.state_dict(), allow_nan=False))
    restored = searcher.new_search(cfg, seed=1)
    restored.load_state_dict(state)
    assert restored.on_validation_completed("r4", math.inf, 50) == s.on_validation_completed(
        "r4", math.inf, 50
    )
    assert restored.state_dict() == s.state_dict()
