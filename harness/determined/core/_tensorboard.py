"""TensorBoard files: ``core.TensorboardMode``, the upload of a worker's TensorBoard directory
to storage, and (in AUTO mode) the event files written for the metrics a trial reports.

A trial's files go to its ``tensorboard_storage`` (the experiment's checkpoint storage when it
has none) under ``<cluster id>/tensorboard/experiment/<exp>/trial/<trial>/``, Determined's
layout, where the master's TensorBoard task reads them (``det tensorboard start``).
"""

from __future__ import annotations

import enum
import logging
import os
import pathlib
import shutil
import socket
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from determined.core import _tfevents

log = logging.getLogger(__name__)

# In AUTO mode, reports upload at most this often; closing the context uploads the rest.
AUTO_UPLOAD_SECONDS = 10.0


class TensorboardMode(enum.Enum):
    """How TensorBoard files are handled (``core.init(tensorboard_mode=...)``).

    ``AUTO``: every reported metric is also written as a TensorBoard scalar (when the
    ``tensorboard`` package is installed), and the files under
    ``train.get_tensorboard_path()`` are uploaded as metrics are reported and when the
    context closes. ``MANUAL``: nothing is written or uploaded unless the code calls
    ``train.upload_tensorboard_files()``.
    """

    AUTO = "AUTO"
    MANUAL = "MANUAL"


def sync_path(cluster_id: str, experiment_id: int, trial_id: int) -> str:
    """Where a trial's TensorBoard files go under its storage (Determined's layout)."""
    return f"{cluster_id}/tensorboard/experiment/{experiment_id}/trial/{trial_id}"


def storage_config(config: dict[str, Any]) -> Any:
    """The storage section TensorBoard files go to: ``tensorboard_storage``, else
    ``checkpoint_storage``."""
    return config.get("tensorboard_storage") or config.get("checkpoint_storage")


Selector = Callable[[pathlib.Path], bool]
Mangler = Callable[[pathlib.Path, int], pathlib.Path]


class Destination:
    """Where a trial's TensorBoard files go: its directory in a filesystem storage, or its
    key prefix in an S3 bucket."""

    def __init__(
        self, *, directory: pathlib.Path | None = None, s3: Any = None, key: str = ""
    ) -> None:
        self.directory = directory
        self._s3 = s3  # determined.common.s3.S3Storage
        self._key = key.strip("/")

    @property
    def where(self) -> str:
        if self.directory is not None:
            return str(self.directory)
        return f"s3://{self._s3.bucket}/{self._key}"

    def put(self, src: pathlib.Path, rel: str) -> None:
        if self.directory is not None:
            target = self.directory / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.uploading")
            shutil.copy2(src, tmp)
            os.replace(tmp, target)
            return
        from determined.common import s3

        try:
            self._s3.client().upload_file(str(src), self._s3.bucket, f"{self._key}/{rel}")
        except Exception as e:
            raise OSError(str(s3.failure(f"uploading {rel} to {self.where}", e))) from e


class TensorboardFiles:
    """One worker's TensorBoard directory and where its files are uploaded (``dest``; None
    where there is nowhere to upload, as off-cluster)."""

    def __init__(self, local: pathlib.Path, dest: Destination | None, rank: int) -> None:
        self.local = local
        self.dest = dest
        self.rank = rank
        # What was uploaded: relative source path -> (size, mtime_ns) at the time.
        self._sent: dict[str, tuple[int, int]] = {}
        self._last_auto = 0.0
        # The code's own choice (its last upload_tensorboard_files call), which AUTO mode's
        # uploads follow too, so that a file is never uploaded under two names.
        self._selector: Selector | None = None
        self._mangler: Mangler | None = None

    def upload(self, selector: Selector | None = None, mangler: Mangler | None = None) -> int:
        """Copy the files that are new or changed since the last upload; their number.
        Without ``selector`` and ``mangler``, those of the last call that gave them."""
        if selector is not None or mangler is not None:
            self._selector, self._mangler = selector, mangler
        selector, mangler = self._selector, self._mangler
        if self.dest is None or not self.local.is_dir():
            return 0
        copied = 0
        for root, _, names in os.walk(self.local):
            for name in sorted(names):
                path = pathlib.Path(root) / name
                if selector is not None and not selector(path):
                    continue
                rel = path.relative_to(self.local)
                try:
                    st = path.stat()
                except FileNotFoundError:
                    continue
                stamp = (st.st_size, st.st_mtime_ns)
                if self._sent.get(rel.as_posix()) == stamp:
                    continue
                target_rel = mangler(rel, self.rank) if mangler is not None else rel
                if target_rel.is_absolute() or ".." in target_rel.parts:
                    raise ValueError(
                        f"upload_tensorboard_files: the mangled path {target_rel} leaves "
                        "the trial's TensorBoard directory"
                    )
                self.dest.put(path, target_rel.as_posix())
                self._sent[rel.as_posix()] = stamp
                copied += 1
        return copied

    def upload_now_and_then(self, before: Callable[[], None]) -> None:
        """AUTO mode, after a report: call ``before`` (flush the events) and upload, unless
        that happened in the last few seconds."""
        now = time.monotonic()
        if now - self._last_auto >= AUTO_UPLOAD_SECONDS:
            self._last_auto = now
            before()
            self._safe_upload()

    def finish(self) -> None:
        """AUTO mode, on close: upload what is left, then remove the local directory (it is
        this allocation's own, in the agent's temporary directory) once all of it is up."""
        if self._safe_upload() and self.dest is not None:
            shutil.rmtree(self.local, ignore_errors=True)

    def _safe_upload(self) -> bool:
        try:
            self.upload()
        except OSError as e:
            where = self.dest.where if self.dest is not None else "nowhere"
            log.warning("uploading TensorBoard files to %s failed: %s", where, e)
            return False
        return True


class MetricEvents:
    """Reported metrics as TensorBoard scalars in an event file under ``logdir`` (AUTO mode).

    A report only notes its scalars (a report is on the training loop's hot path); ``flush``
    writes what was noted (``_tfevents``, no TensorBoard import), before each upload and on
    close."""

    def __init__(self, logdir: pathlib.Path) -> None:
        self._logdir = logdir
        self._pending: list[tuple[float, int, list[tuple[str, float]]]] = []
        self._file: BinaryIO | None = None
        self._writer: _tfevents.EventFileWriter | None = None

    def write(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        values = [(scalar_tag(group, k), float(v)) for k, v in metrics.items() if _is_scalar(v)]
        if values:
            self._pending.append((time.time(), steps_completed, values))

    def flush(self) -> None:
        if not self._pending:
            return
        writer = self._writer or self._open()
        for wall_time, step, values in self._pending:
            writer.write_scalars(wall_time, step, values)
        self._pending.clear()
        writer.flush()

    def _open(self) -> _tfevents.EventFileWriter:
        self._logdir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
        self._file = open(self._logdir / name, "ab")
        self._writer = _tfevents.EventFileWriter(self._file, time.time())
        return self._writer

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._file is not None:
                self._file.close()
                self._file = None
                self._writer = None


def scalar_tag(group: str, name: str) -> str:
    """A metric's TensorBoard tag: training metrics by name, validation metrics with a
    ``val_`` prefix (unless they have one), other groups as ``group/name``."""
    if group == "training":
        return name
    if group == "validation":
        return name if name.startswith("val") else f"val_{name}"
    return f"{group}/{name}"


def _is_scalar(value: Any) -> bool:
    """Numbers, and numpy or torch scalars (NaN and infinities included)."""
    if isinstance(value, (bool, int, float)):
        return True
    return callable(getattr(value, "item", None)) and getattr(value, "ndim", 1) == 0
