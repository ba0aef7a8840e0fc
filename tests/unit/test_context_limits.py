"""The context cap holds for what a context unpacks to, not only for its packed bytes."""

from __future__ import annotations

import gzip
import io
import tarfile
import time
from pathlib import Path

import pytest

from determined.common.context import (
    ContextUnpacksTooLarge,
    InvalidContext,
    check_context,
    pack_context,
    unpack_context,
)

KIB = 1024
MIB = 1024 * KIB


def zeros(n: int) -> io.RawIOBase:
    """``n`` zero bytes, produced as they are read."""

    class Zeros(io.RawIOBase):
        left = n

        def readable(self) -> bool:
            return True

        def readinto(self, b: memoryview) -> int:  # type: ignore[override]  # RawIOBase's
            count = min(len(b), self.left)
            b[:count] = bytes(count)
            self.left -= count
            return count

    return Zeros()


def archive(*members: tuple[str, int] | str) -> bytes:
    """A gzip'd tar of ``(name, size)`` files of zeros and ``name/`` directories."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for member in members:
                if isinstance(member, str):
                    info = tarfile.TarInfo(member.rstrip("/"))
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
                else:
                    info = tarfile.TarInfo(member[0])
                    info.size = member[1]
                    info.mode = 0o644
                    tar.addfile(info, zeros(member[1]))
    return buf.getvalue()


def header_only(name: str, declared: int) -> bytes:
    """A gzip'd tar whose one member's header declares ``declared`` bytes that never follow."""
    info = tarfile.TarInfo(name)
    info.size = declared
    return gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT), mtime=0)


def test_a_small_archive_that_unpacks_past_the_cap_is_refused_at_create() -> None:
    data = archive(("small.txt", 10), ("zeros.bin", 3 * MIB))
    assert len(data) < 10 * KIB
    with pytest.raises(ContextUnpacksTooLarge, match="unpacks to more than the 1 MiB limit"):
        check_context(data, max_bytes=1 * MIB)
    assert check_context(data, max_bytes=4 * MIB) == [("small.txt", 10), ("zeros.bin", 3 * MIB)]


def test_the_real_cap_counts_unpacked_bytes_and_reads_no_further_than_needed() -> None:
    # 3 GB of zeros declared in a few hundred bytes, as the 3 MB → 3 GB context.
    data = header_only("zeros.bin", 3 * 1024 * MIB)
    started = time.monotonic()
    with pytest.raises(ContextUnpacksTooLarge, match="95 MiB"):
        check_context(data)
    assert time.monotonic() - started < 1


def test_unpacking_stops_at_the_cap_and_removes_what_it_wrote(tmp_path: Path) -> None:
    dest = tmp_path / "task"
    dest.mkdir()
    (dest / "already-here.txt").write_text("kept")
    data = archive("sub/", ("sub/small.txt", 10), "sub/deeper/", ("sub/deeper/zeros.bin", 3 * MIB))

    with pytest.raises(ContextUnpacksTooLarge) as refused:
        unpack_context(data, dest, max_bytes=1 * MIB)

    assert "1 MiB" in refused.value.message
    assert sorted(p.name for p in dest.rglob("*")) == ["already-here.txt"]


def test_unpacking_a_declared_but_absent_payload_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ContextUnpacksTooLarge):
        unpack_context(header_only("huge.bin", 3 * 1024 * MIB), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_too_many_entries_are_refused_at_create_and_when_unpacking(tmp_path: Path) -> None:
    data = archive(*[(f"f{i}.txt", 1) for i in range(12)])
    with pytest.raises(InvalidContext, match="more than 10 files and directories"):
        check_context(data, max_members=10)
    with pytest.raises(InvalidContext, match="more than 10 files and directories"):
        unpack_context(data, tmp_path, max_members=10)
    assert list(tmp_path.iterdir()) == []


def test_packing_a_directory_of_too_many_entries_names_the_count_and_detignore(
    tmp_path: Path,
) -> None:
    for i in range(6):
        (tmp_path / f"f{i}.py").write_text("x")
    with pytest.raises(InvalidContext, match=r"has 6 files and directories .* \.detignore"):
        pack_context(tmp_path, max_members=5)


def test_a_context_within_the_caps_unpacks_whole(tmp_path: Path) -> None:
    data = archive("sub/", ("sub/a.bin", 2 * MIB), ("b.txt", 3))
    unpack_context(data, tmp_path, max_bytes=3 * MIB, max_members=3)
    assert (tmp_path / "sub" / "a.bin").stat().st_size == 2 * MIB
    assert (tmp_path / "b.txt").read_bytes() == b"\0\0\0"
