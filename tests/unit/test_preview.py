from __future__ import annotations

import math
from typing import Any

import pytest

from pydet.master.search.preview import concurrency, preview
from tests.unit.search_sim import config

HPS = {
    "a": {"type": "int", "minval": 0, "maxval": 9, "count": 4},
    "b": {"type": "categorical", "vals": ["x", "y", "z"]},
    "g": {"lr": {"type": "log", "base": 10, "minval": -5, "maxval": -1, "count": 5}},
    "c": 3,
}


def test_single_is_one_trial_to_max_length() -> None:
    cfg = config({"name": "single", "metric": "m", "max_length": {"epochs": 3}})
    assert preview(cfg) == ([(1, 3)], "epochs")


def test_random_is_max_trials_to_max_length() -> None:
    cfg = config({"name": "random", "metric": "m", "max_trials": 7, "max_length": 250}, HPS)
    assert preview(cfg) == ([(7, 250)], "")


def test_grid_is_the_size_of_the_product() -> None:
    cfg = config({"name": "grid", "metric": "m", "max_length": {"records": 64}}, HPS)
    assert preview(cfg) == ([(4 * 3 * 5, 64)], "records")


def test_a_huge_grid_is_counted_without_listing_it() -> None:
    # 10**24 points: listing them would never finish (the suite's timeout would fail it).
    hps = {f"h{i}": {"type": "double", "minval": 0, "maxval": 1, "count": 1000} for i in range(8)}
    cfg = config({"name": "grid", "metric": "m", "max_length": 1}, hps)
    assert preview(cfg) == ([(1000**8, 1)], "")


def asha(**fields: Any) -> dict[str, Any]:
    return {"name": "adaptive_asha", "metric": "m", "max_length": {"batches": 1600}, **fields}


@pytest.mark.parametrize(
    ("mode", "divisor", "max_rungs", "max_trials"),
    [
        ("aggressive", 4, 3, 16),
        ("standard", 4, 3, 16),
        ("conservative", 4, 3, 16),
        ("standard", 2, 5, 100),
        ("aggressive", 3, 4, 81),
    ],
)
def test_asha_preview_counts_trials_per_rung_length(
    mode: str, divisor: int, max_rungs: int, max_trials: int
) -> None:
    cfg = config(asha(max_trials=max_trials, divisor=divisor, max_rungs=max_rungs, mode=mode))
    entries, unit = preview(cfg)
    assert unit == "batches"
    assert sum(n for n, _ in entries) == max_trials
    lengths = [length for _, length in entries]
    assert lengths == sorted(lengths) and len(set(lengths)) == len(lengths)
    rungs = min(max_rungs, 1 + max(r for r in range(20) if divisor**r <= max_trials))
    possible = {int(1600 / divisor**j) for j in range(rungs)}
    assert set(lengths) <= possible and 1600 in lengths
    assert preview(cfg) == (entries, unit)


def test_aggressive_asha_preview_reaches_every_rung_at_least_as_sha_would() -> None:
    cfg = config(asha(max_trials=16, divisor=4, max_rungs=3, mode="aggressive"))
    entries, _ = preview(cfg)
    ended = dict((length, n) for n, length in entries)
    reached = {length: sum(n for ln, n in ended.items() if ln >= length) for length in ended}
    assert reached[100] == 16
    assert reached[400] >= 4 and reached[1600] >= math.floor(reached[400] / 4) >= 1


def test_stop_driven_preview_counts_trials_by_the_time_they_stopped() -> None:
    cfg = config(
        {
            "name": "adaptive_asha",
            "metric": "m",
            "max_trials": 20,
            "time_metric": "batches",
            "max_time": 900,
            "divisor": 3,
            "mode": "aggressive",
        }
    )
    entries, unit = preview(cfg)
    assert unit == "batches"
    assert sum(n for n, _ in entries) == 20
    assert {length for _, length in entries} <= {100, 300, 900}
    assert entries[-1][1] == 900


def test_a_time_metric_that_is_not_a_unit_previews_as_a_bare_number() -> None:
    cfg = config(
        {
            "name": "adaptive_asha",
            "metric": "m",
            "max_trials": 4,
            "time_metric": "samples_seen",
            "max_time": 100,
        }
    )
    assert preview(cfg)[1] == ""


def test_preview_depends_on_the_experiment_seed_only() -> None:
    base = asha(max_trials=50, divisor=3, max_rungs=4, mode="standard")
    a = config(base, reproducibility={"experiment_seed": 3})
    b = config(base, reproducibility={"experiment_seed": 3})
    assert preview(a) == preview(b)


def test_optuna_is_max_trials_to_max_length_at_its_concurrency() -> None:
    settings = {"name": "optuna", "metric": "m", "max_trials": 9, "max_concurrent_trials": 3}
    cfg = config({**settings, "max_length": {"batches": 40}}, HPS)
    assert preview(cfg) == ([(9, 40)], "batches")
    assert concurrency(cfg) == 3
    assert concurrency(config({"name": "single", "metric": "m"})) == 1
