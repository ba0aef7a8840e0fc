"""What running trials report: metrics, progress, early exits and checkpoints."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import pathlib
import shutil
from collections.abc import Sequence
from typing import Any

from determined.api.gen import v1
from determined.common import errors
from master import object_storage, retention
from master.db import Database
from master.events import EventBus
from master.experiments import Experiment, Experiments

log = logging.getLogger(__name__)


def _searcher_value(metrics: dict[str, Any], name: str | None) -> float | None:
    if not name or name not in metrics:
        return None
    try:
        value = float(metrics[name])
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def checkpoint_dir(storage: dict[str, Any], uuid: str) -> pathlib.Path | None:
    """Where a checkpoint's files are, when the master can reach them."""
    if storage.get("type") == "shared_fs":
        base = pathlib.Path(storage["host_path"])
        if storage.get("storage_path"):
            base = base / storage["storage_path"]
        return base / uuid
    if storage.get("type") == "directory":
        return pathlib.Path(storage["container_path"]) / uuid
    return None


class Reports:
    def __init__(self, db: Database, experiments: Experiments, events: EventBus) -> None:
        self._db = db
        self._events = events
        self._exps = experiments

    async def metrics(self, trial_id: int, run_id: int, reports: Sequence[v1.MetricReport]) -> None:
        found = self._exps.live_trial(trial_id)
        if found is None:
            await self._ensure_trial(trial_id)
            raise errors.FailedPrecondition(f"trial {trial_id} has ended; it takes no more metrics")
        exp, trial = found
        searcher = exp.config.searcher
        name = searcher.metric
        smaller = searcher.smaller_is_better
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
                value = _searcher_value(json.loads(r.metrics), name)
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

    async def apply_retention(self, exp: Experiment) -> None:
        """Delete the checkpoints the experiment's retention policy no longer keeps."""
        checkpoints = [
            retention.CheckpointRecord(
                uuid=r["uuid"],
                trial_id=r["trial_id"],
                steps_completed=r["steps_completed"],
                metric=metric,
                state=r["state"],
            )
            for r, metric in await self._checkpoints("c.experiment_id = ?", (exp.id,))
        ]
        trials = [retention.TrialRecord(id=t.id, state=t.state.value) for t in exp.trials.values()]
        policy = retention.RetentionPolicy.from_config(exp.config)
        doomed = retention.checkpoints_to_delete(checkpoints, trials, policy)
        if doomed:
            log.info(
                "experiment %d: deleting %d checkpoint(s) by its retention policy",
                exp.id,
                len(doomed),
            )
            await self.delete_checkpoints(sorted(doomed))

    async def _ensure_trial(self, trial_id: int) -> None:
        row = await self._db.fetch_one("SELECT id FROM trials WHERE id = ?", (trial_id,))
        if row is None:
            raise errors.NotFound(f"trial {trial_id} not found")

    async def progress(self, trial_id: int, progress: float) -> None:
        await self._ensure_trial(trial_id)
        progress = min(1.0, max(0.0, progress))
        async with self._db.atomic():
            await self._db.execute(
                "UPDATE trials SET progress = ? WHERE id = ?", (progress, trial_id)
            )
            found = self._exps.live_trial(trial_id)
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

    async def best_validation(self, experiment_id: int) -> float | None:
        row = await self._db.fetch_one(
            "SELECT config FROM experiments WHERE id = ?", (experiment_id,)
        )
        if row is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        smaller = json.loads(row["config"])["searcher"].get("smaller_is_better", True)
        agg = "MIN" if smaller else "MAX"
        best = await self._db.fetch_one(
            f"SELECT {agg}(best_validation) AS v FROM trials WHERE experiment_id = ?",
            (experiment_id,),
        )
        return None if best is None or best["v"] is None else float(best["v"])

    # -- checkpoints -------------------------------------------------------------------------

    async def checkpoint(self, c: v1.Checkpoint) -> None:
        if not c.uuid:
            raise errors.InvalidArgument("checkpoint.uuid is required")
        metadata = json.loads(c.metadata or "{}")
        if "steps_completed" not in metadata and not c.steps_completed:
            raise errors.InvalidArgument("checkpoint metadata must include steps_completed")
        await self._ensure_trial(c.trial_id)
        async with self._db.atomic():
            await self._record_checkpoint(c)
        found = self._exps.live_trial(c.trial_id)
        if found is not None:
            found[1].latest_checkpoint = c.uuid

    async def _record_checkpoint(self, c: v1.Checkpoint) -> None:
        """The checkpoint's row, and the trial's latest checkpoint pointing at it."""
        await self._db.execute(
            "INSERT OR REPLACE INTO checkpoints (uuid, trial_id, experiment_id, allocation_id,"
            " task_id, steps_completed, metadata, resources, size, state, report_time, storage)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                c.uuid,
                c.trial_id,
                c.experiment_id,
                c.allocation_id,
                c.task_id,
                c.steps_completed,
                c.metadata or "{}",
                json.dumps(dict(c.resources)),
                c.size,
                c.state or "COMPLETED",
                c.report_time,
                c.storage or "{}",
            ),
        )
        await self._db.execute(
            "UPDATE trials SET latest_checkpoint = ? WHERE id = ?", (c.uuid, c.trial_id)
        )

    async def get_checkpoint(self, uuid: str) -> v1.Checkpoint:
        from master import convert

        found = await self._checkpoints("c.uuid = ?", (uuid,))
        if not found:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        return convert.checkpoint(*found[0])

    async def get_checkpoints(self, *, experiment_id: int, trial_id: int) -> list[v1.Checkpoint]:
        from master import convert

        if trial_id:
            await self._ensure_trial(trial_id)
            found = await self._checkpoints("c.trial_id = ?", (trial_id,))
        else:
            await self._exps.ensure_experiment(experiment_id)
            found = await self._checkpoints("c.experiment_id = ?", (experiment_id,))
        return [convert.checkpoint(row, metric) for row, metric in found]

    async def _checkpoints(
        self, where: str, params: Sequence[Any]
    ) -> list[tuple[Any, float | None]]:
        """The checkpoint rows matching ``where`` (on ``checkpoints c``), oldest first, each
        with the searcher metric of its trial's latest validation at the same step.

        The metric is read in Python, not with SQLite's JSON functions: reports may hold NaN
        or Infinity, which those functions refuse as malformed JSON.
        """
        rows = await self._db.fetch_all(
            f"SELECT c.* FROM checkpoints c WHERE {where} ORDER BY c.report_time", params
        )
        if not rows:
            return []
        validations = await self._db.fetch_all(
            "SELECT c.uuid, m.metrics FROM checkpoints c JOIN metrics m"
            " ON m.trial_id = c.trial_id AND m.grp = 'validation'"
            f" AND m.steps_completed = c.steps_completed WHERE {where} ORDER BY m.id",
            params,
        )
        latest = {v["uuid"]: v["metrics"] for v in validations}  # the last report wins
        names = await self._searcher_metric_names({r["experiment_id"] for r in rows})
        out: list[tuple[Any, float | None]] = []
        for r in rows:
            metrics = latest.get(r["uuid"])
            name = names.get(r["experiment_id"])
            out.append((r, None if metrics is None else _searcher_value(json.loads(metrics), name)))
        return out

    async def _searcher_metric_names(self, experiment_ids: set[int]) -> dict[int, str]:
        ids = sorted(i for i in experiment_ids if i is not None)
        if not ids:
            return {}
        rows = await self._db.fetch_all(
            f"SELECT id, config FROM experiments WHERE id IN ({','.join('?' * len(ids))})", ids
        )
        return {r["id"]: json.loads(r["config"]).get("searcher", {}).get("metric") for r in rows}

    async def delete_checkpoints(self, uuids: Sequence[str]) -> None:
        """Mark the checkpoints DELETED, in one transaction (the caller's, when retention
        runs as part of a trial's end), and remove their files once it has committed: a
        master that dies in between leaves files behind, never a record of files that are
        gone."""
        doomed: list[tuple[str, dict[str, Any]]] = []
        for uuid in uuids:
            row = await self._db.fetch_one(
                "SELECT storage FROM checkpoints WHERE uuid = ?", (uuid,)
            )
            if row is None:
                raise errors.NotFound(f"checkpoint {uuid} not found")
            doomed.append((uuid, json.loads(row["storage"] or "{}")))

        async def remove() -> None:
            for uuid, storage in doomed:
                await self._remove_files(uuid, storage)

        async with self._db.atomic():
            await self._db.execute_many(
                "UPDATE checkpoints SET state = 'DELETED' WHERE uuid = ?",
                [(uuid,) for uuid, _ in doomed],
            )
            await self._db.after_commit(remove)

    async def delete_files(self, checkpoints: Sequence[tuple[str, str]]) -> None:
        """Remove the files of checkpoints whose records are already gone."""
        for uuid, storage in checkpoints:
            await self._remove_files(uuid, json.loads(storage or "{}"))

    async def _remove_files(self, uuid: str, storage: dict[str, Any]) -> None:
        if storage.get("type") == "s3":
            await object_storage.remove_objects(storage, uuid)
            return
        path = checkpoint_dir(storage, uuid)
        if path is not None:
            await asyncio.to_thread(shutil.rmtree, path, True)
