"""The Pareto front `det experiment describe` shows for a multi-objective search."""

from __future__ import annotations

from determined.api.gen import v1
from determined.common import structs
from pydet.cli import pareto

GOALS = [("loss", True), ("accuracy", False)]


def trial(tid: int, state: v1.State = v1.State.COMPLETED, **latest: float) -> v1.Trial:
    metrics = v1.Metrics(avg_metrics=structs.struct(latest))
    return v1.Trial(id=tid, state=state, latest_validation=v1.MetricsWorkload(metrics=metrics))


def test_only_completed_trials_with_every_metric_and_not_dominated_make_the_front() -> None:
    trials = [
        trial(1, loss=0.1, accuracy=0.7),
        trial(2, loss=0.3, accuracy=0.9),
        trial(3, loss=0.3, accuracy=0.8),  # worse than 2 in accuracy, equal in loss
        trial(4, loss=0.05),  # accuracy missing
        trial(5, v1.State.ERROR, loss=0.0, accuracy=1.0),
        trial(6, loss=0.1, accuracy=0.7),  # ties 1: neither dominates the other
    ]
    front = pareto.front(trials, GOALS)
    assert [(t.id, values) for t, values in front] == [
        (1, [0.1, 0.7]),
        (2, [0.3, 0.9]),
        (6, [0.1, 0.7]),
    ]
    text = pareto.front_text(front, GOALS)
    assert text.splitlines()[0] == "Pareto front (loss lower, accuracy higher is better):"
    assert "  trial 2: loss 0.3, accuracy 0.9" in text


def test_a_single_objective_search_has_no_front() -> None:
    assert pareto.objectives({"searcher": {"name": "optuna", "metric": "loss"}}) == []
    assert pareto.objectives(
        {"searcher": {"metrics": [{"name": "a"}, {"name": "b", "smaller_is_better": False}]}}
    ) == [("a", True), ("b", False)]
