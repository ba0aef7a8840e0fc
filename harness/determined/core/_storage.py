"""Where checkpoints live: a directory tree this process can read and write.

pydet stores checkpoints on a filesystem: ``shared_fs`` (``host_path``, optionally
``storage_path`` under it) or ``directory`` (``container_path``). Each checkpoint is the
directory ``<base>/<uuid>/``; the Core API writes into it directly, so saving costs what
writing the files costs.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CLOUD_TYPES = ("s3", "gcs", "azure")
_URL_SCHEMES = {"s3://": "s3", "gs://": "gcs", "az://": "azure", "azure://": "azure"}


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


def from_config(value: str | dict[str, Any] | os.PathLike[str] | None, *, what: str) -> Storage:
    """The storage described by a ``checkpoint_storage`` config section or a directory path."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
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
    if kind in CLOUD_TYPES:
        _unsupported(str(kind), what)
    raise ValueError(
        f"{what}: unknown checkpoint storage type {kind!r}; use 'shared_fs' or 'directory'"
    )


def _required_path(value: dict[str, Any], key: str, what: str) -> str:
    path = value.get(key)
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what}: a {value.get('type')} checkpoint storage needs {key}")
    return path


def _unsupported(kind: str, what: str) -> None:
    raise NotImplementedError(
        f"{what}: checkpoint storage type {kind!r} is not supported by pydet yet; use "
        "'shared_fs' (host_path, storage_path) or 'directory' (container_path)"
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
