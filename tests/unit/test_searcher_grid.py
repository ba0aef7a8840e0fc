from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest

from determined.common import expconf
from pydet.master.search import searcher
from pydet.master.search.grid import grid_values
from tests.unit.search_sim import SimTrial, Simulator, config, replay


def values_of(hp: dict[str, Any]) -> list[Any]:
    tree = expconf.parse_experiment_config(
        {
            "entrypoint": "x",
            "searcher": {"name": "grid", "metric": "m"},
            "hyperparameters": {"h": hp},
        }
    ).hyperparameters
    leaf = tree["h"]
    assert not isinstance(leaf, dict)
    return grid_values(leaf)


@pytest.mark.parametrize(
    ("hp", "expected"),
    [
        ({"type": "int", "minval": 0, "maxval": 10, "count": 3}, [0, 5, 10]),
        ({"type": "int", "minval": 0, "maxval": 2, "count": 3}, [0, 1, 2]),
        # A count above the number of integers in the range means every integer.
        ({"type": "int", "minval": 0, "maxval": 2, "count": 100}, [0, 1, 2]),
        ({"type": "int", "minval": 1, "maxval": 10, "count": 4}, [1, 4, 7, 10]),
        # 1 + 9/2 = 5.5 and 1 + 2 * 9/4 = 5.5: halves round away from zero.
        ({"type": "int", "minval": 1, "maxval": 10, "count": 5}, [1, 3, 6, 8, 10]),
        ({"type": "int", "minval": 1, "maxval": 4, "count": 1}, [3]),
        ({"type": "int", "minval": -4, "maxval": -1, "count": 1}, [-3]),
        ({"type": "double", "minval": 0, "maxval": 1, "count": 3}, [0.0, 0.5, 1.0]),
        ({"type": "double", "minval": -1, "maxval": 1, "count": 1}, [0.0]),
        ({"type": "double", "minval": 0.1, "maxval": 0.3, "count": 2}, [0.1, 0.3]),
        ({"type": "categorical", "vals": ["a", 2, None, [1]]}, ["a", 2, None, [1]]),
        ({"type": "const", "val": {"k": 1}}, [{"k": 1}]),
    ],
)
def test_each_type_contributes_its_determined_values(
    hp: dict[str, Any], expected: list[Any]
) -> None:
    got = values_of(hp)
    if hp["type"] == "double":
        assert got == pytest.approx(expected)
    else:
        assert got == expected


def test_log_values_are_evenly_spaced_exponents_including_both_ends() -> None:
    got = values_of({"type": "log", "base": 10, "minval": -4, "maxval": -1, "count": 4})
    assert got == pytest.approx([1e-4, 1e-3, 1e-2, 1e-1])
    got = values_of({"type": "log", "base": 2, "minval": 0, "maxval": 4, "count": 1})
    assert got == pytest.approx([4.0])
    got = values_of({"type": "log", "base": 2, "minval": 1, "maxval": 3, "count": 3})
    assert got == pytest.approx([2.0, 4.0, 8.0])


HPS = {
    "a": {"type": "int", "minval": 0, "maxval": 2, "count": 3},
    "b": {"type": "categorical", "vals": [10, 20]},
    "c": "fixed",
    "opt": {
        "lr": {"type": "log", "base": 10, "minval": -3, "maxval": -1, "count": 3},
        "inner": {"momentum": {"type": "double", "minval": 0.0, "maxval": 0.9, "count": 2}},
    },
}


def loss(trial: SimTrial, length: int, rng: random.Random) -> float:
    return float(trial.hparams["a"]) + rng.random()


def test_grid_covers_exactly_the_product_of_every_hyperparameters_values() -> None:
    cfg = config({"name": "grid", "metric": "loss", "max_length": 30}, HPS)
    sim = Simulator(searcher.new_search(cfg, seed=0), metric_fn=loss).run()
    assert sim.shutdown
    seen = [
        (
            h["a"],
            h["b"],
            h["c"],
            h["opt"]["lr"],
            h["opt"]["inner"]["momentum"],
        )
        for h in (t.hparams for t in sim.trials.values())
    ]
    expected = list(
        itertools.product([0, 1, 2], [10, 20], ["fixed"], [1e-3, 1e-2, 1e-1], [0.0, 0.9])
    )
    assert len(seen) == len(expected) == 3 * 2 * 3 * 2
    for got, want in zip(sorted(seen), sorted(expected), strict=True):
        assert got[:3] == want[:3] and got[3:] == pytest.approx(want[3:])
    assert all(t.trained == 30 and t.ended == "closed" for t in sim.trials.values())


@pytest.mark.parametrize("limit", [1, 4, 0])
def test_grid_keeps_to_max_concurrent_trials_and_shuts_down_after_all_closed(limit: int) -> None:
    cfg = config(
        {"name": "grid", "metric": "loss", "max_length": 5, "max_concurrent_trials": limit}, HPS
    )
    method = searcher.new_search(cfg, seed=2)
    sim = Simulator(method, metric_fn=loss, order="random", seed=3).run()
    assert sim.max_working <= (limit or 36)
    assert sim.shutdown and method.target_trials() == 36
    shutdown_call = next(c for c in sim.log if searcher.Shutdown() in c.ops)
    assert shutdown_call is sim.log[-1] and shutdown_call.event == "on_trial_closed"


def test_grid_of_constants_is_one_trial() -> None:
    cfg = config({"name": "grid", "metric": "loss", "max_length": 5}, {"x": 1, "y": [1, 2]})
    sim = Simulator(searcher.new_search(cfg, seed=0), metric_fn=loss_of_const).run()
    assert [t.hparams for t in sim.trials.values()] == [{"x": 1, "y": [1, 2]}]


def loss_of_const(trial: SimTrial, length: int, rng: random.Random) -> float:
    return 0.0


def test_grid_does_not_replace_failed_or_invalid_points() -> None:
    cfg = config({"name": "grid", "metric": "loss", "max_length": 5}, {"a": HPS["a"]})
    fail = {"r1": (0, "invalid_hp"), "r2": (0, "errored")}
    sim = Simulator(searcher.new_search(cfg, seed=0), metric_fn=loss, fail=fail).run()
    assert sim.shutdown and sorted(sim.trials) == ["r1", "r2", "r3"]


def test_grid_state_round_trips_mid_search() -> None:
    cfg = config(
        {"name": "grid", "metric": "loss", "max_length": 5, "max_concurrent_trials": 3}, HPS
    )
    sim = Simulator(searcher.new_search(cfg, seed=8), metric_fn=loss, order="random").run()
    for split in (1, len(sim.log) // 3, len(sim.log) // 2, len(sim.log) - 1):
        replay(
            sim.log,
            lambda: searcher.new_search(cfg, seed=8),
            restore_at=split,
            restored=lambda: searcher.new_search(cfg, seed=0),
        )


def test_grid_points_keep_config_order_with_the_first_varying_slowest() -> None:
    cfg = config({"name": "grid", "metric": "loss"}, {"a": HPS["a"], "b": HPS["b"]})
    method = searcher.new_search(cfg, seed=0)
    ops = method.initial_operations()
    assert [op.hparams for op in ops if isinstance(op, searcher.Create)] == [
        {"a": a, "b": b} for a in (0, 1, 2) for b in (10, 20)
    ]
    assert math.isclose(method.progress(), 0.0)
