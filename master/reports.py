"""What running trials report: metrics and progress (checkpoints are in ``checkpoints``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from determined.api.gen import v1
from determined.common import errors
from master import queries
from master.db import Database
from master.events import EventBus
from master.experiment import LiveExperiments
from master.search.searcher import searcher_value

log = logging.getLogger(__name__)


class Reports:
    def __init__(self, db: Database, live: LiveExperiments, events: EventBus) -> None:
        self._db = db
        self._events = events
        self._live = live

    async def metrics(self, trial_id: int, run_id: int, reports: Sequence[v1.MetricReport]) -> None:
        found = self._live.trial(trial_id)
        if found is None:
            await queries.ensure_trial(self._db, trial_id)
            raise errors.FailedPrecondition(f"trial {trial_id} has ended; it takes no more metrics")
        exp, trial = found
        name = exp.config.searcher.metric
        smaller = exp.config.searcher.smaller_is_better
        rows = []
        best: float | None = None
        latest_validation: str | None = None
        steps = 0
        for r in reports:
            rows.append(
                (
                    trial_id,
                    run_id,
                    r.group,
                    r.steps_completed,
                    r.metrics,
                    r.batch_metrics,
                    r.timestamp,
                )
            )
            steps = max(steps, r.steps_completed)
            if r.group == "validation":
                latest_validation = r.metrics
                value = searcher_value(json.loads(r.metrics), name)
                if value is not None and (best is None or (value < best) == smaller):
                    best = value
        better = "MIN" if smaller else "MAX"
        # The reports and what they change in the trial's row: one transaction.
        async with self._db.atomic():
            await self._db.execute_many(
                "INSERT INTO metrics (trial_id, run_id, grp, steps_completed, metrics,"
                " batch_metrics, timestamp) VALUES (?,?,?,?,?,?,?)",
                rows,
            )
            await self._db.execute(
                f"UPDATE trials SET steps_completed = MAX(steps_completed, ?),"
                f" latest_validation = COALESCE(?, latest_validation),"
                f" best_validation = CASE WHEN ? IS NULL THEN best_validation"
                f" WHEN best_validation IS NULL THEN ? ELSE {better}(best_validation, ?) END"
                f" WHERE id = ?",
                (steps, latest_validation, best, best, best, trial_id),
            )
        trial.steps_completed = max(trial.steps_completed, steps)
        self._events.publish(
            "metrics",
            trial_id=trial_id,
            experiment_id=exp.id,
            groups=sorted({r.group for r in reports}),
            steps_completed=steps,
        )

    async def progress(self, trial_id: int, progress: float) -> None:
        await queries.ensure_trial(self._db, trial_id)
        progress = min(1.0, max(0.0, progress))
        async with self._db.atomic():
            await self._db.execute(
                "UPDATE trials SET progress = ? WHERE id = ?", (progress, trial_id)
            )
            found = self._live.trial(trial_id)
            if found is None:
                return
            exp = found[0]
            row = await self._db.fetch_one(
                "SELECT SUM(CASE WHEN state IN ('COMPLETED','CANCELED','ERROR') THEN 1.0"
                " ELSE progress END) AS done FROM trials WHERE experiment_id = ?",
                (exp.id,),
            )
            target = max(1, exp.search.target_trials())
            done = float(row["done"] or 0) if row is not None else 0.0
            await self._db.execute(
                "UPDATE experiments SET progress = ? WHERE id = ?",
                (min(1.0, done / target), exp.id),
            )
