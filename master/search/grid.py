"""Grid search: one trial per point of the cartesian product of every hyperparameter's values.

The values per hyperparameter follow Determined's grid method: ``const`` gives its value,
``categorical`` every value, and ``int``/``double``/``log`` give ``count`` evenly spaced
values with both ends included (``count: 1`` gives the midpoint; an ``int`` count above the
number of integers in the range gives every integer). Points are enumerated with the first
hyperparameter varying slowest, so trial ``rN`` always gets the same point.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from determined.common import expconf
from pydet.master.search.simple import OneShotSearch


def _round_half_away(x: float) -> int:
    """Rounds .5 away from zero, as Determined does; Python's round() would round to even
    and pick different integers for the same config."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def grid_values(hp: expconf.Hyperparameter) -> list[Any]:
    """The values one hyperparameter takes on the grid."""
    if isinstance(hp, expconf.ConstHP):
        return [hp.val]
    if isinstance(hp, expconf.CategoricalHP):
        return list(hp.vals)
    if hp.count is None:
        raise ValueError("grid search needs a count on every int, double and log hyperparameter")
    if isinstance(hp, expconf.IntHP):
        count = min(hp.count, hp.maxval - hp.minval + 1)
        if count == 1:
            return [_round_half_away((hp.minval + hp.maxval) / 2)]
        step = (hp.maxval - hp.minval) / (count - 1)
        return [_round_half_away(hp.minval + i * step) for i in range(count)]
    exponents = _spaced(float(hp.minval), float(hp.maxval), hp.count)
    if isinstance(hp, expconf.DoubleHP):
        return exponents
    return [math.pow(hp.base, u) for u in exponents]


def _spaced(lo: float, hi: float, count: int) -> list[float]:
    if count == 1:
        return [(lo + hi) / 2]
    # The last value is set to hi exactly so that float steps never miss the upper end.
    return [lo + i * (hi - lo) / (count - 1) for i in range(count - 1)] + [hi]


def grid_axes(tree: expconf.HParamTree) -> list[tuple[tuple[str, ...], list[Any]]]:
    """Each hyperparameter's path and its grid values, in config order."""
    return [(path, grid_values(hp)) for path, hp in expconf.flatten_hparams(tree).items()]


def grid_size(tree: expconf.HParamTree) -> int:
    """The number of grid points, without listing them."""
    return math.prod(len(values) for _, values in grid_axes(tree))


def grid_points(tree: expconf.HParamTree) -> list[dict[str, Any]]:
    """Every point of the grid as the nested ``hparams`` a trial sees."""
    axes = grid_axes(tree)
    paths = [path for path, _ in axes]
    return [
        expconf.unflatten_hparams(dict(zip(paths, combo, strict=True)))
        for combo in itertools.product(*(values for _, values in axes))
    ]


class GridSearch(OneShotSearch):
    """One trial per grid point, ``max_concurrent_trials`` at a time (0: no limit)."""

    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        assert isinstance(config.searcher, expconf.GridSearcher)
        self.searcher = config.searcher
        # Derived from the config alone, so it is rebuilt on restore rather than stored.
        self.points = grid_points(config.hyperparameters)

    def _limit(self) -> int:
        return self.searcher.max_concurrent_trials or len(self.points)

    def _hparams(self, index: int) -> dict[str, Any] | None:
        return self.points[index]

    def target_trials(self) -> int:
        return len(self.points)
