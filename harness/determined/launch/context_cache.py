"""An agent's copies of experiments' contexts, so that an experiment's trials after its
first on an agent unpack the context without downloading it again.

A trial's launcher downloads its experiment's context from the master (``GetExperimentContext``)
before anything else: a new connection and a call the master answers from its database, the
largest part of a short trial's start. A context never changes once its experiment is made,
so the process runtime names a directory for copies (``CACHE_ENV``) and the master gives
each trial its context's SHA-256 (``SHA256_ENV``); a copy is kept under that name.

Every task of the agent may write to that directory, so a copy is used only when its bytes
hash to the name the master gave: one planted there cannot run in another experiment's
trial. Without either variable (a container, an older master) nothing is cached. The
directory keeps the ``KEEP`` most recently used copies.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "PYDET_CONTEXT_CACHE"
SHA256_ENV = "PYDET_CONTEXT_SHA256"
KEEP = 16
_SUFFIX = ".tar.gz"


def _path(env: Mapping[str, str]) -> Path | None:
    directory, digest = env.get(CACHE_ENV, ""), env.get(SHA256_ENV, "")
    if not directory or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        return None
    return Path(directory) / (digest + _SUFFIX)


def load(env: Mapping[str, str]) -> bytes | None:
    """The cached copy of the context the environment names, if there is a true one."""
    path = _path(env)
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != env[SHA256_ENV]:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: kept
    return data


def store(env: Mapping[str, str], data: bytes) -> None:
    """Keep ``data`` (the context just downloaded) for the next trials, if it is the one the
    environment names; a copy that cannot be written is simply not kept."""
    path = _path(env)
    if path is None or hashlib.sha256(data).hexdigest() != env[SHA256_ENV]:
        return
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, path)  # whole or not at all, for launchers reading it now
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        return
    _prune(path.parent)


def _prune(directory: Path) -> None:
    """Remove all but the ``KEEP`` most recently used copies."""
    copies = []
    for entry in os.scandir(directory):
        if entry.name.endswith(_SUFFIX) and not entry.name.startswith("."):
            with contextlib.suppress(OSError):
                copies.append((entry.stat().st_mtime, entry.path))
    copies.sort(reverse=True)
    for _, stale in copies[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(stale)
