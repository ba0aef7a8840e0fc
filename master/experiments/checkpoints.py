"""Checkpoint records: what trials report, the retention policy applied when a trial
ends, and deletion, whole or of some files (records marked in the caller's transaction,
files removed once it has committed). A checkpoint a model version holds (the model
registry) is never garbage-collected, and deleting it is refused naming the model."""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
import re
import shutil
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from typing import IO, Any

from determined.api.gen import v1
from determined.common import checkpoint_info, errors, structs, timestamps
from pydet.master import queries
from pydet.master.checkpoint_storage import s3, shared_fs
from pydet.master.experiments import retention
from pydet.master.experiments.live import Experiment
from pydet.master.store.db import Database

log = logging.getLogger(__name__)

# Bytes of a checkpoint archive kept in memory before it spills to a temporary file.
_SPOOL = 64 << 20


def retention_records(rows: Sequence[queries.CheckpointRow]) -> list[retention.CheckpointRecord]:
    """Stored checkpoints as the retention policy sees them."""
    return [
        retention.CheckpointRecord(
            uuid=c.uuid,
            trial_id=c.trial_id,
            steps_completed=c.steps_completed,
            metric=c.searcher_metric,
            state=c.state,
        )
        for c in rows
    ]


class Checkpoints:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def apply_retention(self, exp: Experiment) -> None:
        """Delete the checkpoints the experiment's retention policy no longer keeps."""
        if not exp.may_have_checkpoints:
            return  # it runs at every trial's end: a new experiment's reads cost nothing
        checkpoints = retention_records(await queries.experiment_checkpoints(self._db, exp.id))
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
            # The model registry keeps what it holds, whatever the policy says.
            doomed -= {r.uuid for r in await queries.registrations(self._db, sorted(doomed))}
        if doomed:
            log.info(
                "experiment %d: deleting %d checkpoint(s) by its retention policy",
                exp.id,
                len(doomed),
            )
            await self._delete(sorted(doomed))

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
        """Delete checkpoints a user named; refused, naming the model, when the model
        registry holds any of them."""
        await self._refuse_registered(uuids)
        await self._delete(uuids)

    async def _refuse_registered(self, uuids: Sequence[str]) -> None:
        held = await queries.registrations(self._db, uuids)
        if held:
            raise errors.FailedPrecondition(
                "these checkpoints are in the model registry and cannot be deleted: "
                + "; ".join(r.describe() for r in held)
                + " (delete those model versions first)"
            )

    async def _delete(self, uuids: Sequence[str]) -> None:
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

    async def remove_files(self, uuids: Sequence[str], globs: Sequence[str]) -> None:
        """Remove the files of each checkpoint that match any of ``globs`` (Determined's
        CheckpointsRemoveFiles): its record then lists the files left, and is
        PARTIALLY_DELETED, or DELETED when none is left. No globs: the record's files are
        read again from storage. As with deletion, records change first and files go once
        that has committed, and a checkpoint the model registry holds is refused."""
        patterns = [_glob(g) for g in globs]
        if patterns:  # as Determined: a registered checkpoint keeps every file
            await self._refuse_registered(uuids)
        changes: list[tuple[str, dict[str, Any], dict[str, int], list[str], str]] = []
        for uuid in uuids:
            row = await self._db.fetch_one(
                "SELECT state, storage FROM checkpoints WHERE uuid = ?", (uuid,)
            )
            if row is None:
                raise errors.NotFound(f"checkpoint {uuid} not found")
            if row["state"] == "DELETED":
                raise errors.FailedPrecondition(f"checkpoint {uuid} was deleted")
            storage = json.loads(row["storage"] or "{}")
            found = await _stored_files(storage, uuid)
            if found is None:
                raise errors.FailedPrecondition(
                    f"the master cannot read the storage of checkpoint {uuid} "
                    f"({storage.get('type', 'unknown')}), so it cannot remove its files"
                )
            doomed = sorted(f for f in found if any(_matches(f, p) for p in patterns))
            left = {f: size for f, size in found.items() if f not in doomed}
            state = row["state"]
            if doomed:
                state = "PARTIALLY_DELETED" if left else "DELETED"
            changes.append((uuid, storage, left, doomed, state))

        async def remove() -> None:
            for uuid, storage, _, doomed, _ in changes:
                if doomed:
                    await _remove_stored(storage, uuid, doomed)

        async with self._db.atomic():
            await self._db.execute_many(
                "UPDATE checkpoints SET resources = ?, size = ?, state = ? WHERE uuid = ?",
                [
                    (json.dumps(left), sum(left.values()), state, uuid)
                    for uuid, _, left, _, state in changes
                ],
            )
            await self._db.after_commit(remove)

    async def archive(self, uuid: str, *, zipped: bool = False) -> IO[bytes]:
        """The files of a COMPLETED or PARTIALLY_DELETED checkpoint as one archive (a gzip'd
        tar, or a zip), read from its storage by the master: what Determined's
        ``GET /checkpoints/UUID`` serves. Large archives spill to a temporary file."""
        row = await queries.checkpoint(self._db, uuid)
        if row.state not in ("COMPLETED", "PARTIALLY_DELETED"):
            raise errors.FailedPrecondition(
                f"checkpoint {uuid} is {row.state}: only COMPLETED or PARTIALLY_DELETED "
                "checkpoints can be downloaded"
            )
        storage = json.loads(row.storage or "{}")
        return await asyncio.to_thread(_pack, storage, uuid, zipped)

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


def _glob(pattern: str) -> re.Pattern[str]:
    """A checkpoint file glob: ``*`` and ``?`` within a path segment, ``**`` across them."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + "$")


def _matches(path: str, pattern: re.Pattern[str]) -> bool:
    """Whether the glob names the file or one of the directories it is in."""
    parts = path.split("/")
    return any(pattern.match("/".join(parts[:n])) for n in range(1, len(parts) + 1))


async def _stored_files(storage: dict[str, Any], uuid: str) -> dict[str, int] | None:
    """The checkpoint's files as its storage holds them; None if the master cannot see."""
    if storage.get("type") == "s3":
        return await s3.files(storage, uuid)
    path = shared_fs.checkpoint_dir(storage, uuid)
    return None if path is None else await asyncio.to_thread(shared_fs.files, path)


def _pack(storage: dict[str, Any], uuid: str, zipped: bool) -> IO[bytes]:
    """Checkpoint ``uuid``'s files, read from ``storage``, packed into a spooled file."""
    out = tempfile.SpooledTemporaryFile(max_size=_SPOOL)
    try:
        with tempfile.TemporaryDirectory() as staging:
            directory = _readable_copy(storage, uuid, pathlib.Path(staging))
            # Links are left out: a task could point one at any file of the master's host.
            files = sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink())
            if zipped:
                with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
                    for path in files:
                        archive.write(path, path.relative_to(directory).as_posix())
            else:
                with tarfile.open(fileobj=out, mode="w:gz") as archive:
                    for path in files:
                        archive.add(path, path.relative_to(directory).as_posix())
    except BaseException:
        out.close()
        raise
    out.seek(0)
    return out


def _readable_copy(storage: dict[str, Any], uuid: str, staging: pathlib.Path) -> pathlib.Path:
    """The directory holding the checkpoint's files: its own on a filesystem storage, a
    copy fetched into ``staging`` from S3."""
    if storage.get("type") == "s3":
        from determined.common.s3 import S3Storage

        s3_storage = S3Storage(storage, what=f"checkpoint {uuid}'s storage")
        s3_storage.fetch(uuid, staging)
        return staging
    path = shared_fs.checkpoint_dir(storage, uuid)
    if path is None or not path.is_dir():
        raise errors.FailedPrecondition(
            f"the master cannot read the files of checkpoint {uuid} from its storage "
            f"({storage.get('type', 'unknown')})"
        )
    return path


async def _remove_stored(storage: dict[str, Any], uuid: str, rels: list[str]) -> None:
    if storage.get("type") == "s3":
        await s3.remove_files(storage, uuid, rels)
        return
    path = shared_fs.checkpoint_dir(storage, uuid)
    if path is not None:
        await asyncio.to_thread(shared_fs.remove_files, path, rels)
