"""Population-based training: rounds, truncation, children forked from the best trials'
checkpoints with explored hyperparameters, and the same search after a save and load."""

from __future__ import annotations

import collections
import math
import random
import statistics
from typing import Any

import pytest

from determined.common import expconf
from pydet.master.search import preview, searcher
from pydet.master.search.pbt import PBTSearch, explore
from tests.unit import search_sim as sim

HPS: dict[str, Any] = {
    "lr": {"type": "log", "base": 10, "minval": -5, "maxval": 0},
    "model": {
        "width": {"type": "int", "minval": 1, "maxval": 64},
        "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5},
    },
    "optimizer": {"type": "categorical", "vals": ["sgd", "adam"]},
    "epochs_per_step": 3,
}


def pbt_config(hps: dict[str, Any] = HPS, **fields: Any) -> expconf.ExperimentConfig:
    settings: dict[str, Any] = {
        "name": "pbt",
        "metric": "loss",
        "population_size": 8,
        "num_rounds": 6,
        "length_per_round": {"batches": 10},
        "replace_function": {"truncate_fraction": 0.25},
        "explore_function": {"resample_probability": 0.2, "perturb_factor": 0.2},
        **fields,
    }
    return sim.config(settings, hps)


def quality(hparams: dict[str, Any]) -> float:
    """How far the hyperparameters are from the best (lr 1e-2, width 32): 0 is best."""
    return abs(math.log10(hparams["lr"]) + 2) + abs(math.log2(hparams["model"]["width"] / 32))


def loss(trial: sim.SimTrial, length: int, rng: random.Random) -> float:
    return quality(trial.hparams) + 10 / length + rng.random() * 0.01


def run(cfg: expconf.ExperimentConfig, seed: int = 5, **kwargs: Any) -> sim.Simulator:
    return sim.Simulator(searcher.new_search(cfg, seed), metric_fn=loss, **kwargs).run()


def test_the_population_moves_towards_better_hyperparameters_over_rounds() -> None:
    s = run(pbt_config())
    assert s.shutdown
    # population 8 plus 2 children in each of the 5 rounds after the first
    assert len(s.trials) == 8 + 5 * 2
    first = [quality(t.hparams) for t in s.trials.values() if t.parent is None]
    last = [quality(t.hparams) for t in s.trials.values() if t.trained == 60]
    assert len(last) == 8
    assert statistics.mean(last) < statistics.mean(first)
    assert min(last) <= min(first)


def test_children_start_from_their_parents_length_and_train_one_round() -> None:
    s = run(pbt_config())
    children = [t for t in s.trials.values() if t.parent is not None]
    assert children
    for child in children:
        parent = s.trials[child.parent or ""]
        start = child.lengths[0] - 10
        assert start in parent.lengths  # it forked at a round its parent had finished
        steps = [b - a for a, b in zip([start, *child.lengths], child.lengths, strict=False)]
        assert set(steps) == {10}


def test_the_worst_are_closed_and_the_best_forked_each_round() -> None:
    method = PBTSearch(pbt_config(population_size=4, num_rounds=2), seed=1)
    ops = method.initial_operations()
    rids = [op.request_id for op in ops if isinstance(op, searcher.Create)]
    assert len(rids) == 4 and all(op.checkpoint_of is None for op in ops)  # type: ignore[union-attr]
    for rid in rids:
        assert method.on_trial_created(rid) == [searcher.ValidateAfter(rid, 10)]
    out: list[searcher.Operation] = []
    for rid, metric in zip(rids, [3.0, 1.0, 4.0, 2.0], strict=True):
        out = method.on_validation_completed(rid, metric, 10)
    (close,) = [op for op in out if isinstance(op, searcher.Close)]
    (child,) = [op for op in out if isinstance(op, searcher.Create)]
    promoted = {op.request_id for op in out if isinstance(op, searcher.ValidateAfter)}
    assert close.request_id == rids[2]  # the worst (4.0)
    assert child.checkpoint_of == rids[1]  # the best (1.0)
    assert promoted == {rids[0], rids[1], rids[3]}
    assert all(op.length == 20 for op in out if isinstance(op, searcher.ValidateAfter))


def test_larger_is_better_forks_the_largest() -> None:
    method = PBTSearch(pbt_config(population_size=4, smaller_is_better=False), seed=1)
    rids = [op.request_id for op in method.initial_operations()]  # type: ignore[union-attr]
    out: list[searcher.Operation] = []
    for rid, metric in zip(rids, [3.0, 1.0, 4.0, 2.0], strict=True):
        out = method.on_validation_completed(rid, metric, 10)
    (child,) = [op for op in out if isinstance(op, searcher.Create)]
    assert child.checkpoint_of == rids[2]


def test_a_trial_that_errors_leaves_the_population_and_the_search_ends() -> None:
    s = run(pbt_config(), fail={"r3": (1, "errored")})
    assert s.shutdown
    assert s.trials["r3"].ended == "errored"
    assert all(t.parent != "r3" for t in s.trials.values())
    assert all(t.ended in ("closed", "errored") for t in s.trials.values())


def test_the_search_replays_after_a_restart_mid_search() -> None:
    s = run(pbt_config(), order="random")
    # restored halfway through, from strict JSON, into a method built with another seed
    sim.replay(
        s.log,
        lambda: PBTSearch(pbt_config(), 5),
        restore_at=len(s.log) // 2,
        restored=lambda: PBTSearch(pbt_config(), 99),
    )


def test_exploration_perturbs_numbers_within_bounds_and_keeps_constants() -> None:
    tree = pbt_config().hyperparameters
    rng = random.Random(0)
    old = {
        "lr": 1.0,
        "model": {"width": 64, "dropout": 0.25},
        "optimizer": "adam",
        "epochs_per_step": 3,
    }
    for _ in range(200):
        new = explore(tree, old, rng, resample_probability=0.0, perturb_factor=0.5)
        assert new["lr"] in (0.5, 1.0)  # up is clipped to 10**0
        assert new["model"]["width"] in (32, 64)
        assert new["model"]["dropout"] in (0.125, 0.375)
        assert new["optimizer"] == "adam"  # categorical: only resampling changes it
        assert new["epochs_per_step"] == 3
    resampled = [
        explore(tree, old, rng, resample_probability=1.0, perturb_factor=0.5)["optimizer"]
        for _ in range(50)
    ]
    assert set(resampled) == {"sgd", "adam"}


def test_a_small_int_still_moves() -> None:
    tree = expconf.parse_experiment_config(
        {
            "entrypoint": "x",
            "searcher": {"name": "single", "metric": "x"},
            "hyperparameters": {"n": {"type": "int", "minval": 0, "maxval": 5}},
        }
    ).hyperparameters
    seen = {
        explore(tree, {"n": 1}, random.Random(i), resample_probability=0, perturb_factor=0.1)["n"]
        for i in range(30)
    }
    assert seen == {0, 2}


def test_progress_counts_rounds() -> None:
    s = run(pbt_config())
    assert s.progress[0] == 0.0 and s.progress[-1] == 1.0
    assert s.progress == sorted(s.progress)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"replace_function": {"truncate_fraction": 0.6}},
            "searcher.replace_function.truncate_fraction: must be in (0, 0.5], got 0.6",
        ),
        (
            {"replace_function": {"truncate_fraction": 0}},
            "searcher.replace_function.truncate_fraction: must be in (0, 0.5], got 0",
        ),
        ({"population_size": 0}, "searcher.population_size: must be >= 1"),
        ({"num_rounds": 0}, "searcher.num_rounds: must be >= 1"),
        ({"length_per_round": {"batches": 0}}, "searcher.length_per_round"),
        (
            {"population_size": 3, "replace_function": {"truncate_fraction": 0.2}},
            "searcher.replace_function.truncate_fraction: 0.2 of population_size 3 replaces no",
        ),
        (
            {"explore_function": {"resample_probability": 1.5, "perturb_factor": 0.2}},
            "searcher.explore_function.resample_probability: must be in [0, 1.0], got 1.5",
        ),
        (
            {"explore_function": None, "search_data": {"resample_probability": 0.1}},
            "searcher.search_data.perturb_factor: required",
        ),
        ({"replace_function": None}, "searcher.replace_function.truncate_fraction: required"),
    ],
)
def test_invalid_settings_are_refused_with_the_field_named(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(expconf.InvalidConfig) as info:
        pbt_config(**fields)
    assert any(e.startswith(message) for e in info.value.errors), info.value.errors


def test_search_data_is_accepted_for_explore_function() -> None:
    cfg = pbt_config(
        explore_function=None, search_data={"resample_probability": 0.5, "perturb_factor": 0.1}
    )
    assert isinstance(cfg.searcher, expconf.PBTSearcher)
    assert cfg.searcher.resample_probability == 0.5
    again = expconf.parse_experiment_config(cfg.to_dict())
    assert again.searcher == cfg.searcher


def test_preview_counts_what_the_search_runs() -> None:
    cfg = pbt_config(population_size=5, num_rounds=3, replace_function={"truncate_fraction": 0.4})
    entries, unit = preview.preview(cfg)
    assert unit == "batches"
    assert entries == [(2, 10), (2, 20), (5, 30)]
    ran = collections.Counter(run(cfg).final_lengths().values())
    assert sorted((n, length) for length, n in ran.items()) == sorted(entries)
    assert preview.concurrency(cfg) == 5
