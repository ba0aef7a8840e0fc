"""What running trials report: metrics and progress (checkpoints are in ``checkpoints``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from determined.api.gen import v1
from determined.common import errors
from pydet.master import queries
from pydet.master.events import EventBus
from pydet.master.experiments.live import Experiment, LiveExperiments
from pydet.master.search.searcher import searcher_value
from pydet.master.store.db import Database
from pydet.master.store.report_merge import fold

log = logging.getLogger(__name__)


Key = tuple[str, int]  # a report's group and steps


class Validation(NamedTuple):
    """A validation report that changed what is stored, with the metrics now stored."""

    steps_completed: int
    metrics: str


class _Batch:
    """A batch of one run's reports, folded into what the run has stored (``stored``: key
    -> [metrics, batch_metrics, row id]) and into each other."""

    def __init__(
        self,
        trial_id: int,
        run_id: int,
        stored: dict[Key, list[Any]],
        reports: Sequence[v1.MetricReport],
    ) -> None:
        self.stored = stored
        # key -> the row to insert: [trial_id, run_id, group, steps, metrics, batch, time]
        self.new: dict[Key, list[Any]] = {}
        self.folded: set[Key] = set()
        self.validations: list[Validation] = []
        new, validations = self.new, self.validations
        for r in reports:  # the hot path: well under a microsecond a report
            group, steps = r.group, r.steps_completed
            key = (group, steps)
            if key in new or key in stored:
                self._fold(key, r)
                continue
            new[key] = [trial_id, run_id, group, steps, r.metrics, r.batch_metrics, r.timestamp]
            if group == "validation":
                validations.append(Validation(steps, r.metrics))
        keys = [*new, *self.folded]
        self.groups = set(map(itemgetter(0), keys))
        self.steps = max(map(itemgetter(1), keys), default=-1)

    def _fold(self, key: Key, r: v1.MetricReport) -> None:
        row, at = (self.new[key], 4) if key in self.new else (self.stored[key], 0)
        merged = fold(row[at], row[at + 1], r.metrics, r.batch_metrics)
        if merged is None:
            return  # nothing new: sent again
        row[at], row[at + 1] = merged.metrics, merged.batch_metrics
        if at == 0:
            self.folded.add(key)
        if r.group == "validation":
            self.validations.append(Validation(r.steps_completed, merged.metrics))


class Reports:
    def __init__(self, db: Database, live: LiveExperiments, events: EventBus) -> None:
        self._db = db
        self._events = events
        self._live = live

    async def metrics(
        self, trial_id: int, run_id: int, reports: Sequence[v1.MetricReport]
    ) -> list[Validation]:
        """Store a batch of one run's reports, with what they change in the trial's row, in
        one transaction. Returns the validation reports that changed what is stored, with
        the metrics now stored for their step, in order.

        The store keeps one report per trial, run, group and step: a report for a step that
        has one is folded into it (``report_merge``), so a batch sent again because its
        answer was lost changes nothing and is not stored twice."""
        found = self._live.trial(trial_id)
        if found is None:
            await queries.ensure_trial(self._db, trial_id)
            raise errors.FailedPrecondition(f"trial {trial_id} has ended; it takes no more metrics")
        exp, trial = found
        known = trial.stored_steps if run_id == trial.run_id else None
        async with self._db.atomic():
            if known is not None and all(
                r.steps_completed > known.get(r.group, -1) for r in reports
            ):
                stored: dict[Key, list[Any]] = {}  # all past what the run stored
            else:
                stored = await self._stored(trial_id, run_id, reports)
            batch = _Batch(trial_id, run_id, stored, reports)
            if not batch.groups:
                return []
            await self._db.execute_many(
                "INSERT INTO metrics (trial_id, run_id, grp, steps_completed, metrics,"
                " batch_metrics, timestamp) VALUES (?,?,?,?,?,?,?)",
                batch.new.values(),
            )
            if batch.folded:
                await self._db.execute_many(
                    "UPDATE metrics SET metrics = ?, batch_metrics = ? WHERE id = ?",
                    [batch.stored[key] for key in batch.folded],
                )
            await self._update_trial(exp, trial_id, batch)
        if known is not None:
            for group, steps in batch.new:
                known[group] = max(steps, known.get(group, -1))
        trial.steps_completed = max(trial.steps_completed, batch.steps)
        self._events.publish(
            "metrics",
            trial_id=trial_id,
            experiment_id=exp.id,
            groups=sorted(batch.groups),
            steps_completed=batch.steps,
        )
        return batch.validations

    async def _stored(
        self, trial_id: int, run_id: int, reports: Sequence[v1.MetricReport]
    ) -> dict[Key, list[Any]]:
        """What the run has stored already for the groups and steps of ``reports``."""
        if not reports:
            return {}
        groups = sorted({r.group for r in reports})
        steps = [r.steps_completed for r in reports]
        rows = await self._db.fetch_all(
            "SELECT id, grp, steps_completed, metrics, batch_metrics FROM metrics"
            f" WHERE trial_id = ? AND grp IN ({','.join('?' * len(groups))})"
            " AND steps_completed BETWEEN ? AND ? AND run_id = ?",
            [trial_id, *groups, min(steps), max(steps), run_id],
        )
        return {
            (r["grp"], r["steps_completed"]): [r["metrics"], r["batch_metrics"], r["id"]]
            for r in rows
        }

    async def _update_trial(self, exp: Experiment, trial_id: int, batch: _Batch) -> None:
        """What a batch changes in the trial's row: its steps, latest validation and best
        searcher metric."""
        name = exp.config.searcher.metric
        smaller = exp.config.searcher.smaller_is_better
        best: float | None = None
        for v in batch.validations:
            value = searcher_value(json.loads(v.metrics), name)
            if value is not None and (best is None or (value < best) == smaller):
                best = value
        latest = batch.validations[-1].metrics if batch.validations else None
        better = "MIN" if smaller else "MAX"
        await self._db.write(
            f"UPDATE trials SET steps_completed = MAX(steps_completed, ?),"
            f" latest_validation = COALESCE(?, latest_validation),"
            f" best_validation = CASE WHEN CAST(? AS REAL) IS NULL THEN best_validation"
            f" WHEN best_validation IS NULL THEN ? ELSE {better}(best_validation, ?) END"
            f" WHERE id = ?",
            (batch.steps, latest, best, best, best, trial_id),
        )

    async def progress(self, trial_id: int, progress: float) -> None:
        await queries.ensure_trial(self._db, trial_id)
        progress = min(1.0, max(0.0, progress))
        async with self._db.atomic():
            await self._db.write(
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
            await self._db.write(
                "UPDATE experiments SET progress = ? WHERE id = ?",
                (min(1.0, done / target), exp.id),
            )
