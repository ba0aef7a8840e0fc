"""A store whose disk is full: writes fail with ResourceExhausted naming the path, the log
says so once each way, and log lines wait (in order, bounded) until there is space.

SQLite's ``max_page_count`` makes the database file as full as a full disk would: its
writes fail with SQLITE_FULL, the error a full disk gives.
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
from collections.abc import AsyncIterator

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from determined.common import errors
from determined.core import _session
from pydet.master.logs import log_store
from pydet.master.logs.log_store import LogLine, LogStore
from pydet.master.store.db import Database


@pytest.fixture
async def db(tmp_path: pathlib.Path) -> AsyncIterator[Database]:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    try:
        yield db
    finally:
        await db.close()


def cap(db: Database, extra_pages: int) -> None:
    """Let the database file grow by ``extra_pages`` pages at most (0: not at all)."""
    writer = db.backend.writer  # type: ignore[union-attr]
    (pages,) = writer.execute("PRAGMA page_count").fetchone()
    writer.execute(f"PRAGMA max_page_count = {pages + extra_pages}")


def uncap(db: Database) -> None:
    db.backend.writer.execute("PRAGMA max_page_count = 1073741823")  # type: ignore[union-attr]


async def test_a_full_disk_is_resource_exhausted_said_once_each_way(
    db: Database, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    await db.execute("CREATE TABLE t (v TEXT)")
    cap(db, 0)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            with pytest.raises(errors.ResourceExhausted) as e:
                async with db.atomic():
                    await db.execute_many("INSERT INTO t (v) VALUES (?)", [("x" * 5000,)] * 20)
            assert e.value.message == f"the master's disk is full at {tmp_path}"
        uncap(db)
        await db.execute("INSERT INTO t (v) VALUES ('fits')")
    said = [r.getMessage() for r in caplog.records]
    assert sum("disk is full" in m for m in said) == 1
    assert sum("has space again" in m for m in said) == 1
    rows = await db.fetch_all("SELECT v FROM t")
    assert [r["v"] for r in rows] == ["fits"]  # the refused transactions left nothing


def line(n: int) -> LogLine:
    return LogLine(1, "task", "alloc", "agent", "c", "stdout", float(n), f"line {n} " + "." * 500)


async def test_log_lines_wait_for_space_and_are_written_in_order(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_store, "RETRY_SECONDS", 0.05)
    logs = LogStore(db)
    await logs.append([line(0)])
    cap(db, 0)
    for n in range(1, 40):
        await logs.append([line(n)])  # never raises: the agent sending them goes on
    uncap(db)
    async with asyncio.timeout(10):
        while True:
            rows = await db.fetch_all("SELECT message FROM task_logs ORDER BY id")
            if len(rows) == 40:
                break
            await asyncio.sleep(0.05)
    assert [r["message"].split()[1] for r in rows] == [str(n) for n in range(40)]


async def test_lines_beyond_the_bound_are_dropped_oldest_first_and_counted(
    db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(log_store, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(log_store, "MAX_WAITING", 10)
    logs = LogStore(db)
    cap(db, 0)
    await logs.append([line(n) for n in range(25)])
    uncap(db)
    with caplog.at_level(logging.WARNING):
        async with asyncio.timeout(10):
            while not await db.fetch_all("SELECT id FROM task_logs"):
                await asyncio.sleep(0.05)
    rows = await db.fetch_all("SELECT message FROM task_logs ORDER BY id")
    assert [r["message"].split()[1] for r in rows] == [str(n) for n in range(15, 25)]
    assert "15 log lines were dropped while the disk was full" in caplog.text


def test_the_core_api_retries_a_full_disk_long_after_it_gives_up_on_an_unreachable_master(
    caplog: pytest.LogCaptureFixture,
) -> None:
    full = GRPCError(Status.RESOURCE_EXHAUSTED, "the master's disk is full at /data")
    retry = _session._Retry("reporting metrics", "http://m:8080", retry_for=0.0)
    with caplog.at_level(logging.WARNING):
        delays = [retry.delay_after(full) for _ in range(10)]
    assert delays[:3] == [0.2, 0.4, 0.8] and max(delays) == 5.0
    assert caplog.text.count("the master's disk is full at /data; retrying") == 1
    with pytest.raises(errors.Unavailable):  # a master that is gone: 0 s allowed here
        _session._Retry("reporting metrics", "http://m:8080", retry_for=0.0).delay_after(
            GRPCError(Status.UNAVAILABLE, "down")
        )
