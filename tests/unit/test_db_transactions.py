"""Units of work in the master's store: one transaction for every write inside, whoever in
the call stack makes it; all or nothing; other writers wait; the test-only exit hook."""

from __future__ import annotations

import asyncio
import pathlib
import sqlite3
import threading
from collections.abc import AsyncIterator

import pytest

from pydet.master.store import db as db_module
from pydet.master.store.db import Database
from pydet.master.store.sqlite import SQLite as _SQLite


@pytest.fixture
async def db(tmp_path: pathlib.Path) -> AsyncIterator[Database]:
    store = Database(tmp_path / "x.db")
    await store.open()
    await store.execute("CREATE TABLE t (v INTEGER)")
    try:
        yield store
    finally:
        await store.close()


async def values(db: Database) -> list[int]:
    return [int(r["v"]) for r in await db.fetch_all("SELECT v FROM t ORDER BY rowid")]


async def insert(db: Database, v: int) -> None:
    await db.execute("INSERT INTO t (v) VALUES (?)", (v,))


async def test_writes_from_anywhere_inside_a_unit_commit_together(db: Database) -> None:
    async def deeper() -> None:
        await db.execute_many("INSERT INTO t (v) VALUES (?)", [(2,), (3,)])
        await db.transaction([("INSERT INTO t (v) VALUES (?)", (4,))])

    async with db.atomic():
        await insert(db, 1)
        await deeper()
        assert db.in_unit
        assert db.in_transaction
    assert not db.in_unit
    assert not db.in_transaction
    assert await values(db) == [1, 2, 3, 4]


async def test_an_error_inside_a_unit_rolls_back_every_write_in_it(db: Database) -> None:
    await insert(db, 0)
    with pytest.raises(RuntimeError, match="half way"):
        async with db.atomic():
            await insert(db, 1)
            async with db.atomic():  # joins the outer unit
                await insert(db, 2)
            raise RuntimeError("half way")
    assert await values(db) == [0]
    # The store is usable afterwards.
    await insert(db, 3)
    assert await values(db) == [0, 3]


async def test_an_error_in_a_joined_unit_rolls_back_the_whole_unit(db: Database) -> None:
    with pytest.raises(ValueError):
        async with db.atomic():
            await insert(db, 1)
            async with db.atomic():
                await insert(db, 2)
                raise ValueError
    assert await values(db) == []


async def test_other_writers_wait_for_the_unit_and_never_land_inside_it(db: Database) -> None:
    inside = asyncio.Event()
    release = asyncio.Event()

    async def unit() -> None:
        async with db.atomic():
            await insert(db, 1)
            inside.set()
            await release.wait()
            await insert(db, 2)

    async def other() -> None:
        await inside.wait()
        await insert(db, 99)

    first = asyncio.create_task(unit())
    second = asyncio.create_task(other())
    await inside.wait()
    await asyncio.sleep(0.05)
    assert not second.done()  # it waits for the writer lock
    release.set()
    await asyncio.gather(first, second)
    assert await values(db) == [1, 2, 99]


async def test_a_task_started_inside_a_unit_does_not_join_it(db: Database) -> None:
    async with db.atomic():
        await insert(db, 1)
        # A task inherits the context; it must still wait for the lock, not write into the
        # unit without holding it.
        task = asyncio.create_task(insert(db, 2))
        await asyncio.sleep(0.05)
        assert not task.done()
    await task
    assert await values(db) == [1, 2]


async def test_work_after_commit_runs_once_committed_and_is_dropped_on_rollback(
    db: Database,
) -> None:
    seen: list[list[int]] = []

    async def look() -> None:
        # It runs outside the unit and the lock: it sees the commit and may write.
        seen.append(await values(db))
        await insert(db, 10)

    async with db.atomic():
        await insert(db, 1)
        await db.after_commit(look)
        assert seen == []
    assert seen == [[1]]
    assert await values(db) == [1, 10]

    with pytest.raises(RuntimeError):
        async with db.atomic():
            await db.after_commit(look)
            raise RuntimeError
    assert seen == [[1]]


async def test_a_failure_after_the_commit_does_not_undo_it(db: Database) -> None:
    async def fails() -> None:
        raise OSError("gone")

    async with db.atomic():
        await insert(db, 1)
        await db.after_commit(fails)
    assert await values(db) == [1]


async def test_a_unit_reads_the_writes_it_has_made(db: Database) -> None:
    async with db.atomic():
        await db.write("INSERT INTO t (v) VALUES (?)", (1,))
        await db.execute_many("INSERT INTO t (v) VALUES (?)", [(2,), (3,)])
        assert await values(db) == [1, 2, 3]
        await db.write("INSERT INTO t (v) VALUES (?)", (4,))
    assert await values(db) == [1, 2, 3, 4]


async def test_a_failing_write_rolls_its_unit_back_and_the_store_goes_on(db: Database) -> None:
    await db.write("INSERT INTO t (v) VALUES (?)", (0,))  # outside a unit: committed at once
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        async with db.atomic():
            await db.write("INSERT INTO t (v) VALUES (?)", (1,))
            await db.write("INSERT INTO nowhere (v) VALUES (?)", (2,))
    assert not db.in_transaction
    await insert(db, 3)
    assert await values(db) == [0, 3]


class Exited(BaseException):
    pass


async def test_the_test_hook_exits_right_after_the_nth_commit(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codes: list[int] = []

    def fake_exit(code: int) -> None:
        codes.append(code)
        raise Exited

    monkeypatch.setenv(db_module.EXIT_AFTER_COMMITS_ENV, "3")
    monkeypatch.setattr(db_module.os, "_exit", fake_exit)
    store = Database(tmp_path / "hook.db")
    await store.open()  # migrations are not counted
    try:
        await store.execute("CREATE TABLE t (v INTEGER)")  # 1
        async with store.atomic():  # 2: one commit however many writes
            await insert(store, 1)
            await insert(store, 2)
        with pytest.raises(Exited):
            await insert(store, 3)  # 3
        assert codes == [137]
    finally:
        await store.close()
    monkeypatch.delenv(db_module.EXIT_AFTER_COMMITS_ENV)
    reopened = Database(tmp_path / "hook.db")
    await reopened.open()
    try:
        # The third commit was durable before the exit.
        assert await values(reopened) == [1, 2, 3]
    finally:
        await reopened.close()


# -- the reader's connection ---------------------------------------------------------------


async def write(db: Database, v: int) -> None:
    async with db.atomic():
        await db.write("INSERT INTO t (v) VALUES (?)", (v,))


@pytest.fixture
async def busy_reader(db: Database) -> AsyncIterator[threading.Event]:
    """Keeps the reader's thread busy, as a long read would, until the event is set (at the
    latest at teardown)."""
    release = threading.Event()
    started = threading.Event()

    def hold(_: sqlite3.Connection) -> None:
        started.set()
        release.wait(10)

    assert isinstance(db.backend, _SQLite)
    task = asyncio.create_task(db.backend._on_reader(hold))
    async with asyncio.timeout(5):
        while not started.is_set():
            await asyncio.sleep(0.01)
    yield release
    release.set()
    await task


async def test_writes_commit_while_a_long_read_runs(
    db: Database, busy_reader: threading.Event, tmp_path: pathlib.Path
) -> None:
    async with asyncio.timeout(5):
        await write(db, 1)
        await write(db, 2)
    # Another connection, as a master started after a crash would open.
    with sqlite3.connect(tmp_path / "x.db") as other:
        assert [v for (v,) in other.execute("SELECT v FROM t ORDER BY rowid")] == [1, 2]


async def test_a_unit_reads_its_own_writes_without_waiting_for_the_reader(
    db: Database, busy_reader: threading.Event
) -> None:
    async with asyncio.timeout(5):
        async with db.atomic():
            await db.write("INSERT INTO t (v) VALUES (?)", (1,))
            assert await values(db) == [1]


async def test_a_read_after_a_write_sees_it(db: Database) -> None:
    await write(db, 1)
    assert await values(db) == [1]  # on the reader's connection: committed is enough


async def test_a_large_delete_commits_a_chunk_at_a_time(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_module, "DELETE_CHUNK", 2)
    await db.execute("CREATE TABLE d (id INTEGER PRIMARY KEY, k INTEGER)")
    await db.execute_many("INSERT INTO d (k) VALUES (?)", [(1,)] * 7 + [(2,)] * 2)
    before = db._commits

    await db.delete_in_chunks("d", "k = ?", (1,))

    assert db._commits - before == 4  # 7 rows, 2 a transaction
    rows = await db.fetch_all("SELECT k FROM d")
    assert [r["k"] for r in rows] == [2, 2]
