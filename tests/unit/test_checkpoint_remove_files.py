"""Removing some files of a checkpoint (Determined's CheckpointsRemoveFiles): globs match
files and directories, the record lists what is left, and its state says how much."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator

import pytest

from determined.common import errors
from pydet.master import queries
from pydet.master.experiments.checkpoints import Checkpoints
from pydet.master.store.db import Database

FILES = {
    "metadata.json": "{}",
    "state": "weights",
    "model/a.bin": "aaaa",
    "model/sub/b.bin": "bb",
    "logs/out.txt": "x",
}


@pytest.fixture
async def db(tmp_path: pathlib.Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "pydet.db")
    await database.open()
    try:
        yield database
    finally:
        await database.close()


async def stored(db: Database, root: pathlib.Path, uuid: str) -> pathlib.Path:
    """A completed checkpoint with FILES in a shared_fs storage under ``root``."""
    for rel, text in FILES.items():
        path = root / uuid / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    storage = {"type": "shared_fs", "host_path": str(root), "storage_path": None}
    await db.execute(
        "INSERT INTO checkpoints (uuid, trial_id, experiment_id, steps_completed, metadata,"
        " resources, size, state, report_time, storage) VALUES (?, 1, 1, 1, '{}', ?, ?,"
        " 'COMPLETED', 0, ?)",
        (
            uuid,
            json.dumps({k: len(v) for k, v in FILES.items()}),
            sum(len(v) for v in FILES.values()),
            json.dumps(storage),
        ),
    )
    return root / uuid


async def record(db: Database, uuid: str) -> queries.CheckpointRow:
    return await queries.checkpoint(db, uuid)


async def test_matching_files_go_and_the_checkpoint_is_partially_deleted(
    db: Database, tmp_path: pathlib.Path
) -> None:
    directory = await stored(db, tmp_path / "ckpts", "c1")
    await Checkpoints(db).remove_files(["c1"], ["state", "model/**/*.bin"])
    left = await record(db, "c1")
    assert left.state == "PARTIALLY_DELETED"
    assert left.resources == {"metadata.json": 2, "logs/out.txt": 1}
    assert left.size == 3
    assert sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")) == [
        "logs",
        "logs/out.txt",
        "metadata.json",
    ]


async def test_a_glob_naming_a_directory_takes_its_files(
    db: Database, tmp_path: pathlib.Path
) -> None:
    directory = await stored(db, tmp_path / "ckpts", "c2")
    await Checkpoints(db).remove_files(["c2"], ["model", "*.txt"])
    assert set((await record(db, "c2")).resources) == {"metadata.json", "state", "logs/out.txt"}
    assert not (directory / "model").exists()


async def test_removing_every_file_deletes_it_and_no_globs_only_rereads(
    db: Database, tmp_path: pathlib.Path
) -> None:
    directory = await stored(db, tmp_path / "ckpts", "c3")
    (directory / "extra").write_text("new")
    await Checkpoints(db).remove_files(["c3"], [])
    refreshed = await record(db, "c3")
    assert refreshed.state == "COMPLETED" and refreshed.resources["extra"] == 3
    await Checkpoints(db).remove_files(["c3"], ["**"])
    assert (await record(db, "c3")).state == "DELETED"
    assert list(directory.iterdir()) == []
    with pytest.raises(errors.FailedPrecondition, match="checkpoint c3 was deleted"):
        await Checkpoints(db).remove_files(["c3"], ["state"])


async def test_a_missing_checkpoint_or_unreadable_storage_is_named(
    db: Database, tmp_path: pathlib.Path
) -> None:
    with pytest.raises(errors.NotFound, match="checkpoint nope not found"):
        await Checkpoints(db).remove_files(["nope"], ["state"])
    directory = await stored(db, tmp_path / "ckpts", "c4")
    for path in sorted(directory.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    directory.rmdir()
    with pytest.raises(errors.FailedPrecondition, match="cannot read the storage of checkpoint c4"):
        await Checkpoints(db).remove_files(["c4"], ["state"])
