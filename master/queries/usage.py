"""Resource use over time (`det resources`): slot-seconds of every allocation that overlaps
a window, and their sums per day or month (Determined's ResourceAllocationRaw and
ResourceAllocationAggregated).

An allocation's slots are those of its containers; a running one counts up to now. Time is
split at the window's (or period's) edges, so sums over adjacent windows add up.
"""

from __future__ import annotations

import datetime
import json
from collections import defaultdict
from dataclasses import dataclass, field

from pydet.master.store.db import Database

DAILY = "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY"
MONTHLY = "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_MONTHLY"


@dataclass(frozen=True)
class UsageRow:
    allocation_id: str
    task_id: str
    kind: str  # TRIAL, or the other task's type (TENSORBOARD, COMMAND, NOTEBOOK, SHELL)
    start_time: float
    end_time: float | None
    experiment_id: int
    username: str
    labels: tuple[str, ...]
    resource_pool: str
    slots: int
    agents: tuple[str, ...]

    def seconds_within(self, after: float, before: float, now: float) -> float:
        end = self.end_time if self.end_time is not None else now
        overlap = min(end, before) - max(self.start_time, after)
        return max(0.0, overlap) * self.slots


async def allocations(db: Database, after: float, before: float) -> list[UsageRow]:
    """The allocations that ran at some time in ``[after, before)``, oldest first."""
    rows = await db.fetch_all(
        "SELECT a.id, a.task_id, a.trial_id, a.containers, a.start_time, a.end_time,"
        " e.id AS experiment_id, e.username AS exp_user, e.config, g.username AS task_user,"
        " g.resource_pool AS task_pool, g.task_type"
        " FROM allocations a"
        " LEFT JOIN trials t ON t.id = a.trial_id"
        " LEFT JOIN experiments e ON e.id = t.experiment_id"
        " LEFT JOIN generic_tasks g ON g.id = a.task_id"
        " WHERE a.start_time < ? AND (a.end_time IS NULL OR a.end_time > ?)"
        " ORDER BY a.start_time, a.id",
        (before, after),
    )
    out = []
    for r in rows:
        containers = json.loads(r["containers"] or "[]")
        config = json.loads(r["config"]) if r["config"] else {}
        labels = config.get("labels") or []
        pool = (config.get("resources") or {}).get("resource_pool") or r["task_pool"] or ""
        out.append(
            UsageRow(
                allocation_id=r["id"],
                task_id=r["task_id"],
                kind="TRIAL" if r["trial_id"] is not None else r["task_type"] or "TASK",
                start_time=r["start_time"],
                end_time=r["end_time"],
                experiment_id=r["experiment_id"] or 0,
                username=r["exp_user"] or r["task_user"] or "",
                labels=tuple(str(label) for label in labels),
                resource_pool=pool,
                slots=sum(len(c.get("slot_ids") or []) for c in containers),
                agents=tuple(sorted({str(c.get("agent_id", "")) for c in containers})),
            )
        )
    return out


@dataclass
class Period:
    start: datetime.date
    seconds: float = 0.0
    by_username: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    by_experiment_label: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    by_resource_pool: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    by_agent_label: dict[str, float] = field(default_factory=lambda: defaultdict(float))


def _epoch(day: datetime.date) -> float:
    return datetime.datetime.combine(day, datetime.time(), datetime.UTC).timestamp()


def _next(day: datetime.date, period: str) -> datetime.date:
    if period == MONTHLY:
        return (day.replace(day=28) + datetime.timedelta(days=4)).replace(day=1)
    return day + datetime.timedelta(days=1)


def periods(start: datetime.date, end: datetime.date, period: str) -> list[datetime.date]:
    """The first day of each period from the one holding ``start`` to the one holding ``end``."""
    day = start.replace(day=1) if period == MONTHLY else start
    out = []
    while day <= end:
        out.append(day)
        day = _next(day, period)
    return out


async def aggregated(
    db: Database, start: datetime.date, end: datetime.date, period: str, *, now: float
) -> list[Period]:
    """Slot-seconds per period (UTC days or months) from ``start`` to ``end``, both days
    included, split by user, experiment label and pool."""
    firsts = periods(start, end, period)
    if not firsts:
        return []
    window_end = _epoch(_next(firsts[-1], period))
    rows = await allocations(db, _epoch(firsts[0]), window_end)
    out = []
    for first in firsts:
        p = Period(first)
        lo, hi = _epoch(first), _epoch(_next(first, period))
        for row in rows:
            seconds = row.seconds_within(lo, hi, now)
            if seconds <= 0:
                continue
            p.seconds += seconds
            p.by_username[row.username] += seconds
            p.by_resource_pool[row.resource_pool] += seconds
            for label in row.labels:
                p.by_experiment_label[label] += seconds
        out.append(p)
    return out
