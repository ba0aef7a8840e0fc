"""The model-definition context: the user's directory, packed for the master and unpacked in tasks.

The CLI packs the directory once (``.detignore`` and built-in ignores applied, size capped
before anything is compressed, so a forgotten dataset fails in milliseconds rather than after
a long upload); the master stores the bytes as they are; every task unpacks them into its
working directory.

Symbolic links are followed when packing: a link that points inside the context is stored as
a copy of its target, so the task sees ordinary files and needs no link support on unpacking.
A link that points outside the context is refused, because the task could not see its target
and silently copying files from elsewhere on the user's machine would be a surprise.
"""

from __future__ import annotations

import functools
import gzip
import io
import os
import stat
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from determined.common.context_archive import (
    MAX_CONTEXT_BYTES,
    MAX_CONTEXT_MEMBERS,
    ContextUnpacksTooLarge,
    InvalidContext,
    check_context,
    context_files,
    mib,
    unpack_context,
)
from determined.common.errors import InvalidArgument

if TYPE_CHECKING:
    import pathspec

# Reading packed bytes (checking, listing, unpacking) lives in context_archive, which a
# task's launcher imports without the packing half.
__all__ = [
    "IGNORE_FILE",
    "MAX_CONTEXT_BYTES",
    "MAX_CONTEXT_MEMBERS",
    "ContextTooLarge",
    "ContextUnpacksTooLarge",
    "InvalidContext",
    "check_context",
    "context_files",
    "pack_context",
    "unpack_context",
]

IGNORE_FILE = ".detignore"
# Applied even when .detignore re-includes them: byte code is interpreter-specific and stale.
_BUILTIN_IGNORES = ["__pycache__/", "*.pyc"]


class ContextTooLarge(InvalidArgument):
    """The files left after ignores add up to more than the limit."""

    def __init__(self, path: str, size: int, limit: int, largest: list[tuple[str, int]]) -> None:
        self.path = path
        self.size = size
        self.limit = limit
        self.largest = largest
        biggest = ", ".join(f"{name} ({mib(n)})" for name, n in largest)
        super().__init__(
            f"context directory {path} is {mib(size)} after ignores, over the "
            f"{mib(limit, digits=0)} limit; list large files or folders in a {IGNORE_FILE} "
            f"file at its root (gitignore syntax); largest files included: {biggest}"
        )


# A NamedTuple, not a dataclass: dataclasses (with inspect) is ~10 ms of every launcher's start.
class _Entry(NamedTuple):
    name: str  # POSIX path inside the archive
    source: Path  # path on disk, links already resolved
    st: os.stat_result  # stat of the link target


def pack_context(
    path: str | os.PathLike[str],
    *,
    includes: Sequence[str | os.PathLike[str]] = (),
    max_bytes: int = MAX_CONTEXT_BYTES,
    max_members: int = MAX_CONTEXT_MEMBERS,
) -> bytes:
    """Pack a context directory (plus ``-i/--include`` paths) into a gzip'd tar.

    Each include lands at the top level under its base name and counts towards the same
    limit; an included directory honours its own ``.detignore``.

    Raises:
        InvalidContext: the directory is missing, a link escapes it, or a file is unreadable.
        ContextTooLarge: the files kept add up to more than ``max_bytes``.
    """
    root = Path(path)
    if not root.is_dir():
        what = "does not exist" if not root.exists() else "is not a directory"
        raise InvalidContext(f"context directory {root} {what}")
    entries = list(_walk(root, ""))
    taken = {e.name.split("/", 1)[0] for e in entries}
    for inc in map(Path, includes):
        if not inc.exists():
            raise InvalidContext(f"included path {inc} does not exist")
        if inc.name in taken:
            raise InvalidContext(f"included path {inc} clashes with {inc.name} in the context")
        taken.add(inc.name)
        entries.append(_Entry(inc.name, inc.resolve(), inc.stat()))
        if inc.is_dir():
            entries.extend(_walk(inc, inc.name + "/"))
    entries.sort(key=lambda e: e.name)

    if len(entries) > max_members:
        raise InvalidContext(
            f"context directory {root} has {len(entries)} files and directories after ignores, "
            f"over the limit of {max_members}; list what the task does not need in a "
            f"{IGNORE_FILE} file at its root (gitignore syntax)"
        )
    files = [(e.name, e.st.st_size) for e in entries if stat.S_ISREG(e.st.st_mode)]
    total = sum(size for _, size in files)
    if total > max_bytes:
        largest = sorted(files, key=lambda f: (-f[1], f[0]))[:3]
        raise ContextTooLarge(str(root), total, max_bytes, largest)

    buf = io.BytesIO()
    # mtime=0 in the gzip header keeps identical directories packing to identical bytes.
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for e in entries:
                _add(tar, e)
    return buf.getvalue()


def _walk(top: Path, prefix: str) -> Iterator[_Entry]:
    """Yield what to pack under ``top``, with ``prefix`` prepended to archive names."""
    top = top.resolve()
    yield from _walk_dir(top, top, prefix, _read_ignores(top), frozenset({top}), "")


@functools.cache
def _builtin_spec() -> pathspec.GitIgnoreSpec:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(_BUILTIN_IGNORES)


def _read_ignores(top: Path) -> pathspec.GitIgnoreSpec | None:
    # Imported here: only packing needs it, and every task's launcher unpacks.
    import pathspec

    ignore_file = top / IGNORE_FILE
    if not ignore_file.is_file():
        return None
    try:
        return pathspec.GitIgnoreSpec.from_lines(ignore_file.read_text().splitlines())
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidContext(f"cannot read {ignore_file}: {e}") from None


def _walk_dir(
    directory: Path,
    top: Path,
    prefix: str,
    spec: pathspec.GitIgnoreSpec | None,
    parents: frozenset[Path],
    rel: str,
) -> Iterator[_Entry]:
    try:
        children = sorted(os.scandir(directory), key=lambda d: d.name)
    except OSError as e:
        raise InvalidContext(f"cannot read directory {directory}: {e.strerror}") from None
    for child in children:
        child_rel = rel + child.name
        source = Path(child.path)
        if child.is_symlink():
            source = _resolve_link(Path(child.path), top)
        try:
            st = source.stat()
        except OSError as e:
            raise InvalidContext(f"cannot read {child.path}: {e.strerror}") from None
        is_dir = stat.S_ISDIR(st.st_mode)
        match = child_rel + "/" if is_dir else child_rel
        if _builtin_spec().match_file(match) or (spec and spec.match_file(match)):
            continue
        if is_dir:
            if source in parents:
                raise InvalidContext(f"symbolic link {child.path} loops back to {source}")
            yield _Entry(prefix + child_rel, source, st)
            yield from _walk_dir(source, top, prefix, spec, parents | {source}, child_rel + "/")
        elif stat.S_ISREG(st.st_mode):
            if not os.access(source, os.R_OK):
                raise InvalidContext(f"cannot read {child.path}: permission denied")
            yield _Entry(prefix + child_rel, source, st)
        else:
            raise InvalidContext(
                f"{child.path} is not a regular file or directory; add it to {IGNORE_FILE}"
            )


def _resolve_link(link: Path, top: Path) -> Path:
    target = Path(os.path.realpath(link))
    if not target.is_relative_to(top):
        raise InvalidContext(
            f"symbolic link {link} points to {target}, outside the context directory {top}; "
            f"copy the target into the context, or add the link to {IGNORE_FILE}"
        )
    if not target.exists():
        raise InvalidContext(f"symbolic link {link} points to {target}, which does not exist")
    return target


def _add(tar: tarfile.TarFile, e: _Entry) -> None:
    info = tarfile.TarInfo(e.name)
    info.mode = stat.S_IMODE(e.st.st_mode)
    info.mtime = int(e.st.st_mtime)  # a float would cost a PAX header per file
    if stat.S_ISDIR(e.st.st_mode):
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        return
    info.size = e.st.st_size
    try:
        with open(e.source, "rb") as f:
            tar.addfile(info, f)
    except OSError as err:
        raise InvalidContext(f"cannot read {e.source}: {err}") from None
