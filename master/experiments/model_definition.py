"""An experiment's context as Determined's clients send it: CreateExperimentRequest's
``model_definition``, a list of files (path, tar type flag, content, mtime, mode), packed here
into the gzip'd tar that pydet's own clients send and the master keeps.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Sequence
from pathlib import PurePosixPath

from determined.api.gen import v1
from determined.common import errors
from determined.common.context_archive import MAX_CONTEXT_BYTES, mib

_FILE, _DIRECTORY = ord("0"), ord("5")


def _checked_path(f: v1.File, where: str) -> str:
    path = PurePosixPath(f.path)
    if not f.path or path.is_absolute() or ".." in path.parts:
        raise errors.InvalidArgument(f"{where}.path: {f.path!r} must be relative, without '..'")
    return str(path)


def archive(files: Sequence[v1.File]) -> bytes:
    """The files as a gzip'd tar; refuses a path outside the context, a kind of entry other
    than a file or a directory, and more content than a context may hold."""
    total = sum(len(f.content) for f in files)
    if total > MAX_CONTEXT_BYTES:
        raise errors.InvalidArgument(
            f"modelDefinition: {mib(total)} of files; a context holds at most "
            f"{mib(MAX_CONTEXT_BYTES, digits=0)}"
        )
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for i, f in enumerate(files):
                where = f"modelDefinition[{i}]"
                info = tarfile.TarInfo(_checked_path(f, where))
                info.mtime = f.mtime
                if f.type == _DIRECTORY:
                    info.type = tarfile.DIRTYPE
                    info.mode = f.mode or 0o755
                    tar.addfile(info)
                elif f.type in (_FILE, 0):
                    info.size = len(f.content)
                    info.mode = f.mode or 0o644
                    tar.addfile(info, io.BytesIO(f.content))
                else:
                    raise errors.InvalidArgument(
                        f"{where}.type: {f.type} is neither a file (48) nor a directory (53)"
                    )
    return out.getvalue()
