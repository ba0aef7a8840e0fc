"""How DetCallback puts the Trainer's checkpoint directory into checkpoint storage
(determined.transformers._files): linked where it can be, copied where it must be."""

from __future__ import annotations

import os
import pathlib
import tempfile

import pytest

from determined.transformers import _files


def trainer_output(root: pathlib.Path) -> pathlib.Path:
    (root / "checkpoint-20" / "global_step20").mkdir(parents=True)
    (root / "checkpoint-20" / "model.safetensors").write_bytes(b"w" * 100)
    (root / "checkpoint-20" / "global_step20" / "optim_states.pt").write_bytes(b"o" * 10)
    (root / "checkpoint-10").mkdir()
    (root / "checkpoint-10" / "model.safetensors").write_bytes(b"old")
    (root / "runs").mkdir()
    (root / "runs" / "events.out.tfevents.1").write_bytes(b"e")
    return root


def place(src: pathlib.Path, dst: pathlib.Path) -> int:
    return _files.place(
        src,
        dst,
        select=lambda rel: rel.startswith(("checkpoint-20/", "runs/")),
        link=lambda rel: rel.startswith("checkpoint-20/"),
    )


def test_the_saved_step_is_linked_and_logs_are_copied(tmp_path: pathlib.Path) -> None:
    src = trainer_output(tmp_path / "out")
    dst = tmp_path / "ckpt"
    assert place(src, dst) == 3
    files = sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file())
    assert files == [
        "checkpoint-20/global_step20/optim_states.pt",
        "checkpoint-20/model.safetensors",
        "runs/events.out.tfevents.1",
    ]
    model = "checkpoint-20/model.safetensors"
    assert os.stat(src / model).st_ino == os.stat(dst / model).st_ino
    events = "runs/events.out.tfevents.1"
    assert os.stat(src / events).st_ino != os.stat(dst / events).st_ino
    # The Trainer deleting its old checkpoints leaves the stored one whole.
    for p in sorted((src / "checkpoint-20").rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    assert (dst / model).read_bytes() == b"w" * 100


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs a second filesystem")
def test_across_filesystems_the_files_are_copied(tmp_path: pathlib.Path) -> None:
    src = trainer_output(tmp_path / "out")
    if os.stat(src).st_dev == os.stat("/dev/shm").st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the temporary directory")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        dst = pathlib.Path(shm) / "ckpt"
        assert place(src, dst) == 3
        model = "checkpoint-20/model.safetensors"
        assert (dst / model).read_bytes() == b"w" * 100
        assert os.stat(src / model).st_ino != os.stat(dst / model).st_ino
