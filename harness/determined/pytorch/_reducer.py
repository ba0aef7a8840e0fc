"""Metric reduction: how per-batch metrics from every worker become one reported value.

``Reducer`` names the simple reductions ``PyTorchTrial.evaluation_reducer()`` may choose per
metric (``AVG`` of the per-batch values by default). ``MetricReducer`` is the interface for
custom reductions registered with ``PyTorchTrialContext.wrap_reducer()``: each worker reduces
what it saw (``per_slot_reduce``) and one function combines the workers' results
(``cross_slot_reduce``).
"""

from __future__ import annotations

import abc
import enum
import math
from collections.abc import Callable, Mapping
from typing import Any


class Reducer(enum.Enum):
    """A simple reduction of one metric over every batch of every worker."""

    AVG = "avg"
    SUM = "sum"
    MAX = "max"
    MIN = "min"


class MetricReducer(abc.ABC):
    """A custom metric reduction (register it with ``context.wrap_reducer``).

    The trainer calls ``reset()`` before each training window and each validation, your
    ``train_batch``/``evaluate_batch`` feeds it (through your own methods, e.g. ``update``),
    then every worker's ``per_slot_reduce()`` result is gathered and ``cross_slot_reduce``
    turns the list (one item per worker, in rank order) into the metric value, or into a
    dict of metric names to values when the reducer was wrapped without a ``name``.
    """

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget everything seen so far."""

    @abc.abstractmethod
    def per_slot_reduce(self) -> Any:
        """This worker's partial result (must be picklable)."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        """The final value from every worker's ``per_slot_reduce()`` result."""


class _FunctionReducer(MetricReducer):
    """``wrap_reducer(fn)``: collects ``update(value)`` calls; ``fn`` gets every value."""

    def __init__(self, fn: Callable[[list[Any]], Any]) -> None:
        self._fn = fn
        self._values: list[Any] = []

    def update(self, value: Any) -> None:
        """Record one value (typically one batch's)."""
        self._values.append(value)

    def reset(self) -> None:
        self._values = []

    def per_slot_reduce(self) -> Any:
        return self._values

    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        return self._fn([value for values in per_slot_metrics for value in values])


class WrappedReducer:
    """A ``MetricReducer`` registered with the context, and where its result goes."""

    def __init__(
        self,
        reducer: MetricReducer,
        *,
        name: str | None,
        for_training: bool,
        for_validation: bool,
    ) -> None:
        self.reducer = reducer
        self.name = name
        self.for_training = for_training
        self.for_validation = for_validation

    def result(self, per_slot: list[Any]) -> dict[str, Any]:
        """The metrics this reducer contributes, from every worker's partial result."""
        value = self.reducer.cross_slot_reduce(per_slot)
        if self.name is not None:
            return {self.name: value}
        if not isinstance(value, Mapping):
            raise TypeError(
                f"{type(self.reducer).__name__}.cross_slot_reduce() returned "
                f"{type(value).__name__}; a reducer wrapped without a name must return a dict "
                "of metric names to values (or pass name=... to wrap_reducer)"
            )
        return dict(value)


def wrap(
    reducer: MetricReducer | Callable[[list[Any]], Any],
    *,
    name: str | None,
    for_training: bool,
    for_validation: bool,
) -> WrappedReducer:
    """What a context's ``wrap_reducer()`` registers (the arguments checked)."""
    if isinstance(reducer, MetricReducer):
        wrapped: MetricReducer = reducer
    elif callable(reducer):
        wrapped = _FunctionReducer(reducer)
    else:
        raise TypeError(
            "wrap_reducer() takes a pytorch.MetricReducer or a function of a list of "
            f"values, not {type(reducer).__name__}"
        )
    if not (for_training or for_validation):
        raise ValueError("wrap_reducer(): for_training and for_validation are both False")
    return WrappedReducer(
        wrapped, name=name, for_training=for_training, for_validation=for_validation
    )


class Partial:
    """One worker's running reduction of per-batch scalar metrics (picklable)."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.maxima: dict[str, float] = {}
        self.minima: dict[str, float] = {}

    def add(self, metrics: Mapping[str, Any], *, what: str) -> None:
        """Fold one batch's metrics in."""
        for name, raw in metrics.items():
            value = scalar(raw, what=f"{what} metric {name!r}")
            self.sums[name] = self.sums.get(name, 0.0) + value
            self.counts[name] = self.counts.get(name, 0) + 1
            self.maxima[name] = max(self.maxima.get(name, -math.inf), value)
            self.minima[name] = min(self.minima.get(name, math.inf), value)

    @property
    def empty(self) -> bool:
        """Whether no batch was folded in."""
        return not self.counts


def combine(
    partials: list[Partial], reducers: Reducer | Mapping[str, Reducer] = Reducer.AVG
) -> dict[str, float]:
    """Every worker's partial reductions as final values, one reduction per metric."""
    names: list[str] = []
    for part in partials:
        names.extend(n for n in part.counts if n not in names)
    out: dict[str, float] = {}
    for name in names:
        how = reducers if isinstance(reducers, Reducer) else reducers.get(name, Reducer.AVG)
        have = [p for p in partials if name in p.counts]
        if how is Reducer.AVG:
            out[name] = sum(p.sums[name] for p in have) / sum(p.counts[name] for p in have)
        elif how is Reducer.SUM:
            out[name] = sum(p.sums[name] for p in have)
        elif how is Reducer.MAX:
            out[name] = max(p.maxima[name] for p in have)
        else:
            out[name] = min(p.minima[name] for p in have)
    return out


def check_reducers(value: Any) -> Reducer | dict[str, Reducer]:
    """What ``evaluation_reducer()`` returned, checked."""
    if isinstance(value, Reducer):
        return value
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, Reducer) for k, v in value.items()
    ):
        return dict(value)
    raise TypeError(
        "evaluation_reducer() must return a pytorch.Reducer or a dict of metric names to "
        f"pytorch.Reducer values, not {value!r}"
    )


def scalar(value: Any, *, what: str) -> float:
    """A metric value as a float: numbers, numpy scalars and one-element tensors."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return float(item())
        except (ValueError, RuntimeError, TypeError):
            pass
    raise TypeError(
        f"{what} must be a number or a one-element tensor/array, not {type(value).__name__}"
        + (f" of shape {tuple(value.shape)}" if hasattr(value, "shape") else "")
    )
