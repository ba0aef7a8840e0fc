"""Downloading a recorded checkpoint's files from its storage."""

from __future__ import annotations

import json
import pathlib

import pytest

from determined.common import checkpoint_files, errors


@pytest.fixture
def storage(tmp_path: pathlib.Path) -> dict[str, str]:
    ckpt = tmp_path / "store" / "abc"
    (ckpt / "sub").mkdir(parents=True)
    (ckpt / "model.bin").write_bytes(b"weights")
    (ckpt / "sub" / "opt.bin").write_bytes(b"state")
    return {"type": "shared_fs", "host_path": str(tmp_path / "store")}


def test_download_copies_the_files_and_writes_the_metadata(
    storage: dict[str, str], tmp_path: pathlib.Path
) -> None:
    out = checkpoint_files.download(
        "abc", json.dumps(storage), tmp_path / "out", metadata={"steps_completed": 3}
    )
    assert (out / "model.bin").read_bytes() == b"weights"
    assert (out / "sub" / "opt.bin").read_bytes() == b"state"
    assert json.loads((out / "metadata.json").read_text()) == {"steps_completed": 3}


def test_download_defaults_to_checkpoints_uuid(
    storage: dict[str, str], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert checkpoint_files.download("abc", storage) == pathlib.Path("checkpoints", "abc")
    assert (tmp_path / "checkpoints" / "abc" / "model.bin").is_file()


def test_a_checkpoint_missing_from_its_storage_is_a_clear_error(
    storage: dict[str, str], tmp_path: pathlib.Path
) -> None:
    with pytest.raises(errors.FailedPrecondition, match="checkpoint gone is not in"):
        checkpoint_files.download("gone", storage, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_without_storage_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.FailedPrecondition, match="no recorded checkpoint storage"):
        checkpoint_files.download("abc", "", tmp_path / "out")
    with pytest.raises(errors.FailedPrecondition, match="unknown checkpoint storage type"):
        checkpoint_files.download("abc", {"type": "floppy"}, tmp_path / "out")


def test_redacted_secrets_are_left_to_this_machines_credentials(
    storage: dict[str, str], tmp_path: pathlib.Path
) -> None:
    shown = {**storage, "password": checkpoint_files.REDACTED}
    out = checkpoint_files.download("abc", shown, tmp_path / "out")
    assert (out / "model.bin").is_file()
