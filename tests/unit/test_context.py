from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from determined.common import errors
from determined.common.context import (
    MAX_CONTEXT_BYTES,
    ContextTooLarge,
    InvalidContext,
    context_files,
    pack_context,
    unpack_context,
)


def write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def names(data: bytes) -> list[str]:
    return [name for name, _ in context_files(data)]


def test_pack_then_unpack_round_trips_files_and_executable_bits(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src / "train.py", "print('hi')\n")
    write(src / "lib" / "model.py", "W = 1\n")
    hook = write(src / "startup-hook.sh", "#!/bin/sh\necho hook\n")
    hook.chmod(0o755)
    (src / "empty").mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()

    unpack_context(pack_context(src), dest)

    assert (dest / "train.py").read_text() == "print('hi')\n"
    assert (dest / "lib" / "model.py").read_text() == "W = 1\n"
    assert (dest / "empty").is_dir()
    assert os.access(dest / "startup-hook.sh", os.X_OK)
    assert not os.access(dest / "train.py", os.X_OK)


def test_files_are_listed_sorted_with_sizes_and_packing_is_deterministic(tmp_path: Path) -> None:
    write(tmp_path / "b.py", "12345")
    write(tmp_path / "a" / "z.py", "1")
    write(tmp_path / "a.txt", "12")

    data = pack_context(tmp_path)

    assert context_files(data) == [("a.txt", 2), ("a/z.py", 1), ("b.py", 5)]
    assert pack_context(tmp_path) == data


def test_detignore_patterns_are_honoured(tmp_path: Path) -> None:
    write(tmp_path / ".detignore", "*.log\n!keep.log\ndata/\n/build\n")
    write(tmp_path / "train.py")
    write(tmp_path / "run.log")
    write(tmp_path / "sub" / "debug.log")
    write(tmp_path / "keep.log")
    write(tmp_path / "data" / "big.bin")
    write(tmp_path / "sub" / "data" / "big.bin")
    write(tmp_path / "build" / "out.o")
    write(tmp_path / "sub" / "build" / "kept.o")

    assert names(pack_context(tmp_path)) == [
        ".detignore",
        "keep.log",
        "sub/build/kept.o",
        "train.py",
    ]


def test_ignored_directory_is_not_descended_into(tmp_path: Path) -> None:
    write(tmp_path / ".detignore", "outside/\n")
    # A link escaping the context would be an error, but nobody looks inside an ignored folder.
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "escape").symlink_to("/etc")
    write(tmp_path / "train.py")

    assert names(pack_context(tmp_path)) == [".detignore", "train.py"]


def test_byte_code_is_always_ignored_even_if_detignore_re_includes_it(tmp_path: Path) -> None:
    write(tmp_path / ".detignore", "!*.pyc\n!__pycache__/\n")
    write(tmp_path / "model.py")
    write(tmp_path / "model.pyc")
    write(tmp_path / "__pycache__" / "model.cpython-311.pyc")
    write(tmp_path / "lib" / "__pycache__" / "x.txt")

    assert names(pack_context(tmp_path)) == [".detignore", "model.py"]


def test_context_over_the_limit_names_size_and_detignore(tmp_path: Path) -> None:
    write(tmp_path / "train.py")
    with open(tmp_path / "dataset.bin", "wb") as f:
        f.truncate(96 * 1024 * 1024)  # sparse: the size check must not need to read it

    with pytest.raises(ContextTooLarge) as info:
        pack_context(tmp_path)

    msg = str(info.value)
    assert isinstance(info.value, errors.InvalidArgument)
    assert "96.0 MiB" in msg and "95 MiB" in msg
    assert ".detignore" in msg
    assert "dataset.bin" in msg
    assert info.value.limit == MAX_CONTEXT_BYTES


def test_too_large_error_names_the_three_largest_files(tmp_path: Path) -> None:
    for name, size in [("a", 10), ("b", 40), ("c", 30), ("d", 20)]:
        write(tmp_path / name, "x" * size)

    with pytest.raises(ContextTooLarge) as info:
        pack_context(tmp_path, max_bytes=50)

    assert info.value.largest == [("b", 40), ("c", 30), ("d", 20)]
    assert "a (" not in str(info.value)


def test_ignoring_the_large_file_lets_the_context_pack(tmp_path: Path) -> None:
    write(tmp_path / "train.py")
    with open(tmp_path / "dataset.bin", "wb") as f:
        f.truncate(96 * 1024 * 1024)
    write(tmp_path / ".detignore", "dataset.bin\n")

    assert names(pack_context(tmp_path)) == [".detignore", "train.py"]


def test_symlink_escaping_the_context_is_refused_naming_it(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    secret = write(tmp_path / "secret.txt")
    write(ctx / "train.py")
    (ctx / "creds").symlink_to(secret)

    with pytest.raises(InvalidContext) as info:
        pack_context(ctx)

    assert str(ctx / "creds") in str(info.value)
    assert str(secret) in str(info.value)


def test_symlink_inside_the_context_is_packed_as_a_copy(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    write(ctx / "configs" / "base.yaml", "lr: 0.1\n")
    (ctx / "current.yaml").symlink_to("configs/base.yaml")
    (ctx / "cfg").symlink_to("configs", target_is_directory=True)
    dest = tmp_path / "dest"
    dest.mkdir()

    unpack_context(pack_context(ctx), dest)

    assert not (dest / "current.yaml").is_symlink()
    assert (dest / "current.yaml").read_text() == "lr: 0.1\n"
    assert (dest / "cfg" / "base.yaml").read_text() == "lr: 0.1\n"


def test_symlink_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to("..", target_is_directory=True)

    with pytest.raises(InvalidContext, match="loops"):
        pack_context(tmp_path)


def test_missing_or_non_directory_context_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidContext, match="does not exist"):
        pack_context(tmp_path / "nope")
    with pytest.raises(InvalidContext, match="is not a directory"):
        pack_context(write(tmp_path / "file.py"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "locked.txt").chmod(0)

    with pytest.raises(InvalidContext, match=r"locked\.txt"):
        pack_context(tmp_path)


def test_includes_land_at_top_level_and_count_towards_the_limit(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    write(ctx / "train.py", "1")
    shared = tmp_path / "elsewhere" / "shared"
    write(shared / ".detignore", "*.tmp\n")
    write(shared / "util.py", "22")
    write(shared / "scratch.tmp", "333")
    extra = write(tmp_path / "extra.yaml", "4444")

    data = pack_context(ctx, includes=[shared, extra])

    assert context_files(data) == [
        ("extra.yaml", 4),
        ("shared/.detignore", 6),
        ("shared/util.py", 2),
        ("train.py", 1),
    ]
    with pytest.raises(ContextTooLarge):
        pack_context(ctx, includes=[shared, extra], max_bytes=10)


def test_include_clashing_with_a_context_entry_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "ctx" / "train.py")
    other = write(tmp_path / "other" / "train.py")

    with pytest.raises(InvalidContext, match="clashes"):
        pack_context(tmp_path / "ctx", includes=[other])


def crafted_tar(member: tarfile.TarInfo, payload: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        member.size = len(payload) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(payload) if member.isfile() else None)
    return buf.getvalue()


@pytest.mark.parametrize("name", ["../evil", "sub/../../evil", "/tmp/evil"])
def test_unpack_refuses_members_leaving_the_destination(tmp_path: Path, name: str) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()

    with pytest.raises(InvalidContext, match="leaves the destination"):
        unpack_context(crafted_tar(tarfile.TarInfo(name), b"pwned"), dest)

    assert not (tmp_path / "evil").exists()
    assert list(dest.iterdir()) == []


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE])
def test_unpack_refuses_links_and_devices(tmp_path: Path, kind: bytes) -> None:
    member = tarfile.TarInfo("link")
    member.type = kind
    member.linkname = "/etc/passwd"
    member.mode = stat.S_IMODE(0o644)

    with pytest.raises(InvalidContext, match="not a file or directory"):
        unpack_context(crafted_tar(member), tmp_path)

    assert list(tmp_path.iterdir()) == []


def test_garbage_bytes_are_an_invalid_context(tmp_path: Path) -> None:
    with pytest.raises(InvalidContext):
        unpack_context(b"not a tarball", tmp_path)
    with pytest.raises(InvalidContext):
        context_files(b"\x1f\x8b truncated")
