"""Searches that grow (``det experiment continue --max-trials``): the search goes on from its
state with a larger budget; no trial is repeated and nothing it decided is undone."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from determined.common import errors
from pydet.master.experiments.continuation import max_trials_override, parse_override
from pydet.master.search import searcher
from pydet.master.search.optuna_study import OptunaSearch
from tests.unit import search_sim as sim

HPS = {
    "x": {"type": "double", "minval": 0, "maxval": 1},
    "n": {"type": "int", "minval": 1, "maxval": 9},
}


def loss(trial: sim.SimTrial, length: int, rng: random.Random) -> float:
    return float(trial.hparams["x"]) + 1 / length


def grown(settings: dict[str, Any], first: int, then: int, **kwargs: Any) -> sim.Simulator:
    cfg = sim.config({**settings, "max_trials": first}, HPS)
    s = sim.Simulator(searcher.new_search(cfg, 4), metric_fn=loss, **kwargs).run()
    assert s.shutdown and len(s.trials) == first
    s.grow(then)
    assert s.shutdown, "the grown search did not shut down"
    # Restored mid-way after growing, from the config the master stores (the new budget).
    bigger = sim.config({**settings, "max_trials": then}, HPS)
    for at in (len(s.log) - 3, len(s.log) - len(s.log) // 4):
        sim.replay(
            s.log,
            lambda: searcher.new_search(cfg, 4),
            restore_at=at,
            restored=lambda: searcher.new_search(bigger, 4),
        )
    return s


def test_random_continues_its_sequence() -> None:
    settings = {"name": "random", "metric": "loss", "max_length": 2, "max_concurrent_trials": 2}
    s = grown(settings, 4, 7)
    assert list(s.trials) == [f"r{n}" for n in range(1, 8)]
    # The same seven trials as a search that had asked for seven from the start.
    fresh = sim.Simulator(
        searcher.new_search(sim.config({**settings, "max_trials": 7}, HPS), 4), metric_fn=loss
    ).run()
    assert [t.hparams for t in s.trials.values()] == [t.hparams for t in fresh.trials.values()]
    assert all(t.ended == "closed" for t in s.trials.values())


@pytest.mark.parametrize("stop_once", [False, True])
def test_asha_fills_its_brackets_without_repeating_a_trial(stop_once: bool) -> None:
    settings = {
        "name": "adaptive_asha",
        "metric": "loss",
        "max_length": 16,
        "divisor": 4,
        "mode": "aggressive",
        "max_concurrent_trials": 3,
        "stop_once": stop_once,
    }
    # Four trials fit two rungs, sixteen would fit three: the grown search keeps its two.
    s = grown(settings, 4, 16)
    assert len(s.trials) == 16
    lengths = s.final_lengths()
    assert max(lengths.values()) == 16
    assert sorted(set(lengths.values())) == [4, 16]
    # More trials reached the top rung than the first four alone could send.
    assert sum(1 for n in lengths.values() if n == 16) >= 2


def test_stop_driven_asha_grows() -> None:
    settings = {
        "name": "adaptive_asha",
        "metric": "loss",
        "time_metric": "batches",
        "max_time": 16,
        "divisor": 2,
        "max_rungs": 3,
        "max_concurrent_trials": 2,
    }
    s = grown(settings, 6, 10, time_metric="batches", report_every=4)
    assert len(s.trials) == 10
    assert any(t.ended == "stopped" for t in s.trials.values())


def test_optuna_keeps_its_study_history() -> None:
    settings = {"name": "optuna", "metric": "loss", "max_length": 2, "max_concurrent_trials": 2}
    s = grown(settings, 5, 12)
    method = s.method
    assert isinstance(method, OptunaSearch)
    assert [t.number for t in method.study.trials] == list(range(12))
    assert {t.state.name for t in method.study.trials} == {"COMPLETE"}
    assert len({t.hparams["x"] for t in s.trials.values()}) == 12


def test_a_budget_only_grows_and_only_where_there_is_one() -> None:
    cfg = sim.config({"name": "random", "metric": "loss", "max_trials": 3}, HPS)
    method = searcher.new_search(cfg, 1)
    method.initial_operations()
    with pytest.raises(ValueError, match="must be more than the search's 3"):
        method.grow(3)
    grid = sim.config(
        {"name": "grid", "metric": "loss"},
        {"x": {"type": "int", "minval": 0, "maxval": 2, "count": 3}},
    )
    with pytest.raises(ValueError, match="a grid search has no max_trials"):
        searcher.new_search(grid, 1).grow(9)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("searcher: {max_trials: 0}", "searcher.max_trials: expected an integer >= 1"),
        ("searcher: {max_trials: many}", "searcher.max_trials: expected an integer >= 1"),
        ("searcher: [", "override config: "),
    ],
)
def test_continue_takes_a_new_max_trials_and_nothing_else(text: str, problem: str) -> None:
    with pytest.raises(errors.InvalidArgument, match=re.escape(problem)):
        max_trials_override(parse_override(text))
    assert max_trials_override(parse_override("searcher:\n  max_trials: 12\n")) == 12
    # Any other override continues the experiment as Determined does (not a budget).
    for other in ("searcher: {max_trials: 4, metric: acc}", "max_restarts: 2", ""):
        assert max_trials_override(parse_override(other)) is None
