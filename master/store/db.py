"""The master's store: SQLite through aiosqlite, in WAL mode (the embedded default), or
PostgreSQL through asyncpg (``db: {type: postgres}``), with one set of versioned migrations.

Statements are written once, in SQLite's dialect; on PostgreSQL the dialect layer
(master/store/dialect.py) rewrites what differs (placeholders, upserts, new rows' ids, a few
functions, the migrations' column types). Rows are read by column name on both.

On SQLite the master writes on the event loop's own thread, through a plain sqlite3
connection: a statement there takes microseconds, and a thread hand-off per statement cost
far more (see ``sqlite.SQLite``). Reads outside a transaction go to a second connection that
aiosqlite runs on its thread, so that a long read never holds up the loop. asyncpg's
connection is asynchronous itself, and runs one statement at a time. Writes take a lock so
that one coroutine's transaction never interleaves with another's statements (one writer).
Each public write commits before returning: whatever the master acknowledged to a caller
is durable.

A unit of work (``async with db.atomic():``) makes every write the coroutine does inside it
— through ``execute``, ``execute_many`` or ``transaction``, however deep in the call stack —
one transaction, committed once at the end or rolled back on an error. It holds the writer
lock from BEGIN to COMMIT, so code inside a unit must never wait for another coroutine that
writes; in particular a unit never waits for the master's lock (take that lock first, then
open the unit). Work that must follow the commit (removing files the transaction marked
deleted) is handed to ``after_commit``.

Inside a unit, ``write`` and ``execute_many`` (the statements whose caller needs no result)
wait in the unit and go to the database together with the next statement that needs an
answer (``execute``'s row id, a read by the unit's own task) or with the COMMIT; BEGIN waits
with them. An error in a waiting write is raised where the batch runs, still inside the
unit, which rolls back as for any error.

A write that finds the disk full raises ``errors.ResourceExhausted`` ("the master's disk is
full at PATH"), which callers answer with RESOURCE_EXHAUSTED: the master itself goes on, says
so once in its log, and writes again as soon as a write succeeds (``DiskFull``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import pathlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from determined.common import errors
from pydet.master.store import dialect
from pydet.master.store.connection import DbConfig, Statement
from pydet.master.store.connection import Row as Row
from pydet.master.store.migrations import MIGRATIONS
from pydet.master.store.postgres import Postgres
from pydet.master.store.sqlite import SQLite

log = logging.getLogger(__name__)

# Test-only: the master exits (as if killed) right after this many commits, so that tests can
# stop it at every commit point of a search (tests/integration/test_crash_consistency.py).
# Read here and nowhere else; unset in real use.
EXIT_AFTER_COMMITS_ENV = "PYDET_TEST_EXIT_AFTER_COMMITS"

AfterCommit = Callable[[], Awaitable[None]]

# Rows deleted per transaction by Database.delete_in_chunks: a few milliseconds of the loop.
DELETE_CHUNK = 5000


def _exit_after_commits() -> int:
    raw = os.environ.get(EXIT_AFTER_COMMITS_ENV, "")
    return int(raw) if raw.strip() else 0


@dataclass(eq=False)
class _Unit:
    db: Database
    task: asyncio.Task[Any] | None
    after_commit: list[AfterCommit] = field(default_factory=list)
    # Writes not sent yet, and whether BEGIN has been.
    pending: list[Statement] = field(default_factory=list)
    begun: bool = False


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


# What migrations and units of work run their statements on.
Connection = SQLite | Postgres


class DiskFull:
    """Whether the store's last write found its disk full: entering and leaving that state
    are each said once in the master's log, however many writes fail in between."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.full = False
        self.since = 0.0  # when the disk was found full (epoch seconds)

    def error(self) -> errors.ResourceExhausted:
        if not self.full:
            self.full = True
            self.since = time.time()
            log.warning(
                "the master's disk is full at %s: writes are refused (RESOURCE_EXHAUSTED) and"
                " retried by their callers until there is space",
                self.where,
            )
        return errors.ResourceExhausted(f"the master's disk is full at {self.where}")

    def wrote(self) -> None:
        if self.full:
            self.full = False
            log.warning("the master's disk at %s has space again: writes resume", self.where)


class Database:
    """The store: ``Database(path)`` is SQLite at ``path``; with ``config`` of type postgres
    it is that PostgreSQL database (``path`` then only names it in messages)."""

    def __init__(self, path: pathlib.Path, config: DbConfig | None = None) -> None:
        self.path = path
        self.config = config if config is not None and config.type == "postgres" else None
        self._conn: Connection | None = None
        self._write = asyncio.Lock()
        self._commits = 0
        self._exit_after = _exit_after_commits()
        self.disk = DiskFull(str(path.parent) if self.config is None else self.where)

    @property
    def dialect(self) -> str:
        """sqlite or postgres: for the few statements written in each."""
        return "sqlite" if self.config is None else "postgres"

    @property
    def where(self) -> str:
        if self.config is None:
            return str(self.path)
        return f"postgresql://{self.config.user}@{self.config.host}:{self.config.port}/{self.config.name}"

    @property
    def backend(self) -> Connection:
        if self._conn is None:
            raise RuntimeError("the database is not open")
        return self._conn

    @property
    def in_transaction(self) -> bool:
        return self.backend.in_transaction

    async def open(self) -> None:
        if self.config is None:
            self._conn = await SQLite.connect(self.path)
        else:
            self._conn = await Postgres.connect(self.config)
        await self._migrate()

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def _migrate(self) -> None:
        conn = self.backend
        await conn.script("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = await self.fetch_one("SELECT MAX(version) AS v FROM schema_version")
        current = int(row["v"]) if row is not None and row["v"] is not None else 0
        if current > len(MIGRATIONS):
            raise RuntimeError(
                f"the database at {self.where} has schema version {current}, newer than this "
                f"master understands ({len(MIGRATIONS)}); upgrade pydet"
            )
        for version, migration in enumerate(MIGRATIONS[current:], start=current + 1):
            log.info("migrating the database to version %d", version)
            if isinstance(migration, str):
                ddl = migration if conn.dialect == "sqlite" else dialect.postgres_ddl(migration)
                await conn.script(
                    f"BEGIN;\n{ddl}\nINSERT INTO schema_version (version) VALUES"
                    f" ({version});\nCOMMIT;"
                )
                continue
            await conn.begin()
            try:
                await migration(conn)
                await conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
            except BaseException:
                await self._rollback()
                raise
            await conn.commit()

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
            token = _current.set(unit)
            try:
                yield
            except BaseException:
                _current.reset(token)
                await self._rollback()
                raise
            _current.reset(token)
            if unit.pending or unit.begun:
                pending, unit.pending = unit.pending, []
                try:
                    with self._space():
                        await self.backend.batch(pending, begin=not unit.begun, commit=True)
                except BaseException:
                    await self._rollback()
                    raise
            self._committed()
        for work in unit.after_commit:
            await _run_after_commit(work)

    async def _rollback(self) -> None:
        if self.backend.in_transaction:
            await self.backend.rollback()

    @contextlib.contextmanager
    def _space(self) -> Iterator[None]:
        """Around a backend call that writes: a full disk becomes ``ResourceExhausted``."""
        try:
            yield
        except Exception as e:
            if self.backend.is_disk_full(e):
                raise self.disk.error() from None
            raise

    async def after_commit(self, work: AfterCommit) -> None:
        """Run ``work`` once the current unit has committed (at once outside a unit); it is
        dropped if the unit rolls back."""
        unit = self._unit()
        if unit is None:
            await _run_after_commit(work)
        else:
            unit.after_commit.append(work)

    def _committed(self) -> None:
        self.disk.wrote()
        self._commits += 1
        if self._exit_after:
            log.debug("test hook: commit %d of %d", self._commits, self._exit_after)
            if self._commits >= self._exit_after:
                os._exit(137)  # as SIGKILL would leave it: nothing after this commit

    # -- statements ---------------------------------------------------------------------------

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the last inserted row id."""
        unit = self._unit()
        if unit is not None:
            return await self._send(unit, (sql, params, False))
        async with self._write:
            with self._space():
                rowid = await self.backend.execute(sql, params)
            self._committed()
            return rowid

    async def write(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement whose result the caller does not need: inside a unit it waits
        to go with the unit's next batch; outside one it runs and commits at once."""
        unit = self._unit()
        if unit is not None:
            unit.pending.append((sql, params, False))
            return
        await self.execute(sql, params)

    async def _send(self, unit: _Unit, last: Statement | None) -> int:
        """The unit's waiting writes (and BEGIN if not sent yet), then ``last``; its row id."""
        statements = unit.pending + ([last] if last is not None else [])
        unit.pending = []
        begin = not unit.begun
        unit.begun = True
        with self._space():
            return await self.backend.batch(statements, begin=begin, commit=False)

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        unit = self._unit()
        if unit is not None:
            unit.pending.append((sql, [tuple(r) for r in rows], True))
            return
        async with self.atomic():
            await self.execute_many(sql, rows)

    async def delete_in_chunks(self, table: str, where: str, params: Sequence[Any]) -> None:
        """``DELETE FROM table WHERE where``, DELETE_CHUNK rows per transaction (outside a
        unit): on SQLite the writer runs on the event loop, and one statement deleting
        millions of rows (an experiment's logs) would hold the loop for seconds."""
        assert self._unit() is None, "delete_in_chunks commits as it goes: not in a unit"
        while True:
            await self.execute(
                f"DELETE FROM {table} WHERE id IN"
                f" (SELECT id FROM {table} WHERE {where} LIMIT {DELETE_CHUNK})",
                params,
            )
            if (
                await self.fetch_one(f"SELECT id FROM {table} WHERE {where} LIMIT 1", params)
                is None
            ):
                return

    async def transaction(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[int]:
        """Run statements atomically; returns each one's last inserted row id."""
        async with self.atomic():
            return [await self.execute(sql, params) for sql, params in statements]

    async def _flushed(self) -> None:
        """Before a read by a unit's own task: its waiting writes, which it must see."""
        unit = self._unit()
        if unit is not None and unit.pending:
            await self._send(unit, None)

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        await self._flushed()
        return await self.backend.fetch_one(sql, params)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        await self._flushed()
        return await self.backend.fetch_all(sql, params)
