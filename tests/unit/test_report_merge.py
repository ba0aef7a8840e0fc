"""A report for a step that already has one is folded into it."""

from __future__ import annotations

import json

from pydet.master.store.report_merge import Folded, fold


def test_the_same_report_again_changes_nothing() -> None:
    text = json.dumps({"loss": 0.5, "acc": float("nan")})
    assert fold(text, "[1, 2]", text, "[1, 2]") is None


def test_new_keys_are_added_and_known_keys_keep_their_first_value() -> None:
    folded = fold('{"loss": 0.5}', "", '{"loss": 0.1, "acc": 0.9}', "")
    assert folded is not None
    assert json.loads(folded.metrics) == {"loss": 0.5, "acc": 0.9}
    assert fold('{"loss": 0.5}', "", '{"loss": 0.1}', "") is None


def test_batch_metrics_are_taken_only_where_there_were_none() -> None:
    assert fold('{"x": 1}', "", '{"x": 1}', "[3]") == Folded('{"x": 1}', "[3]")
    assert fold('{"x": 1}', "[1]", '{"x": 1}', "[3]") is None
