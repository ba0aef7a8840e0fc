"""Packed context bytes, read: checked, listed and unpacked.

Every task's launcher unpacks the experiment's context, and the master checks what it is
given; neither needs the packing half (``determined.common.context``, which re-exports
everything here), so this module is all that a launcher imports of it.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from determined.common.errors import InvalidArgument

MAX_CONTEXT_BYTES = 95 * 1024 * 1024
# Files and directories in one context: far more than any model directory needs, few enough
# that listing or unpacking one costs little however small each entry is.
MAX_CONTEXT_MEMBERS = 100_000
_CHUNK = 1024 * 1024
_MIB = 1024 * 1024


class InvalidContext(InvalidArgument):
    """The context directory, or packed context bytes, cannot be used as they are."""


def mib(n: int, *, digits: int = 1) -> str:
    """``n`` bytes in MiB, for messages."""
    return f"{n / _MIB:.{digits}f} MiB"


def _open(data: bytes) -> tarfile.TarFile:
    try:
        # Streaming mode: members are read one by one, and nothing is decompressed ahead.
        return tarfile.open(fileobj=io.BytesIO(data), mode="r|gz")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise InvalidContext(f"context is not a gzip'd tar archive: {e}") from None


def _checked(m: tarfile.TarInfo) -> tarfile.TarInfo:
    """Refuse anything that could write outside the destination or is not plain data."""
    p = PurePosixPath(m.name)
    if p.is_absolute() or ".." in p.parts:
        raise InvalidContext(f"context archive member {m.name!r} leaves the destination")
    if not (m.isfile() or m.isdir()):
        raise InvalidContext(f"context archive member {m.name!r} is not a file or directory")
    return m


class _Budget:
    """What the members read so far add up to, against the unpacked-size and count limits."""

    def __init__(self, max_bytes: int, max_members: int) -> None:
        self.max_bytes = max_bytes
        self.max_members = max_members
        self.bytes = 0
        self.members = 0

    def count_member(self) -> None:
        self.members += 1
        if self.members > self.max_members:
            raise InvalidContext(
                f"context archive has more than {self.max_members} files and directories"
            )

    def count_bytes(self, n: int) -> None:
        self.bytes += n
        if self.bytes > self.max_bytes:
            raise ContextUnpacksTooLarge(self.max_bytes)


class ContextUnpacksTooLarge(InvalidContext):
    """Packed context bytes that would unpack to more than the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"context archive unpacks to more than the {mib(limit, digits=0)} limit on a "
            "context's size"
        )


def _members(tar: tarfile.TarFile, budget: _Budget) -> Iterator[tarfile.TarInfo]:
    """Each member in turn, checked and counted (files by the size their headers declare)
    before anything of it is read."""
    while True:
        try:
            m = tar.next()
        except (tarfile.TarError, OSError, EOFError) as e:
            raise InvalidContext(f"context archive is corrupt: {e}") from None
        if m is None:
            return
        budget.count_member()
        _checked(m)
        if m.isfile():
            budget.count_bytes(m.size)
        yield m


def check_context(
    data: bytes, *, max_bytes: int = MAX_CONTEXT_BYTES, max_members: int = MAX_CONTEXT_MEMBERS
) -> list[tuple[str, int]]:
    """List ``(path, size)`` of each file in packed context bytes, in archive order, after
    checking that the archive is well formed and that its files add up to at most
    ``max_bytes`` unpacked, in at most ``max_members`` entries.

    Stops at the first member over a limit, so a small archive that declares gigabytes costs
    no more than reading its headers up to that member.
    """
    if len(data) > max_bytes:
        raise InvalidContext(f"context archive is over the {mib(max_bytes, digits=0)} limit")
    budget = _Budget(max_bytes, max_members)
    with _open(data) as tar:
        return [(m.name, m.size) for m in _members(tar, budget) if m.isfile()]


def context_files(data: bytes) -> list[tuple[str, int]]:
    """List ``(path, size)`` of each file in packed context bytes, in archive order."""
    return check_context(data)


def unpack_context(
    data: bytes,
    dest: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_CONTEXT_BYTES,
    max_members: int = MAX_CONTEXT_MEMBERS,
) -> None:
    """Extract packed context bytes into the existing directory ``dest``, keeping modes.

    The bytes actually written are counted, whatever the headers say; past ``max_bytes``
    (or ``max_members`` entries) unpacking stops, everything it wrote is removed again, and
    ``InvalidContext`` says why.
    """
    root = Path(dest)
    created: list[Path] = []
    try:
        _unpack(data, root, _Budget(max_bytes, max_members), created)
    except BaseException:
        _remove(created)
        raise


def _unpack(data: bytes, root: Path, budget: _Budget, created: list[Path]) -> None:
    dirs: list[tuple[Path, tarfile.TarInfo]] = []
    with _open(data) as tar:
        for declared in _members(tar, budget):
            try:
                # The "data" filter re-checks what _checked did, and clears unsafe mode bits.
                m = tarfile.data_filter(declared, str(root))
            except tarfile.FilterError as e:
                raise InvalidContext(f"cannot unpack context: {e}") from None
            target = root / m.name
            _make_parents(target.parent, root, created)
            if m.isdir():
                if not target.is_dir():
                    target.mkdir()
                    created.append(target)
                dirs.append((target, m))
                continue
            if not target.exists():
                created.append(target)
            _write(tar, declared, target)
            _set_times_and_mode(target, m)
    # Directories last: a read-only directory is still written into above.
    for target, m in reversed(dirs):
        _set_times_and_mode(target, m)


def _write(tar: tarfile.TarFile, m: tarfile.TarInfo, target: Path) -> None:
    source = tar.extractfile(m)
    if source is None:
        raise InvalidContext(f"cannot read context archive member {m.name!r}")
    written = 0
    try:
        with open(target, "wb") as out:
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                # The budget counted the size the header declared; no member writes more.
                if written > m.size:
                    raise InvalidContext(f"context archive member {m.name!r} is corrupt")
                out.write(chunk)
    except (tarfile.TarError, EOFError) as e:
        raise InvalidContext(f"cannot unpack context: {e}") from None


def _make_parents(directory: Path, root: Path, created: list[Path]) -> None:
    missing = []
    while directory != root and not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir()
        created.append(d)


def _set_times_and_mode(target: Path, m: tarfile.TarInfo) -> None:
    if m.mode is not None:
        os.chmod(target, m.mode)
    if m.mtime is not None:
        os.utime(target, (m.mtime, m.mtime))


def _remove(created: list[Path]) -> None:
    """Removes what an unpacking created, deepest last-made first; best effort."""
    for path in reversed(created):
        try:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o700)
                path.rmdir()
            else:
                path.unlink()
        except OSError:
            pass
