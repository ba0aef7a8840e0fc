"""Where a filesystem checkpoint storage (``shared_fs``, ``directory``) keeps its files, as
the master's host sees them."""

from __future__ import annotations

import pathlib
from typing import Any


def storage_dir(storage: dict[str, Any]) -> pathlib.Path | None:
    """The directory of a filesystem storage, when the master can reach it."""
    if storage.get("type") == "shared_fs":
        base = pathlib.Path(storage["host_path"])
        if storage.get("storage_path"):
            base = base / storage["storage_path"]
        return base
    if storage.get("type") == "directory":
        return pathlib.Path(storage["container_path"])
    return None


def checkpoint_dir(storage: dict[str, Any], uuid: str) -> pathlib.Path | None:
    """Where a checkpoint's files are, when the master can reach them."""
    base = storage_dir(storage)
    return None if base is None else base / uuid


def files(directory: pathlib.Path) -> dict[str, int] | None:
    """The files under a checkpoint's directory (relative path to size); None if the
    directory cannot be read."""
    if not directory.is_dir():
        return None
    return {
        path.relative_to(directory).as_posix(): path.stat().st_size
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def remove_files(directory: pathlib.Path, rels: list[str]) -> None:
    """Remove these files of a checkpoint's directory, and the directories left empty."""
    for rel in rels:
        (directory / rel).unlink(missing_ok=True)
    for sub in sorted((d for d in directory.rglob("*") if d.is_dir()), reverse=True):
        if not any(sub.iterdir()):
            sub.rmdir()
