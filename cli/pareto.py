"""The Pareto front of a multi-objective search for ``det experiment describe``; the front
itself is computed by :mod:`determined.common.pareto`, which the master also uses."""

from __future__ import annotations

from determined.api.gen import v1
from determined.common import pareto, structs
from determined.common.pareto import Objective, objectives

__all__ = ["Objective", "front", "front_text", "objectives"]


def front(trials: list[v1.Trial], goals: list[Objective]) -> list[tuple[v1.Trial, list[float]]]:
    """Each trial of the front with its metric values, in trial order."""
    points: list[tuple[tuple[v1.Trial, list[float]], list[float]]] = []
    for trial in trials:
        if trial.state != v1.State.COMPLETED:
            continue
        latest = trial.latest_validation
        found = pareto.values(
            structs.python(latest.metrics.avg_metrics) if latest and latest.metrics else {}, goals
        )
        if found is not None:
            points.append(((trial, found), found))
    return pareto.front(points, goals)


def front_text(points: list[tuple[v1.Trial, list[float]]], goals: list[Objective]) -> str:
    """`Pareto front (loss lower, accuracy higher is better):` and a line per trial."""
    names = ", ".join(f"{name} {'lower' if smaller else 'higher'}" for name, smaller in goals)
    lines = [f"Pareto front ({names} is better):"]
    for trial, vals in points:
        shown = ", ".join(
            f"{name} {value:.6g}" for (name, _), value in zip(goals, vals, strict=True)
        )
        lines.append(f"  trial {trial.id}: {shown}")
    return "\n".join(lines)
