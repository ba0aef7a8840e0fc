"""Where checkpoints live: a directory tree, or an S3 bucket.

On a filesystem, ``shared_fs`` (``host_path``, optionally ``storage_path`` under it) or
``directory`` (``container_path``), each checkpoint is the directory ``<base>/<uuid>/``; the
Core API writes into it directly, so saving costs what writing the files costs. In ``s3``
(determined.common.s3) a checkpoint is written to a local directory and uploaded.
Both kinds offer the operations of ``Backend``, which is all the Core API uses.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from determined.common import errors

if TYPE_CHECKING:
    from determined.common.s3 import S3Storage

CLOUD_TYPES = ("gcs", "azure")
_URL_SCHEMES = {"gs://": "gcs", "az://": "azure", "azure://": "azure"}


@dataclass(frozen=True)
class CheckpointRecord:
    """A checkpoint as the master records it."""

    uuid: str
    trial_id: int
    experiment_id: int
    allocation_id: str
    task_id: str
    steps_completed: int
    metadata_json: str
    resources: dict[str, int]
    state: str
    report_time: float
    storage: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Storage:
    """A checkpoint directory tree: ``base / <uuid>``; ``config`` is what gets recorded."""

    base: pathlib.Path
    config: dict[str, Any]

    @property
    def where(self) -> str:
        return str(self.base)

    def location(self, storage_id: str) -> str:
        return str(self.path(storage_id))

    def stage(self, storage_id: str, *, rank: int | None = None) -> pathlib.Path:
        """The checkpoint's own directory (created), or a rank's private one inside it."""
        final = self.path(storage_id)
        if rank is None:
            final.mkdir(parents=True)
            return final
        private = final / f".rank-{rank}"
        private.mkdir(parents=True)
        return private

    def release(self, storage_id: str, staged: pathlib.Path) -> None:
        if staged != self.path(storage_id):
            shutil.rmtree(staged, ignore_errors=True)

    def put(
        self,
        storage_id: str,
        src: pathlib.Path | None,
        files: Iterable[str],
        extras: Mapping[str, bytes],
        *,
        move: bool = False,
    ) -> None:
        """Place ``files`` from ``src`` (moved, or copied) and write ``extras``."""
        final = self.path(storage_id)
        final.mkdir(parents=True, exist_ok=True)
        if src is not None and src != final:
            for rel in list_dirs(src):
                (final / rel).mkdir(exist_ok=True)
            for rel in sorted(files):
                target = final / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                if move:
                    os.rename(src / rel, target)
                else:
                    shutil.copy2(src / rel, target)
        for rel, data in extras.items():
            (final / rel).write_bytes(data)

    def local_dir(self, storage_id: str) -> pathlib.Path | None:
        path = self.path(storage_id)
        if not path.is_dir():
            raise errors.NotFound(f"checkpoint {storage_id} has no files at {path}")
        return path

    def fetch(
        self,
        storage_id: str,
        dst: pathlib.Path,
        *,
        selector: Callable[[str], bool] | None = None,
    ) -> None:
        copy_files(self.path(storage_id), dst, selector=selector)

    def read(self, storage_id: str, rel: str) -> bytes | None:
        file = self.path(storage_id) / rel
        return file.read_bytes() if file.is_file() else None

    def exists(self, storage_id: str) -> bool:
        return self.path(storage_id).is_dir()

    def remove(self, storage_id: str) -> int:
        path = self.path(storage_id)
        if not path.exists():
            return 0
        count = len(list_files(path))
        shutil.rmtree(path)
        return count

    def path(self, storage_id: str) -> pathlib.Path:
        """The directory of checkpoint ``storage_id``."""
        if (
            not isinstance(storage_id, str)
            or not storage_id
            or storage_id in (".", "..")
            or "/" in storage_id
            or "\\" in storage_id
        ):
            raise ValueError(f"{storage_id!r} is not a checkpoint id (a UUID string)")
        return self.base / storage_id


# What the Core API does with a checkpoint storage, each kind offers: a checkpoint is
# written into a local directory from ``stage`` (the checkpoint itself on a filesystem, a
# temporary directory for object storage), ``put`` places files, ``release`` drops a staged
# directory that is not the checkpoint itself, ``local_dir`` is the checkpoint's directory
# where it can be read in place (None where it must be fetched).
Backend: TypeAlias = "Storage | S3Storage"


def _s3_storage(config: dict[str, Any], *, what: str) -> S3Storage:
    # Imported here: only S3 storage needs it, and most trials' scripts never do.
    from determined.common.s3 import S3Storage

    return S3Storage(config, what=what)


def from_config(value: str | dict[str, Any] | os.PathLike[str] | None, *, what: str) -> Backend:
    """The storage described by a ``checkpoint_storage`` config section or a directory path
    (``s3://bucket/prefix`` names a bucket)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        if value.startswith("s3://"):
            bucket, _, prefix = value.removeprefix("s3://").partition("/")
            return _s3_storage({"type": "s3", "bucket": bucket, "prefix": prefix}, what=what)
        for scheme, cloud in _URL_SCHEMES.items():
            if value.startswith(scheme):
                _unsupported(cloud, what)
        base = pathlib.Path(value).expanduser().absolute()
        return Storage(base, {"type": "shared_fs", "host_path": str(base)})
    if not isinstance(value, dict):
        raise TypeError(
            f"{what} must be a directory path or a checkpoint_storage dict such as "
            f"{{'type': 'shared_fs', 'host_path': '/data/checkpoints'}}, not {value!r}"
        )
    kind = value.get("type")
    if kind == "shared_fs":
        host_path = _required_path(value, "host_path", what)
        storage_path = value.get("storage_path")
        base = pathlib.Path(host_path)
        if storage_path:
            # An absolute storage_path already contains host_path (the config validator
            # checks that it lies inside it).
            base = base / str(storage_path)
        return Storage(base.expanduser().absolute(), dict(value))
    if kind == "directory":
        container_path = _required_path(value, "container_path", what)
        return Storage(pathlib.Path(container_path).expanduser().absolute(), dict(value))
    if kind == "s3":
        return _s3_storage(value, what=what)
    if kind in CLOUD_TYPES:
        _unsupported(str(kind), what)
    raise ValueError(
        f"{what}: unknown checkpoint storage type {kind!r}; use 'shared_fs', 'directory' or 's3'"
    )


def _required_path(value: dict[str, Any], key: str, what: str) -> str:
    path = value.get(key)
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what}: a {value.get('type')} checkpoint storage needs {key}")
    return path


def _unsupported(kind: str, what: str) -> None:
    raise NotImplementedError(
        f"{what}: checkpoint storage type {kind!r} is not supported by pydet yet; use "
        "'shared_fs' (host_path, storage_path), 'directory' (container_path) or 's3' "
        "(bucket, prefix, endpoint_url, access_key, secret_key)"
    )


def list_files(root: pathlib.Path) -> dict[str, int]:
    """Every file under ``root`` as a relative POSIX path, with its size in bytes."""
    out: dict[str, int] = {}
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((pathlib.Path(entry.path), rel + "/"))
                elif entry.is_file():
                    out[rel] = entry.stat().st_size
    return out


def list_dirs(root: pathlib.Path) -> list[str]:
    """Every directory under ``root`` (relative POSIX paths), parents before children."""
    out: list[str] = []
    for dirpath, dirnames, _ in os.walk(root):
        rel = pathlib.Path(dirpath).relative_to(root)
        out.extend((rel / d).as_posix() for d in sorted(dirnames))
    return out


def copy_files(
    src: pathlib.Path, dst: pathlib.Path, *, selector: Callable[[str], bool] | None = None
) -> None:
    """Copy the files under ``src`` into ``dst`` (created), keeping relative paths."""
    dst.mkdir(parents=True, exist_ok=True)
    for rel in list_dirs(src):
        if selector is None:
            (dst / rel).mkdir(exist_ok=True)
    for rel in sorted(list_files(src)):
        if selector is not None and not selector(rel):
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)
