"""Moving the Trainer's checkpoint directories in and out of checkpoint storage.

A Trainer save writes ``<output_dir>/checkpoint-<step>/`` once and never writes into it
again (later saves go to new directories; old ones are deleted whole), so its files are
*linked* into the checkpoint rather than copied when both are on one filesystem: a save
through ``DetCallback`` then costs the Trainer's own write plus a link per file, not a
second write of every byte. Files the Trainer keeps appending to (TensorBoard's ``runs/``)
are copied, so that the stored checkpoint never changes afterwards. Across filesystems, or
where links are refused, files are copied.
"""

from __future__ import annotations

import errno
import logging
import os
import pathlib
import shutil
from collections.abc import Callable

log = logging.getLogger("determined.transformers")

# Errors of os.link that mean "this filesystem pair cannot link; copy instead".
_CANNOT_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES}


def place(
    src: pathlib.Path,
    dst: pathlib.Path,
    *,
    select: Callable[[str], bool],
    link: Callable[[str], bool],
) -> int:
    """Put the files under ``src`` that ``select`` picks into ``dst`` (same relative paths);
    those ``link`` picks as hard links where the filesystem allows. Returns the count."""
    count = 0
    can_link = True
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        here = pathlib.Path(dirpath)
        rel_dir = here.relative_to(src).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        for name in sorted(filenames):
            rel = prefix + name
            if not select(rel):
                continue
            target = dst / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if can_link and link(rel):
                try:
                    os.link(here / name, target)
                    count += 1
                    continue
                except OSError as e:
                    if e.errno not in _CANNOT_LINK:
                        raise
                    log.debug("cannot link %s into the checkpoint (%s); copying", rel, e)
                    can_link = False
            shutil.copy2(here / name, target)
            count += 1
    return count
