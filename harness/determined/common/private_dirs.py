"""Directories that hold one user's secrets and work (the master's data directory, an
agent's work directory): readable by their owner alone, whatever the umask.

Head nodes of HPC clusters are shared machines; under the usual umask 022 a store of
password hashes and configs with storage keys would otherwise be readable by every local
user. ``make_private`` creates the directory 0700 and tightens an existing one, and the
regular files directly in it, to 0700/0600, saying what it tightened.
"""

from __future__ import annotations

import os
import pathlib
import stat


class SharedDirectory(Exception):
    """The directory is one that others share (sticky, like /tmp): it is not changed."""


def make_private(path: pathlib.Path) -> list[str]:
    """``path`` created 0700 (parents as the umask says), or tightened to 0700 with the
    regular files directly in it tightened to 0600; the names of those tightened. A
    directory with the sticky bit (/tmp and its like, shared on purpose) is left as it is
    and raises SharedDirectory."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & stat.S_ISVTX:
        raise SharedDirectory(
            f"{path} is shared by every user (sticky); give it a directory of its own"
        )
    tightened = []
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(stat.S_IMODE(path.stat().st_mode) & 0o700)
        tightened.append(str(path))
    with os.scandir(path) as entries:
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                continue
            mode = stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
            if mode & 0o077:
                os.chmod(entry.path, mode & 0o700)
                tightened.append(entry.name)
    return tightened
