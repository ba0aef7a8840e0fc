"""`det trial`: the summary of a trial's metrics and ranking checkpoints by a metric."""

from __future__ import annotations

import json

import pytest

from determined.api.gen import v1
from pydet.cli import trial
from pydet.cli.__main__ import main


def report(group: str, steps: int, **metrics: object) -> v1.MetricReport:
    return v1.MetricReport(group=group, steps_completed=steps, metrics=json.dumps(metrics))


def test_summary_metrics_use_determineds_group_names_and_skip_non_numbers() -> None:
    reports = [
        report("training", 1, loss=4.0, note="warmup"),
        report("training", 2, loss=2.0),
        report("validation", 2, loss=3.0, ok=True),
        report("custom", 2, x=1),
    ]
    summary = trial.summary_metrics(reports)
    assert summary["avg_metrics"]["loss"] == {
        "count": 2,
        "sum": 6.0,
        "min": 2.0,
        "max": 4.0,
        "last": 2.0,
        "mean": 3.0,
        "type": "number",
    }
    assert set(summary["validation_metrics"]) == {"loss"}
    assert summary["custom"]["x"]["last"] == 1


def test_checkpoints_rank_by_the_validation_at_their_step() -> None:
    a = v1.Checkpoint(uuid="a", steps_completed=1)
    b = v1.Checkpoint(uuid="b", steps_completed=2)
    c = v1.Checkpoint(uuid="c", steps_completed=3)  # never validated: not ranked
    validations = [report("validation", 1, acc=0.5), report("validation", 2, acc=0.9)]
    best_first = trial.ranked_by([a, b, c], validations, "acc", smaller_is_better=False)
    assert [x.uuid for x in best_first] == ["b", "a"]
    worst_first = trial.ranked_by([a, b, c], validations, "acc", smaller_is_better=True)
    assert [x.uuid for x in worst_first] == ["a", "b"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["t", "download", "1", "--best", "--sort-by", "acc"], "must be set together"),
        (
            ["t", "download", "1", "--latest", "--sort-by", "acc", "--smaller-is-better", "no"],
            "only be used with --best",
        ),
    ],
)
def test_sort_by_needs_its_partner_and_best(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
