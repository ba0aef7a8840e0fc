"""Units of work in the master's store: one transaction for every write inside, whoever in
the call stack makes it; all or nothing; other writers wait; the test-only exit hook.

And the master's lock: a section of it hands its commits to the database's thread and lets
the lock go before they are done, so the next section runs meanwhile; the section itself
ends only once its writes are durable, and a commit that fails is raised there."""

from __future__ import annotations

import asyncio
import pathlib
import sqlite3
import threading
from collections.abc import AsyncIterator

import pytest

from pydet.master import db as db_module
from pydet.master.db import Database, MasterLock


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
        assert db.conn.in_transaction
    assert not db.in_unit
    assert not db.conn.in_transaction
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
    assert not db.conn.in_transaction
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


# -- the master's lock ---------------------------------------------------------------------


async def write(db: Database, v: int) -> None:
    async with db.atomic():
        await db.write("INSERT INTO t (v) VALUES (?)", (v,))


@pytest.fixture
async def busy_thread(db: Database) -> AsyncIterator[threading.Event]:
    """Keeps the database's thread busy until the event is set (at the latest at teardown):
    whatever is sent to it meanwhile waits in its queue."""
    release = threading.Event()
    started = threading.Event()

    def hold(_: sqlite3.Connection) -> None:
        started.set()
        release.wait(10)

    task = asyncio.create_task(db.backend._on_thread(hold))
    async with asyncio.timeout(5):
        while not started.is_set():
            await asyncio.sleep(0.01)
    yield release
    release.set()
    await task


async def test_the_next_section_runs_while_the_last_one_commits(
    db: Database, busy_thread: threading.Event
) -> None:
    lock = MasterLock()

    async def section(v: int) -> None:
        async with lock:
            await write(db, v)

    first = asyncio.create_task(section(1))
    await asyncio.sleep(0.05)
    assert not lock.locked() and not first.done()  # its commit waits, the lock does not

    entered = asyncio.Event()

    async def second() -> None:
        async with lock:
            entered.set()
            await write(db, 2)

    other = asyncio.create_task(second())
    await asyncio.wait_for(entered.wait(), 5)
    assert not first.done()

    busy_thread.set()
    await asyncio.gather(first, other)
    assert await values(db) == [1, 2]  # committed in the order the sections wrote


async def test_a_section_ends_once_its_writes_are_durable(
    db: Database, tmp_path: pathlib.Path
) -> None:
    lock = MasterLock()
    async with lock:
        await write(db, 1)
        await write(db, 2)
    # Another connection, as a master started after a crash would open.
    with sqlite3.connect(tmp_path / "x.db") as other:
        assert [v for (v,) in other.execute("SELECT v FROM t ORDER BY rowid")] == [1, 2]


async def test_reads_inside_the_section_see_its_writes_before_they_commit(
    db: Database, busy_thread: threading.Event
) -> None:
    lock = MasterLock()

    async def section() -> list[int]:
        async with lock:
            await write(db, 1)
            return await values(db)

    task = asyncio.create_task(section())
    await asyncio.sleep(0.05)
    busy_thread.set()
    assert await task == [1]


async def test_a_failed_commit_is_raised_where_its_section_ends(db: Database) -> None:
    await db.execute("CREATE UNIQUE INDEX t_v ON t (v)")
    lock = MasterLock()
    async with lock:
        await write(db, 1)
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        async with lock:
            await write(db, 2)
            await write(db, 1)  # fails on the thread, after the section has moved on
            await write(db, 3)
    # The failed transaction rolled back alone; the rest committed, and the store goes on.
    assert not db.conn.in_transaction
    assert await values(db) == [1, 2, 3]
    async with lock:
        await write(db, 4)
    assert await values(db) == [1, 2, 3, 4]


async def test_work_after_a_commit_runs_when_the_section_ends(db: Database) -> None:
    lock = MasterLock()
    seen: list[list[int]] = []

    async def look() -> None:
        seen.append(await values(db))

    async with lock:
        async with db.atomic():
            await db.write("INSERT INTO t (v) VALUES (?)", (1,))
            await db.after_commit(look)
        assert seen == []  # committed perhaps, but the section has not waited for it yet
    assert seen == [[1]]


async def test_a_section_that_fails_still_waits_for_what_it_wrote(db: Database) -> None:
    lock = MasterLock()
    seen: list[str] = []

    async def note() -> None:
        seen.append("after commit")

    with pytest.raises(RuntimeError, match="later"):
        async with lock:
            async with db.atomic():
                await db.write("INSERT INTO t (v) VALUES (?)", (1,))
                await db.after_commit(note)
            raise RuntimeError("a failure later in the section")
    assert seen == ["after commit"]
    assert await values(db) == [1]


async def test_a_task_started_in_a_section_waits_for_its_own_commits(db: Database) -> None:
    lock = MasterLock()
    async with lock:
        task = asyncio.create_task(write(db, 1))
    await task
    assert await values(db) == [1]


async def test_work_handed_over_without_writes_waits_for_the_section_s_commits(
    db: Database, busy_thread: threading.Event
) -> None:
    lock = MasterLock()
    seen: list[list[int]] = []

    async def look() -> None:
        seen.append(await values(db))

    async def section() -> None:
        async with lock:
            await write(db, 1)
            async with db.atomic():  # writes nothing; its work must still follow write 1
                await db.after_commit(look)
            await db.after_commit(look)  # outside a unit: the same
            assert seen == []

    task = asyncio.create_task(section())
    await asyncio.sleep(0.05)
    busy_thread.set()
    await task
    assert seen == [[1], [1]]
