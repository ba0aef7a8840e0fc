"""The master's store: SQLite through aiosqlite, in WAL mode, with versioned migrations.

One connection serves the whole master; aiosqlite runs it on its own thread, so statements
never block the event loop. Writes take a lock so that one coroutine's transaction never
interleaves with another's statements (one writer). Each public write commits before
returning: whatever the master acknowledged to a caller is durable.

A unit of work (``async with db.atomic():``) makes every write the coroutine does inside it
— through ``execute``, ``execute_many`` or ``transaction``, however deep in the call stack —
one transaction, committed once at the end or rolled back on an error. It holds the writer
lock from BEGIN to COMMIT, so code inside a unit must never wait for another coroutine that
writes; in particular a unit never waits for the master's lock (take that lock first, then
open the unit). Work that must follow the commit (removing files the transaction marked
deleted) is handed to ``after_commit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiosqlite

from pydet.master.migrations import MIGRATIONS

log = logging.getLogger(__name__)

Row = aiosqlite.Row

# Test-only: the master exits (as if killed) right after this many commits, so that tests can
# stop it at every commit point of a search (tests/integration/test_crash_consistency.py).
# Read here and nowhere else; unset in real use.
EXIT_AFTER_COMMITS_ENV = "PYDET_TEST_EXIT_AFTER_COMMITS"

AfterCommit = Callable[[], Awaitable[None]]


def _exit_after_commits() -> int:
    raw = os.environ.get(EXIT_AFTER_COMMITS_ENV, "")
    return int(raw) if raw.strip() else 0


@dataclass(eq=False)
class _Unit:
    db: Database
    task: asyncio.Task[Any] | None
    after_commit: list[AfterCommit] = field(default_factory=list)


# The unit of work the running coroutine is inside, if any.
_current: contextvars.ContextVar[_Unit | None] = contextvars.ContextVar(
    "pydet_db_unit", default=None
)


async def _run_after_commit(work: AfterCommit) -> None:
    # What it follows has committed: a failure here is logged, not reported as the
    # transaction's.
    try:
        await work()
    except Exception:
        log.exception("work after a commit failed")


class Database:
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._conn: aiosqlite.Connection | None = None
        self._write = asyncio.Lock()
        self._commits = 0
        self._exit_after = _exit_after_commits()

    @property
    def conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise RuntimeError("the database is not open")
        return self._conn

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = await aiosqlite.connect(self.path, isolation_level=None)
        self._conn.row_factory = aiosqlite.Row
        await self._conn.execute("PRAGMA journal_mode=WAL")
        await self._conn.execute("PRAGMA synchronous=NORMAL")
        await self._conn.execute("PRAGMA foreign_keys=ON")
        await self._conn.execute("PRAGMA busy_timeout=5000")
        await self._migrate()

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def _migrate(self) -> None:
        await self.conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
        )
        row = await self.fetch_one("SELECT MAX(version) AS v FROM schema_version")
        current = int(row["v"]) if row is not None and row["v"] is not None else 0
        if current > len(MIGRATIONS):
            raise RuntimeError(
                f"the database at {self.path} has schema version {current}, newer than this "
                f"master understands ({len(MIGRATIONS)}); upgrade pydet"
            )
        for version, migration in enumerate(MIGRATIONS[current:], start=current + 1):
            log.info("migrating the database to version %d", version)
            if isinstance(migration, str):
                await self.conn.executescript(
                    f"BEGIN;\n{migration}\nINSERT INTO schema_version (version) VALUES"
                    f" ({version});\nCOMMIT;"
                )
                continue
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                await migration(self.conn)
                await self.conn.execute(
                    "INSERT INTO schema_version (version) VALUES (?)", (version,)
                )
            except BaseException:
                await self._rollback()
                raise
            await self.conn.execute("COMMIT")

    # -- units of work ----------------------------------------------------------------------

    def _unit(self) -> _Unit | None:
        """The unit the running coroutine is inside (one a task inherited from the coroutine
        that started it is not its own: that task takes the lock like any other)."""
        unit = _current.get()
        if unit is None or unit.db is not self or unit.task is not asyncio.current_task():
            return None
        return unit

    @property
    def in_unit(self) -> bool:
        return self._unit() is not None

    @contextlib.asynccontextmanager
    async def atomic(self) -> AsyncIterator[None]:
        """One transaction for every write inside; a unit inside a unit joins it."""
        if self._unit() is not None:
            yield
            return
        unit = _Unit(self, asyncio.current_task())
        async with self._write:
            await self.conn.execute("BEGIN IMMEDIATE")
            token = _current.set(unit)
            try:
                yield
            except BaseException:
                _current.reset(token)
                await self._rollback()
                raise
            _current.reset(token)
            try:
                await self.conn.execute("COMMIT")
            except BaseException:
                await self._rollback()
                raise
            self._committed()
        for work in unit.after_commit:
            await _run_after_commit(work)

    async def _rollback(self) -> None:
        if self.conn.in_transaction:
            await self.conn.execute("ROLLBACK")

    async def after_commit(self, work: AfterCommit) -> None:
        """Run ``work`` once the current unit has committed (at once outside a unit); it is
        dropped if the unit rolls back."""
        unit = self._unit()
        if unit is None:
            await _run_after_commit(work)
        else:
            unit.after_commit.append(work)

    def _committed(self) -> None:
        self._commits += 1
        if self._exit_after:
            log.debug("test hook: commit %d of %d", self._commits, self._exit_after)
            if self._commits >= self._exit_after:
                os._exit(137)  # as SIGKILL would leave it: nothing after this commit

    # -- statements ---------------------------------------------------------------------------

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the last inserted row id."""
        if self._unit() is not None:
            return await self._run(sql, params)
        async with self._write:
            rowid = await self._run(sql, params)
            self._committed()
            return rowid

    async def _run(self, sql: str, params: Sequence[Any]) -> int:
        cursor = await self.conn.execute(sql, params)
        rowid = cursor.lastrowid or 0
        await cursor.close()
        return rowid

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        async with self.atomic():
            await self.conn.executemany(sql, rows)

    async def transaction(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[int]:
        """Run statements atomically; returns each one's last inserted row id."""
        async with self.atomic():
            return [await self._run(sql, params) for sql, params in statements]

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        async with self.conn.execute(sql, params) as cursor:
            row: Row | None = await cursor.fetchone()
            return row

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        async with self.conn.execute(sql, params) as cursor:
            return list(await cursor.fetchall())
