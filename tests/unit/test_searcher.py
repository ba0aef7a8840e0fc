from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydet.master.search import searcher
from tests.unit.search_sim import SimTrial, Simulator, config, replay

HPS = {
    "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
    "layers": {"type": "int", "minval": 1, "maxval": 4},
    "opt": {"type": "categorical", "vals": ["sgd", "adam"]},
    "group": {"dropout": {"type": "double", "minval": 0.0, "maxval": 0.5}, "fixed": 7},
}


def noisy_loss(trial: SimTrial, length: int, rng: random.Random) -> float:
    return float(trial.hparams.get("layers", 1)) / (1 + length) + rng.random() * 0.01


def test_single_creates_one_trial_trained_to_max_length_then_shuts_down() -> None:
    s = searcher.new_search(config({"name": "single", "metric": "x", "max_length": 100}), seed=1)
    (create,) = s.initial_operations()
    assert isinstance(create, searcher.Create)
    assert s.on_trial_created(create.request_id) == [searcher.ValidateAfter(create.request_id, 100)]
    assert s.on_validation_completed(create.request_id, 0.5, 100) == [
        searcher.Close(create.request_id)
    ]
    assert s.on_trial_closed(create.request_id) == [searcher.Shutdown()]
    assert s.progress() == 1.0


def test_single_trial_that_errors_still_ends_the_search() -> None:
    s = searcher.new_search(config({"name": "single", "metric": "x", "max_length": 10}), seed=1)
    (create,) = s.initial_operations()
    assert isinstance(create, searcher.Create)
    assert s.on_trial_exited_early(create.request_id, "errored") == [searcher.Shutdown()]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ({"name": "single", "metric": "x"}, searcher.SingleSearch),
        ({"name": "random", "metric": "x", "max_trials": 2}, searcher.RandomSearch),
        ({"name": "grid", "metric": "x"}, searcher.GridSearch),
        (
            {"name": "adaptive_asha", "metric": "x", "max_trials": 4, "max_length": 8},
            searcher.AdaptiveASHASearch,
        ),
        (
            {
                "name": "adaptive_asha",
                "metric": "x",
                "max_trials": 4,
                "time_metric": "batches",
                "max_time": 8,
            },
            searcher.AdaptiveASHASearch,
        ),
    ],
)
def test_every_searcher_name_gets_its_method(name: dict[str, Any], expected: type) -> None:
    assert type(searcher.new_search(config(name), seed=0)) is expected


def test_sampled_hyperparameters_respect_types_and_bounds() -> None:
    s = searcher.new_search(
        config({"name": "random", "metric": "x", "max_trials": 50}, HPS), seed=3
    )
    for op in s.initial_operations():
        assert isinstance(op, searcher.Create)
        hp = op.hparams
        assert 1e-4 <= hp["lr"] <= 1e-1
        assert isinstance(hp["layers"], int) and 1 <= hp["layers"] <= 4
        assert hp["opt"] in ("sgd", "adam")
        assert 0.0 <= hp["group"]["dropout"] <= 0.5 and hp["group"]["fixed"] == 7


bounds = st.tuples(st.integers(-1000, 1000), st.integers(1, 1000))
real_bounds = st.tuples(
    st.floats(-1e6, 1e6, allow_nan=False), st.floats(1e-3, 1e6, allow_nan=False)
)


@settings(max_examples=60, deadline=None)
@given(
    ints=bounds,
    reals=real_bounds,
    logs=st.tuples(st.integers(-6, 2), st.integers(1, 4), st.sampled_from([2, 10, math.e])),
    vals=st.lists(st.one_of(st.integers(), st.text(max_size=5), st.booleans()), min_size=1),
    seed=st.integers(0, 2**31 - 1),
)
def test_random_samples_stay_in_bounds_and_keep_their_types(
    ints: tuple[int, int],
    reals: tuple[float, float],
    logs: tuple[int, int, float],
    vals: list[Any],
    seed: int,
) -> None:
    lo, width = ints
    rlo, rwidth = reals
    exp_lo, exp_width, base = logs
    hps = {
        "i": {"type": "int", "minval": lo, "maxval": lo + width},
        "d": {"type": "double", "minval": rlo, "maxval": rlo + rwidth},
        "g": {"l": {"type": "log", "base": base, "minval": exp_lo, "maxval": exp_lo + exp_width}},
        "c": {"type": "categorical", "vals": vals},
        "k": {"type": "const", "val": "fixed"},
    }
    s = searcher.new_search(config({"name": "random", "metric": "x", "max_trials": 8}, hps), seed)
    for op in s.initial_operations():
        assert isinstance(op, searcher.Create)
        hp = op.hparams
        assert type(hp["i"]) is int and lo <= hp["i"] <= lo + width
        assert isinstance(hp["d"], float) and rlo <= hp["d"] <= rlo + rwidth
        low, high = base**exp_lo, base ** (exp_lo + exp_width)
        assert low * (1 - 1e-9) <= hp["g"]["l"] <= high * (1 + 1e-9)
        assert hp["c"] in vals and hp["k"] == "fixed"
        assert 0 <= op.seed < 2**31


def _random_search(*, max_trials: int, concurrent: int, seed: int) -> searcher.SearchMethod:
    """A random search over HPS, fresh."""
    cfg = config(
        {
            "name": "random",
            "metric": "x",
            "max_trials": max_trials,
            "max_concurrent_trials": concurrent,
        },
        HPS,
    )
    return searcher.new_search(cfg, seed=seed)


def test_same_seed_same_trials_and_state_round_trips() -> None:
    cfg = config(
        {"name": "random", "metric": "x", "max_trials": 5, "max_concurrent_trials": 2}, HPS
    )
    a = searcher.new_search(cfg, seed=11)
    first = a.initial_operations()
    b = searcher.new_search(cfg, seed=11)
    assert b.initial_operations() == first
    restored = searcher.new_search(cfg, seed=999)
    restored.load_state_dict(a.state_dict())
    restored.load_trial_records(a.trial_records())
    assert restored.on_trial_closed("r1") == a.on_trial_closed("r1")


def test_a_state_saved_by_an_older_master_restores_the_same_search() -> None:
    # Before the compact form, the generator's words and the finished trials were saved as
    # plain lists; a master upgraded mid-search reads them and goes on the same way.
    a = _random_search(max_trials=6, concurrent=2, seed=11)
    a.initial_operations()
    a.on_trial_closed("r1")
    a.on_trial_closed("r2")
    version, words, gauss = a.rng.getstate()
    old = {**a.state_dict(), "rng": [version, list(words), gauss], "finished": ["r1", "r2"]}
    restored = _random_search(max_trials=6, concurrent=2, seed=999)
    restored.load_state_dict(old)
    assert restored.state_dict() == a.state_dict()
    assert restored.on_trial_closed("r3") == a.on_trial_closed("r3")


def test_running_trials_are_saved_as_their_records_not_in_the_state() -> None:
    """With many trials running, each save writes the records that changed (one or two an
    event) and a state whose size does not grow with the trials running; a search loaded
    from the state and every record carries on the same."""
    a = _random_search(max_trials=400, concurrent=200, seed=3)
    a.initial_operations()
    a.take_changed_records()
    sizes = []
    for n in range(1, 201):
        a.on_validation_completed(f"r{n}", 0.5, 1)
        assert a.take_changed_records() == {f"r{n}": [1, 1]}
        sizes.append(len(json.dumps(a.state_dict())))
    assert max(sizes) == min(sizes)
    a.on_trial_closed("r7")
    assert a.take_changed_records() == {"r7": None}

    restored = _random_search(max_trials=400, concurrent=200, seed=999)
    restored.load_state_dict(json.loads(json.dumps(a.state_dict())))
    restored.load_trial_records(json.loads(json.dumps(a.trial_records())))
    assert restored.trial_records() == a.trial_records()
    assert restored.progress() == a.progress()
    assert restored.take_changed_records() == {}
    assert restored.on_validation_completed("r9", 0.5, 1) == []  # closing: nothing new
    assert restored.on_trial_closed("r8") == a.on_trial_closed("r8")


def test_a_state_that_held_the_running_trials_loads_them_as_records_to_save() -> None:
    # States saved before the records held ``completed`` and ``closing``; a master upgraded
    # mid-search keeps them, and writes them as records at its next save.
    a = _random_search(max_trials=6, concurrent=3, seed=11)
    a.initial_operations()
    a.on_validation_completed("r1", 0.5, 1)
    old = {**a.state_dict(), "completed": {"r1": 1}, "closing": ["r1"]}
    restored = _random_search(max_trials=6, concurrent=3, seed=999)
    restored.load_state_dict(old)
    restored.load_trial_records({})
    assert restored.take_changed_records() == {"r1": [1, 1]}
    assert restored.progress() == a.progress()


def test_random_keeps_to_max_concurrent_and_max_trials() -> None:
    cfg = config({"name": "random", "metric": "x", "max_trials": 3, "max_concurrent_trials": 2})
    s = searcher.new_search(cfg, seed=0)
    assert len(s.initial_operations()) == 2
    assert len([o for o in s.on_trial_closed("r1") if isinstance(o, searcher.Create)]) == 1
    assert s.on_trial_closed("r2") == []
    assert s.on_trial_closed("r3") == [searcher.Shutdown()]


@pytest.mark.parametrize(("max_trials", "limit"), [(10, 3), (7, 1), (5, 0)])
def test_random_search_runs_to_the_end_within_its_concurrency_limit(
    max_trials: int, limit: int
) -> None:
    cfg = config(
        {
            "name": "random",
            "metric": "loss",
            "max_trials": max_trials,
            "max_concurrent_trials": limit,
            "max_length": {"batches": 50},
        },
        HPS,
    )
    sim = Simulator(searcher.new_search(cfg, seed=4), metric_fn=noisy_loss, order="random")
    sim.run()
    assert sim.shutdown
    assert sim.max_working <= (limit or max_trials)
    assert len(sim.trials) == max_trials
    assert all(t.trained == 50 and t.ended == "closed" for t in sim.trials.values())
    assert sim.progress == sorted(sim.progress) and sim.progress[-1] == 1.0


def test_random_search_replaces_trials_with_invalid_hyperparameters() -> None:
    cfg = config({"name": "random", "metric": "loss", "max_trials": 4, "max_length": 10}, {"x": 1})
    fail = {"r2": (0, "invalid_hp"), "r3": (0, "errored")}
    sim = Simulator(searcher.new_search(cfg, seed=0), metric_fn=noisy_loss, fail=fail).run()
    assert sim.shutdown
    # The invalid trial does not count; the errored one does.
    assert sorted(sim.trials) == ["r1", "r2", "r3", "r4", "r5"]
    assert [t.ended for t in sim.trials.values()].count("closed") == 3


def test_unknown_exit_reason_is_refused() -> None:
    s = searcher.new_search(config({"name": "single", "metric": "x"}), seed=0)
    s.initial_operations()
    with pytest.raises(ValueError, match="exit reason"):
        s.on_trial_exited_early("r1", "bored")


def test_events_for_unknown_or_ended_trials_change_nothing() -> None:
    cfg = config({"name": "random", "metric": "x", "max_trials": 3, "max_concurrent_trials": 1})
    s = searcher.new_search(cfg, seed=0)
    s.initial_operations()
    before = s.state_dict()
    assert s.on_trial_closed("r9") == []
    assert s.on_validation_completed("nope", 1.0, 5) == []
    assert s.state_dict() == before
    s.on_trial_closed("r1")
    assert s.on_trial_closed("r1") == []
    assert s.on_trial_exited_early("r1", "errored") == []


@pytest.mark.parametrize("name", ["single", "random"])
def test_a_restored_search_continues_exactly_where_it_was(name: str) -> None:
    searcher_cfg: dict[str, Any] = {"name": name, "metric": "loss", "max_length": 20}
    if name == "random":
        searcher_cfg.update(max_trials=6, max_concurrent_trials=2)
    cfg = config(searcher_cfg, HPS)
    sim = Simulator(
        searcher.new_search(cfg, seed=5),
        metric_fn=noisy_loss,
        order="random",
        fail={"r2": (0, "invalid_hp")},
    ).run()
    for split in range(0, len(sim.log), 3):
        replay(
            sim.log,
            lambda: searcher.new_search(cfg, seed=5),
            restore_at=split,
            restored=lambda: searcher.new_search(cfg, seed=123),
        )


def test_only_searches_that_read_plain_validation_reports_are_told_of_them() -> None:
    random_search = searcher.new_search(
        config({"name": "random", "metric": "x", "max_trials": 2, "max_length": 1}), seed=0
    )
    stop_driven = searcher.new_search(
        config(
            {
                "name": "adaptive_asha",
                "metric": "x",
                "max_trials": 4,
                "time_metric": "batches",
                "max_time": 8,
            }
        ),
        seed=0,
    )
    assert not random_search.acts_on_reports
    assert stop_driven.acts_on_reports
