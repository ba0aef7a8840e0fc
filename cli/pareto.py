"""The Pareto front of a multi-objective search (``searcher.metrics``), for
``det experiment describe``: the completed trials that no other completed trial matches or
beats in every metric while beating them in one. The values are each trial's latest
validation, which is what the searcher told Optuna when the trial completed."""

from __future__ import annotations

import json
import math
from typing import Any

from determined.api.gen import v1

Objective = tuple[str, bool]  # (metric name, smaller is better)


def objectives(config: dict[str, Any]) -> list[Objective]:
    """The search's objectives when it has several, else []."""
    searcher = config.get("searcher") or {}
    metrics = searcher.get("metrics") if isinstance(searcher, dict) else None
    if not isinstance(metrics, list) or len(metrics) < 2:
        return []
    return [(str(m["name"]), bool(m.get("smaller_is_better", True))) for m in metrics]


def front(trials: list[v1.Trial], goals: list[Objective]) -> list[tuple[v1.Trial, list[float]]]:
    """Each trial of the front with its metric values, in trial order."""
    points: list[tuple[v1.Trial, list[float]]] = []
    for trial in trials:
        if trial.state != v1.State.COMPLETED:
            continue
        values = _values(trial, [name for name, _ in goals])
        if values is not None:
            points.append((trial, values))

    def loss(values: list[float]) -> list[float]:
        return [v if smaller else -v for v, (_, smaller) in zip(values, goals, strict=True)]

    losses = [loss(values) for _, values in points]
    return [
        point
        for point, mine in zip(points, losses, strict=True)
        if not any(_dominates(other, mine) for other in losses)
    ]


def _values(trial: v1.Trial, names: list[str]) -> list[float] | None:
    try:
        latest = json.loads(trial.latest_validation or "{}")
        values = [float(latest[name]) for name in names]
    except (KeyError, TypeError, ValueError):
        return None
    return None if any(math.isnan(v) for v in values) else values


def _dominates(a: list[float], b: list[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(
        x < y for x, y in zip(a, b, strict=True)
    )


def front_text(points: list[tuple[v1.Trial, list[float]]], goals: list[Objective]) -> str:
    """`Pareto front (loss lower, accuracy higher is better):` and a line per trial."""
    names = ", ".join(f"{name} {'lower' if smaller else 'higher'}" for name, smaller in goals)
    lines = [f"Pareto front ({names} is better):"]
    for trial, values in points:
        shown = ", ".join(
            f"{name} {value:.6g}" for (name, _), value in zip(goals, values, strict=True)
        )
        lines.append(f"  trial {trial.id}: {shown}")
    return "\n".join(lines)
