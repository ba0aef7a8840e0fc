"""``core_context.checkpoint``: save, find, restore and delete checkpoints.

A checkpoint is the directory ``<storage>/<uuid>/`` holding the user's files and
``metadata.json`` (the metadata passed when saving, which must include ``steps_completed``).
``store_path`` hands out that directory itself, so saving costs what writing the files costs;
when the ``with`` block ends the metadata is written, the files are listed, and the
checkpoint is reported to the master before ``store_path`` returns.

With ``shard=True`` every worker saves part of one checkpoint: each writes into a private
directory inside the checkpoint, the workers compare file lists (two workers writing the same
file is an error naming it), then each moves its files into place (a rename, not a copy) and
the chief writes the merged metadata and reports once.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import os
import pathlib
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from determined.common import errors
from determined.core import _storage, _util
from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._storage import CheckpointRecord, Storage

if TYPE_CHECKING:
    from determined.core._rpc import MasterClient

log = logging.getLogger("determined.core")

METADATA_FILE = "metadata.json"


class DownloadMode(enum.Enum):
    """How workers share a download (``restore_path``/``download``).

    pydet's storage is a filesystem every worker reads directly, so both modes behave the
    same: nothing is downloaded by ``restore_path`` and no worker waits for another.
    """

    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"


class CheckpointContext:
    """Saves and restores checkpoints in the experiment's checkpoint storage.

    Without ``shard``, only the chief (rank 0) saves; with ``shard=True`` every worker calls
    the same method together and the files of all workers form one checkpoint.
    """

    def __init__(
        self,
        *,
        distributed: DistributedContext,
        storage: Storage,
        client: MasterClient,
        trial_id: int,
        experiment_id: int,
        task_id: str,
        allocation_id: str,
        flush_metrics: Callable[[], None],
    ) -> None:
        self._dist = distributed
        self._storage = storage
        self._client = client
        self._trial_id = trial_id
        self._experiment_id = experiment_id
        self._task_id = task_id
        self._allocation_id = allocation_id
        self._flush_metrics = flush_metrics

    # Saving.

    @contextlib.contextmanager
    def store_path(
        self, metadata: dict[str, Any] | None = None, *, shard: bool = False
    ) -> Iterator[tuple[pathlib.Path, str]]:
        """Yield ``(path, storage_id)``: save your files under ``path``.

        When the block ends, ``metadata`` (which must contain ``steps_completed``) is written
        to ``metadata.json`` in the checkpoint and the checkpoint is reported. If the block
        raises, the partial checkpoint is removed and nothing is reported.
        """
        if shard:
            yield from self._store_sharded(metadata)
            return
        _util.require_chief(
            self._dist,
            "save a checkpoint with shard=False (pass shard=True when every worker saves "
            "part of it)",
        )
        meta_json = _metadata_json(metadata)
        storage_id = str(uuid.uuid4())
        path = self._storage.path(storage_id)
        path.mkdir(parents=True)
        try:
            yield path, storage_id
        except BaseException:
            _remove(path, "the partial checkpoint")
            raise
        self._finish(path, storage_id, meta_json)

    def upload(
        self,
        ckpt_dir: str | os.PathLike[str] | None,
        metadata: dict[str, Any] | None = None,
        *,
        shard: bool = False,
    ) -> str:
        """Copy the contents of ``ckpt_dir`` into a new checkpoint; return its storage id.

        With ``shard=True`` every worker calls it; workers with nothing to save pass
        ``ckpt_dir=None``, and workers sharing one directory upload it once.
        """
        if shard:
            return self._upload_sharded(ckpt_dir, metadata)
        _util.require_chief(
            self._dist,
            "upload a checkpoint with shard=False (pass shard=True when every worker "
            "uploads part of it)",
        )
        if ckpt_dir is None:
            raise ValueError(
                "upload(ckpt_dir=None, shard=False) would save nothing; pass a directory"
            )
        src = _existing_dir(ckpt_dir)
        meta_json = _metadata_json(metadata)
        storage_id = str(uuid.uuid4())
        path = self._storage.path(storage_id)
        try:
            _storage.copy_files(src, path)
        except BaseException:
            _remove(path, "the partial checkpoint")
            raise
        self._finish(path, storage_id, meta_json)
        return storage_id

    # Reading.

    @contextlib.contextmanager
    def restore_path(
        self,
        storage_id: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Callable[[str], bool] | None = None,
    ) -> Iterator[pathlib.Path]:
        """Yield the directory of checkpoint ``storage_id`` (read it inside the block).

        The storage is read in place, so ``selector`` does not limit what is visible.
        """
        DownloadMode(download_mode)
        yield self._locate(storage_id)

    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike[str],
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Callable[[str], bool] | None = None,
    ) -> None:
        """Copy checkpoint ``storage_id`` into ``ckpt_dir`` (created if needed).

        ``selector``, if given, is called with each file's relative path and decides whether
        it is copied.
        """
        DownloadMode(download_mode)
        _storage.copy_files(self._locate(storage_id), pathlib.Path(ckpt_dir), selector=selector)

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The metadata checkpoint ``storage_id`` was saved with."""
        record = self._record(storage_id)
        value = json.loads(record.metadata_json or "{}")
        return value if isinstance(value, dict) else {}

    def delete(self, storage_id: str) -> None:
        """Delete checkpoint ``storage_id``: its files, and its record at the master."""
        path = self._path_of(self._record(storage_id))
        if path.exists():
            shutil.rmtree(path)
        self._forget(storage_id)

    # What the off-cluster stand-in replaces.

    def _record(self, storage_id: str) -> CheckpointRecord:
        record = self._client.get_checkpoint(storage_id)
        if record is None:
            raise errors.NotFound(f"checkpoint {storage_id} is not known to the master")
        if record.state == "DELETED":
            raise errors.NotFound(f"checkpoint {storage_id} was deleted")
        return record

    def _report(self, record: CheckpointRecord) -> None:
        # Metrics reported before the checkpoint reach the master before it.
        self._flush_metrics()
        self._client.report_checkpoint(record)
        log.info("reported checkpoint %s (steps_completed=%d)", record.uuid, record.steps_completed)

    def _forget(self, storage_id: str) -> None:
        self._client.delete_checkpoints([storage_id])

    # Shared machinery.

    def _path_of(self, record: CheckpointRecord) -> pathlib.Path:
        # A checkpoint from another experiment (e.g. a continued trial) may live elsewhere.
        storage = self._storage
        if record.storage:
            try:
                storage = _storage.from_config(record.storage, what="the checkpoint's storage")
            except (ValueError, TypeError, NotImplementedError) as e:
                raise errors.FailedPrecondition(f"checkpoint {record.uuid}: {e}") from None
        return storage.path(record.uuid)

    def _locate(self, storage_id: str) -> pathlib.Path:
        path = self._path_of(self._record(storage_id))
        if not path.is_dir():
            raise errors.NotFound(f"checkpoint {storage_id} has no files at {path}")
        return path

    def _finish(self, path: pathlib.Path, storage_id: str, meta_json: str) -> None:
        metadata = json.loads(meta_json)
        (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
        self._report(
            CheckpointRecord(
                uuid=storage_id,
                trial_id=self._trial_id,
                experiment_id=self._experiment_id,
                allocation_id=self._allocation_id,
                task_id=self._task_id,
                steps_completed=int(metadata["steps_completed"]),
                metadata_json=meta_json,
                resources=_storage.list_files(path),
                state="COMPLETED",
                report_time=time.time(),
                storage=self._storage.config,
            )
        )

    def _store_sharded(self, metadata: dict[str, Any] | None) -> Iterator[tuple[pathlib.Path, str]]:
        storage_id, meta_json = self._agree(metadata, None)[:2]
        final = self._storage.path(storage_id)
        private = final / f".rank-{self._dist.rank}"
        private.mkdir(parents=True)
        try:
            yield private, storage_id
        except BaseException as e:
            # Go through the same collectives as the others so that none of them hangs,
            # then re-raise this worker's own error.
            problem = _shard_problem(self._dist.allgather(("failed", f"{type(e).__name__}: {e}")))
            _remove(private, "this worker's part of the checkpoint")
            self._conclude(final, storage_id, meta_json, problem, raise_outcome=False)
            raise
        files = _storage.list_files(private)
        listings = self._dist.allgather(("ok", files))
        problem = _shard_problem(listings)
        if problem is None:
            for rel in _storage.list_dirs(private):
                (final / rel).mkdir(exist_ok=True)
            for rel in files:
                os.rename(private / rel, final / rel)
        shutil.rmtree(private)
        self._conclude(final, storage_id, meta_json, problem)

    def _upload_sharded(
        self, ckpt_dir: str | os.PathLike[str] | None, metadata: dict[str, Any] | None
    ) -> str:
        src = None if ckpt_dir is None else _existing_dir(ckpt_dir)
        identity = None
        if src is not None:
            st = src.stat()
            identity = (self._dist.cross_rank, st.st_dev, st.st_ino)
        storage_id, meta_json, identities = self._agree(metadata, identity)
        if not any(i is not None for i in identities):
            raise ValueError(
                "upload(shard=True) got ckpt_dir=None from every worker; at least one must "
                "pass a directory"
            )
        # Workers on one machine that pass the same directory upload it once.
        uploads = src is not None and identities.index(identity) == self._dist.rank
        files = _storage.list_files(src) if uploads and src is not None else {}
        problem = _shard_problem(self._dist.allgather(("ok", files)))
        final = self._storage.path(storage_id)
        if problem is None and uploads and src is not None:
            _storage.copy_files(src, final)
        self._conclude(final, storage_id, meta_json, problem)
        return storage_id

    def _agree(self, metadata: dict[str, Any] | None, identity: Any) -> tuple[str, str, list[Any]]:
        """Every worker learns the chief's storage id and the merged metadata (or the error)."""
        mine: Any = None
        error = None
        if metadata is not None and not isinstance(metadata, dict):
            error = f"checkpoint metadata must be a dict, not {type(metadata).__name__}"
        else:
            try:
                mine = json.loads(_util.dumps(metadata or {}, what="checkpoint metadata"))
            except TypeError as e:
                error = str(e)
        storage_id = str(uuid.uuid4()) if self._dist.rank == 0 else None
        gathered = self._dist.allgather((storage_id, mine, identity, error))
        errors_by_rank = [(r, g[3]) for r, g in enumerate(gathered) if g[3] is not None]
        if errors_by_rank:
            raise TypeError("; ".join(f"rank {r}: {msg}" for r, msg in errors_by_rank))
        merged, conflicts = merge_metadata([g[1] for g in gathered])
        if conflicts:
            listed = ", ".join(f"{key} (ranks {ranks})" for key, ranks in sorted(conflicts.items()))
            raise ValueError(f"workers passed different checkpoint metadata values for: {listed}")
        meta_json = _metadata_json(merged)
        return str(gathered[0][0]), meta_json, [g[2] for g in gathered]

    def _conclude(
        self,
        final: pathlib.Path,
        storage_id: str,
        meta_json: str,
        problem: str | None,
        *,
        raise_outcome: bool = True,
    ) -> None:
        """Once every worker has placed its files, the chief reports; all learn the outcome."""
        self._dist.allgather(None)
        outcome: str | None = problem
        error: BaseException | None = None
        if self._dist.rank == 0:
            if problem is not None:
                _remove(final, "the conflicting checkpoint")
            else:
                try:
                    self._finish(final, storage_id, meta_json)
                except Exception as e:
                    error, outcome = e, f"the chief could not record the checkpoint: {e}"
        outcome = self._dist.broadcast(outcome)
        if error is not None:
            raise error
        if outcome is not None and raise_outcome:
            raise RuntimeError(f"sharded checkpoint {storage_id} was not saved: {outcome}")


class DummyCheckpointContext(CheckpointContext):
    """The off-cluster stand-in: checkpoints are directories under a local path.

    Nothing is reported anywhere; ``get_metadata`` reads ``metadata.json`` back.
    """

    def __init__(self, distributed: DistributedContext | None, storage: Storage) -> None:
        self._dist = distributed or DummyDistributedContext()
        self._storage = storage
        self._trial_id = 0
        self._experiment_id = 0
        self._task_id = ""
        self._allocation_id = ""

    def _record(self, storage_id: str) -> CheckpointRecord:
        path = self._storage.path(storage_id)
        if not path.is_dir():
            raise errors.NotFound(f"no checkpoint {storage_id} in {self._storage.base}")
        meta_file = path / METADATA_FILE
        meta_json = meta_file.read_text() if meta_file.is_file() else "{}"
        return CheckpointRecord(
            uuid=storage_id,
            trial_id=0,
            experiment_id=0,
            allocation_id="",
            task_id="",
            steps_completed=0,
            metadata_json=meta_json,
            resources={},
            state="COMPLETED",
            report_time=0.0,
        )

    def _report(self, record: CheckpointRecord) -> None:
        log.info(
            "saved checkpoint %s (steps_completed=%d) in %s",
            record.uuid,
            record.steps_completed,
            self._storage.path(record.uuid),
        )

    def _forget(self, storage_id: str) -> None:
        log.info("deleted checkpoint %s", storage_id)


def merge_metadata(all_metadata: list[Any]) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """Merge the workers' metadata dicts: nested dicts merge, other values must agree.

    Returns the merged dict and, for each conflicting key path, the ranks that disagree.
    """
    merged: dict[str, Any] = {}
    owners: dict[str, list[int]] = {}
    conflicts: dict[str, list[int]] = {}

    absent = object()

    def merge(into: dict[str, Any], new: dict[str, Any], rank: int, prefix: str) -> None:
        for key, value in new.items():
            path = f"{prefix}{key}"
            existing = into.get(key, absent)
            if isinstance(value, dict) and (existing is absent or isinstance(existing, dict)):
                owners.setdefault(path, []).append(rank)
                merge(into.setdefault(key, {}), value, rank, path + "/")
            elif existing is absent:
                into[key] = value
                owners[path] = [rank]
            elif existing != value:
                conflicts.setdefault(path, list(owners.get(path, []))).append(rank)
            else:
                owners[path].append(rank)

    for rank, metadata in enumerate(all_metadata):
        merge(merged, metadata or {}, rank, "")
    return merged, conflicts


def _shard_problem(listings: list[Any]) -> str | None:
    """Why the workers' files cannot form one checkpoint (a worker failed, or files clash)."""
    failed = [f"rank {r}: {detail}" for r, (state, detail) in enumerate(listings) if state != "ok"]
    if failed:
        return "a worker failed while saving its part (" + "; ".join(failed) + ")"
    writers: dict[str, list[int]] = {}
    dirs: dict[str, list[int]] = {}
    for rank, (_, files) in enumerate(listings):
        for rel in files:
            writers.setdefault(rel, []).append(rank)
            parts = rel.split("/")
            for i in range(1, len(parts)):
                dirs.setdefault("/".join(parts[:i]), []).append(rank)
    clashes = [f"{rel} (ranks {ranks})" for rel, ranks in sorted(writers.items()) if len(ranks) > 1]
    clashes += [
        f"{rel} (a file of ranks {writers[rel]}, a directory of ranks {sorted(set(ranks))})"
        for rel, ranks in sorted(dirs.items())
        if rel in writers
    ]
    if clashes:
        return "more than one worker wrote the same path: " + ", ".join(clashes)
    return None


def _metadata_json(metadata: dict[str, Any] | None) -> str:
    """Checked metadata as JSON; raised before anything is written."""
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise TypeError(f"checkpoint metadata must be a dict, not {type(metadata).__name__}")
    if "steps_completed" not in metadata:
        raise ValueError(
            "checkpoint metadata must include 'steps_completed' (how many steps the saved "
            "model has trained), e.g. store_path({'steps_completed': steps_completed})"
        )
    _util.check_int(metadata["steps_completed"], what="metadata['steps_completed']")
    return _util.dumps(metadata, what="checkpoint metadata")


def _existing_dir(ckpt_dir: str | os.PathLike[str]) -> pathlib.Path:
    path = pathlib.Path(ckpt_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint directory {path} does not exist")
    return path


def _remove(path: pathlib.Path, what: str) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("could not remove %s at %s: %s", what, path, e)
