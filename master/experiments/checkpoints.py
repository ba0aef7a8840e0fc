"""Checkpoint records: what trials report, the retention policy applied when a trial
ends, and deletion (records marked in the caller's transaction, files removed once it has
committed)."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from collections.abc import Sequence
from typing import Any

from determined.api.gen import v1
from determined.common import checkpoint_info, errors, structs, timestamps
from pydet.master import queries
from pydet.master.checkpoint_storage import s3, shared_fs
from pydet.master.experiments import retention
from pydet.master.experiments.live import Experiment
from pydet.master.store.db import Database

log = logging.getLogger(__name__)


class Checkpoints:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def apply_retention(self, exp: Experiment) -> None:
        """Delete the checkpoints the experiment's retention policy no longer keeps."""
        if not exp.may_have_checkpoints:
            return  # it runs at every trial's end: a new experiment's reads cost nothing
        checkpoints = [
            retention.CheckpointRecord(
                uuid=c.uuid,
                trial_id=c.trial_id,
                steps_completed=c.steps_completed,
                metric=c.searcher_metric,
                state=c.state,
            )
            for c in await queries.experiment_checkpoints(self._db, exp.id)
        ]
        if not checkpoints:
            return  # runs at every trial's end: an experiment without checkpoints costs nothing
        # Only trials with checkpoints bear on what is kept.
        owners = {c.trial_id for c in checkpoints}
        trials = [
            retention.TrialRecord(t.id, t.state.value, latest_checkpoint=t.latest_checkpoint)
            for t in exp.trials.values()
            if t.id in owners or t.latest_checkpoint is not None
        ]
        policy = retention.RetentionPolicy.from_config(exp.config)
        doomed = retention.checkpoints_to_delete(checkpoints, trials, policy)
        if doomed:
            log.info(
                "experiment %d: deleting %d checkpoint(s) by its retention policy",
                exp.id,
                len(doomed),
            )
            await self.delete_checkpoints(sorted(doomed))

    async def record(self, c: v1.Checkpoint) -> None:
        """The checkpoint's row, and its trial's latest checkpoint pointing at it: one
        transaction."""
        if not c.uuid:
            raise errors.InvalidArgument("checkpoint.uuid is required")
        metadata = structs.python(c.metadata)
        if "steps_completed" not in metadata and not c.steps_completed:
            raise errors.InvalidArgument("checkpoint metadata must include steps_completed")
        trial_id = checkpoint_info.trial_id(c)
        await queries.ensure_trial(self._db, trial_id)
        async with self._db.atomic():
            await self._db.write(
                "INSERT OR REPLACE INTO checkpoints (uuid, trial_id, experiment_id, allocation_id,"
                " task_id, steps_completed, metadata, resources, size, state, report_time, storage)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    c.uuid,
                    trial_id,
                    checkpoint_info.experiment_id(c),
                    c.allocation_id or "",
                    c.task_id,
                    c.steps_completed,
                    json.dumps(metadata),
                    json.dumps(dict(c.resources)),
                    c.size,
                    checkpoint_info.state(c) if c.state else "COMPLETED",
                    timestamps.to_seconds(c.report_time) or time.time(),
                    json.dumps(structs.python(c.storage)),
                ),
            )
            await self._db.write(
                "UPDATE trials SET latest_checkpoint = ? WHERE id = ?", (c.uuid, trial_id)
            )

    async def set_metadata(self, uuid: str, value: dict[str, Any]) -> None:
        """Replace the user metadata of a checkpoint that has not been deleted."""
        row = await self._db.fetch_one("SELECT state FROM checkpoints WHERE uuid = ?", (uuid,))
        if row is None:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        if row["state"] == "DELETED":
            raise errors.FailedPrecondition(f"checkpoint {uuid} was deleted")
        await self._db.execute(
            "UPDATE checkpoints SET metadata = ? WHERE uuid = ?", (json.dumps(value), uuid)
        )

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
            await s3.remove_objects(storage, uuid)
            return
        path = shared_fs.checkpoint_dir(storage, uuid)
        if path is not None:
            await asyncio.to_thread(shutil.rmtree, path, True)
