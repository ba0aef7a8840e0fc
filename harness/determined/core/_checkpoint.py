"""``core_context.checkpoint``: save, find, restore and delete checkpoints.

A checkpoint is the directory ``<storage>/<uuid>/`` (or, in S3, the objects
``<prefix>/<uuid>/...``) holding the user's files and ``metadata.json`` (the metadata passed
when saving, which must include ``steps_completed``). On a filesystem ``store_path`` hands
out that directory itself, so saving costs what writing the files costs; with S3 it hands out
a local directory that is uploaded when the block ends. Then the metadata is written, the
files are listed, and the checkpoint is reported to the master before ``store_path``
returns.

With ``shard=True`` every worker saves part of one checkpoint: each writes into a private
directory, the workers compare file lists (two workers writing the same file is an error
naming it), then each places its own files (a rename on a filesystem, an upload to S3) and
the chief writes the merged metadata and reports once. How the parts' metadata and file lists
combine is in ``_checkpoint_shards``.
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
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from determined.common import errors
from determined.core import _storage, _util
from determined.core._checkpoint_shards import _merged, _shard_problem, merge_metadata
from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._storage import Backend, CheckpointRecord

if TYPE_CHECKING:
    from determined.core._rpc import MasterClient

log = logging.getLogger("determined.core")


def _new_storage_id() -> str:
    """A new checkpoint's UUID."""
    # Imported here: uuid imports platform, ~7 ms of every training script's start, for
    # scripts that may never save a checkpoint.
    import uuid

    return str(uuid.uuid4())


METADATA_FILE = "metadata.json"


class DownloadMode(enum.Enum):
    """How workers share a download (``restore_path``/``download``).

    On a filesystem both modes behave the same: every worker reads the storage directly and
    none waits for another. From S3, ``LocalWorkersShareDownload`` (the default) downloads
    once per machine: every worker of a machine calls ``restore_path`` (or ``download``)
    together, the first one downloads and the others wait for it; ``download`` shares only
    between workers that pass the same directory. ``NoSharedDownload`` lets each worker
    download on its own, e.g. when only the chief calls it.
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
        storage: Backend,
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
        storage_id = _new_storage_id()
        path = self._storage.stage(storage_id)
        try:
            try:
                yield path, storage_id
            except BaseException:
                _remove(path, "the partial checkpoint")
                raise
            self._finish(storage_id, meta_json, src=path)
        finally:
            self._storage.release(storage_id, path)

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
        storage_id = _new_storage_id()
        self._finish(storage_id, meta_json, src=src)
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

        A filesystem storage is read in place, so ``selector`` does not limit what is
        visible there. From S3 the checkpoint (the files ``selector`` picks, if given) is
        downloaded into a temporary directory that is removed when the block ends; see
        ``DownloadMode`` for which workers download.
        """
        mode = DownloadMode(download_mode)
        storage = self._backend_of(self._record(storage_id))
        local = storage.local_dir(storage_id)
        if local is not None:
            yield local
            return
        if mode is DownloadMode.NoSharedDownload:
            path = storage.stage(storage_id)
            try:
                storage.fetch(storage_id, path, selector=selector)
                yield path
            finally:
                storage.release(storage_id, path)
            return
        path = self._download_for_this_machine(storage, storage_id, selector)
        try:
            yield path
        finally:
            # Nobody removes the files while a worker of this machine still reads them.
            self._dist.allgather_local(None)
            if self._dist.local_rank == 0:
                storage.release(storage_id, path)

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
        it is copied. From S3 with ``LocalWorkersShareDownload``, every worker of a machine
        calls it together and workers passing the same ``ckpt_dir`` download it once.
        """
        mode = DownloadMode(download_mode)
        storage = self._backend_of(self._record(storage_id))
        dst = pathlib.Path(ckpt_dir)
        if storage.local_dir(storage_id) is not None or mode is DownloadMode.NoSharedDownload:
            storage.fetch(storage_id, dst, selector=selector)
            return
        dirs = self._dist.allgather_local(str(dst.absolute()))
        owner = dirs.index(dirs[self._dist.local_rank])
        error: Exception | None = None
        if owner == self._dist.local_rank:
            try:
                storage.fetch(storage_id, dst, selector=selector)
            except Exception as e:
                error = e
        outcomes = self._dist.allgather_local(None if error is None else _describe(error))
        if error is not None:
            raise error
        if outcomes[owner] is not None:
            raise _peer_failed(storage_id, owner, outcomes[owner])

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The metadata checkpoint ``storage_id`` was saved with."""
        record = self._record(storage_id)
        value = json.loads(record.metadata_json or "{}")
        return value if isinstance(value, dict) else {}

    def delete(self, storage_id: str) -> None:
        """Delete checkpoint ``storage_id``: its files (or objects), and its record at the
        master."""
        self._backend_of(self._record(storage_id)).remove(storage_id)
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

    def _backend_of(self, record: CheckpointRecord) -> Backend:
        # A checkpoint from another experiment (e.g. a continued trial) may live elsewhere.
        # The master shows a recorded storage without its credentials: where it is this
        # context's own bucket, this context's credentials reach it.
        if not record.storage or same_place(self._storage, record.storage):
            return self._storage
        try:
            return _storage.from_config(record.storage, what="the checkpoint's storage")
        except (ValueError, TypeError, NotImplementedError) as e:
            raise errors.FailedPrecondition(f"checkpoint {record.uuid}: {e}") from None

    def _download_for_this_machine(
        self, storage: Backend, storage_id: str, selector: Callable[[str], bool] | None
    ) -> pathlib.Path:
        """The local chief downloads into a temporary directory; all learn where it is."""
        outcome: tuple[str | None, str | None] = (None, None)
        error: Exception | None = None
        if self._dist.local_rank == 0:
            path = storage.stage(storage_id)
            try:
                storage.fetch(storage_id, path, selector=selector)
                outcome = (str(path), None)
            except Exception as e:
                storage.release(storage_id, path)
                error, outcome = e, (None, _describe(e))
        where, problem = self._dist.broadcast_local(outcome)
        if error is not None:
            raise error
        if problem is not None or where is None:
            raise _peer_failed(storage_id, 0, problem)
        return pathlib.Path(where)

    def _finish(
        self,
        storage_id: str,
        meta_json: str,
        *,
        src: pathlib.Path | None,
        stored: dict[str, int] | None = None,
    ) -> None:
        """Place ``src``'s files and the metadata, then report; ``stored`` lists the files
        the workers already placed."""
        metadata = json.loads(meta_json)
        meta_bytes = json.dumps(metadata, indent=2).encode()
        files = _storage.list_files(src) if src is not None else {}
        files.pop(METADATA_FILE, None)
        try:
            self._storage.put(storage_id, src, files, {METADATA_FILE: meta_bytes})
        except BaseException:
            self._discard(storage_id)
            raise
        resources = {**(stored or {}), **files, METADATA_FILE: len(meta_bytes)}
        self._report(
            CheckpointRecord(
                uuid=storage_id,
                trial_id=self._trial_id,
                experiment_id=self._experiment_id,
                allocation_id=self._allocation_id,
                task_id=self._task_id,
                steps_completed=int(metadata["steps_completed"]),
                metadata_json=meta_json,
                resources=resources,
                state="COMPLETED",
                report_time=time.time(),
                storage=self._storage.config,
            )
        )

    def _store_sharded(self, metadata: dict[str, Any] | None) -> Iterator[tuple[pathlib.Path, str]]:
        storage_id, meta_json = self._agree(metadata, None)[:2]
        private = self._storage.stage(storage_id, rank=self._dist.rank)
        try:
            yield private, storage_id
        except BaseException as e:
            # Go through the same collectives as the others so that none of them hangs,
            # then re-raise this worker's own error.
            problem = _shard_problem(self._dist.allgather(("failed", f"{type(e).__name__}: {e}")))
            _remove(private, "this worker's part of the checkpoint")
            self._storage.release(storage_id, private)
            self._conclude(storage_id, meta_json, problem, {}, raise_outcome=False)
            raise
        files = _storage.list_files(private)
        listings = self._dist.allgather(("ok", files))
        problem = _shard_problem(listings)
        placing = None
        if problem is None:
            placing = self._place(storage_id, private, files, move=True)
        self._storage.release(storage_id, private)
        self._conclude(storage_id, meta_json, problem, _merged(listings), placing=placing)

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
        listings = self._dist.allgather(("ok", files))
        problem = _shard_problem(listings)
        placing = None
        if problem is None and uploads and src is not None:
            placing = self._place(storage_id, src, files, move=False)
        self._conclude(storage_id, meta_json, problem, _merged(listings), placing=placing)
        return storage_id

    def _place(
        self, storage_id: str, src: pathlib.Path, files: dict[str, int], *, move: bool
    ) -> str | None:
        """Place this worker's part of a sharded checkpoint; why it failed, if it did."""
        try:
            self._storage.put(storage_id, src, files, {}, move=move)
        except Exception as e:
            log.error(
                "rank %d could not store its part of checkpoint %s: %s",
                self._dist.rank,
                storage_id,
                e,
            )
            return f"rank {self._dist.rank}: {_describe(e)}"
        return None

    def _discard(self, storage_id: str) -> None:
        try:
            self._storage.remove(storage_id)
        except Exception as e:
            log.warning("could not remove the unfinished checkpoint %s: %s", storage_id, e)

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
        storage_id = _new_storage_id() if self._dist.rank == 0 else None
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
        storage_id: str,
        meta_json: str,
        problem: str | None,
        stored: dict[str, int],
        *,
        placing: str | None = None,
        raise_outcome: bool = True,
    ) -> None:
        """Once every worker has placed its files, the chief reports; all learn the outcome."""
        failed = [p for p in self._dist.allgather(placing) if p is not None]
        if problem is None and failed:
            problem = "a worker could not store its part (" + "; ".join(failed) + ")"
        outcome: str | None = problem
        error: BaseException | None = None
        if self._dist.rank == 0:
            if problem is not None:
                self._discard(storage_id)
            else:
                try:
                    self._finish(storage_id, meta_json, src=None, stored=stored)
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

    def __init__(self, distributed: DistributedContext | None, storage: Backend) -> None:
        self._dist = distributed or DummyDistributedContext()
        self._storage = storage
        self._trial_id = 0
        self._experiment_id = 0
        self._task_id = ""
        self._allocation_id = ""

    def _record(self, storage_id: str) -> CheckpointRecord:
        if not self._storage.exists(storage_id):
            raise errors.NotFound(f"no checkpoint {storage_id} in {self._storage.where}")
        meta = self._storage.read(storage_id, METADATA_FILE)
        meta_json = meta.decode() if meta is not None else "{}"
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
            self._storage.location(record.uuid),
        )

    def _forget(self, storage_id: str) -> None:
        log.info("deleted checkpoint %s", storage_id)


def same_place(storage: Backend, config: dict[str, Any]) -> bool:
    """Whether a recorded storage ``config`` is ``storage`` (credentials aside)."""
    if config == storage.config:
        return True
    same = getattr(storage, "same_place", None)
    return bool(same(config)) if same is not None else False


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _peer_failed(storage_id: str, local_rank: int, problem: str | None) -> Exception:
    message = (
        f"checkpoint {storage_id}: local rank {local_rank}, which downloads it for this "
        f"machine, failed: {problem}"
    )
    if problem is not None and problem.startswith("NotFound:"):
        return errors.NotFound(message)
    return RuntimeError(message)


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
