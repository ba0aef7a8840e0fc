"""Folding a metric report into the one already stored for the same trial, run, group and
step: keys the stored report lacks are added, keys it has keep their first value. A
report sent again (a retry whose first attempt was stored but whose answer was lost)
therefore changes nothing, and two reports of different metrics at one step become one,
as Determined merges them."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Folded:
    metrics: str
    batch_metrics: str


def fold(
    metrics: str, batch_metrics: str, later_metrics: str, later_batch_metrics: str
) -> Folded | None:
    """The stored report (``metrics``, ``batch_metrics``, JSON texts) with what the later
    one adds; None when it adds nothing."""
    stored, later = json.loads(metrics), json.loads(later_metrics)
    added = {}
    if isinstance(stored, dict) and isinstance(later, dict):
        added = {k: v for k, v in later.items() if k not in stored}
    batches = batch_metrics or later_batch_metrics
    if not added and batches == batch_metrics:
        return None
    return Folded(json.dumps({**stored, **added}) if added else metrics, batches)
