"""The Pareto front of a multi-objective search (``searcher.metrics``): the completed trials
that no other completed trial matches or beats in every metric while beating them in one.

One computation for everyone who shows the front: the master hands it to the WebUI with the
experiment, and ``det experiment describe`` prints it. The values are each trial's latest
validation, which is what the searcher told Optuna when the trial completed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

Objective = tuple[str, bool]  # (metric name, smaller is better)
K = TypeVar("K")


def objectives(config: dict[str, Any]) -> list[Objective]:
    """The search's objectives when it has several, else []."""
    searcher = config.get("searcher") or {}
    metrics = searcher.get("metrics") if isinstance(searcher, dict) else None
    if not isinstance(metrics, list) or len(metrics) < 2:
        return []
    return [(str(m["name"]), bool(m.get("smaller_is_better", True))) for m in metrics]


def values(
    latest_validation: str | Mapping[str, Any], goals: Sequence[Objective]
) -> list[float] | None:
    """A trial's objective values from its latest validation (JSON text, or the metrics
    themselves), if it has all."""
    try:
        latest = (
            json.loads(latest_validation or "{}")
            if isinstance(latest_validation, str)
            else latest_validation
        )
        found = [float(latest[name]) for name, _ in goals]
    except (KeyError, TypeError, ValueError):
        return None
    return None if any(math.isnan(v) for v in found) else found


def front(points: Sequence[tuple[K, list[float]]], goals: Sequence[Objective]) -> list[K]:
    """The keys of the points on the front, in the order given."""

    def loss(vals: list[float]) -> list[float]:
        return [v if smaller else -v for v, (_, smaller) in zip(vals, goals, strict=True)]

    losses = [loss(vals) for _, vals in points]
    return [
        key
        for (key, _), mine in zip(points, losses, strict=True)
        if not any(_dominates(other, mine) for other in losses)
    ]


def _dominates(a: list[float], b: list[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(
        x < y for x, y in zip(a, b, strict=True)
    )
