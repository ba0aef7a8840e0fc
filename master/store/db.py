"""The master's store: SQLite through aiosqlite, in WAL mode (the embedded default), or
PostgreSQL through asyncpg (``db: {type: postgres}``), with one set of versioned migrations.

Statements are written once, in SQLite's dialect; on PostgreSQL the dialect layer
(master/store/dialect.py) rewrites what differs (placeholders, upserts, new rows' ids, a few
functions, the migrations' column types). Rows are read by column name on both.

On SQLite the master writes on the event loop's own thread, through a plain sqlite3
connection: a statement there takes microseconds, and a thread hand-off per statement cost
far more (see ``_SQLite``). Reads outside a transaction go to a second connection that
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
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import pathlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiosqlite

from determined.common import errors
from pydet.master.store import dialect
from pydet.master.store.migrations import MIGRATIONS

log = logging.getLogger(__name__)

# sqlite3's rows, or asyncpg's Records on PostgreSQL: both are read by column name (and by
# position), iterate over their values and give their names from keys().
Row = sqlite3.Row

# Test-only: the master exits (as if killed) right after this many commits, so that tests can
# stop it at every commit point of a search (tests/integration/test_crash_consistency.py).
# Read here and nowhere else; unset in real use.
EXIT_AFTER_COMMITS_ENV = "PYDET_TEST_EXIT_AFTER_COMMITS"

AfterCommit = Callable[[], Awaitable[None]]

# Rows deleted per transaction by Database.delete_in_chunks: a few milliseconds of the loop.
DELETE_CHUNK = 5000


@dataclass(frozen=True)
class DbConfig:
    """The store: sqlite (embedded, <data_dir>/pydet.db) or a PostgreSQL server."""

    type: str = "sqlite"
    host: str = "127.0.0.1"
    port: int = 5432
    name: str = "pydet"
    user: str = "pydet"
    # The password, in a file (never in the config itself); none: the server's other means.
    password_file: pathlib.Path | None = None


def _exit_after_commits() -> int:
    raw = os.environ.get(EXIT_AFTER_COMMITS_ENV, "")
    return int(raw) if raw.strip() else 0


# One statement of a batch: SQL, its parameters (a sequence of rows for executemany) and
# whether it is an executemany.
Statement = tuple[str, Any, bool]


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


class _SQLite:
    """SQLite in WAL mode through two connections to one file.

    The writer runs on the event loop's own thread: every write, and every read while its
    transaction is open (a unit reading what it wrote), is a direct call. A statement of
    the master's takes microseconds, and a hand-off to a thread cost far more: the
    thread's queue, its wake-up, and the two threads passing the GIL back and forth for each
    statement (in bench/scale.py's hollow run the master spent nearly half its CPU on it).
    Commits are therefore done when ``batch`` returns. (``synchronous=NORMAL``: a commit
    writes the WAL without waiting for the disk; SQLite syncs at its checkpoints.)

    Every other read goes to aiosqlite's reader connection on its thread, so that a long
    one (a trial's whole metric history) never holds up the loop. WAL lets it read beside
    the writer, and it sees every transaction committed before it started: all the writes
    the caller made before asking.
    """

    dialect = "sqlite"

    def __init__(self, writer: sqlite3.Connection, reader: aiosqlite.Connection) -> None:
        self.writer = writer
        self.reader = reader

    @classmethod
    async def connect(cls, path: pathlib.Path) -> _SQLite:
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = sqlite3.connect(path, isolation_level=None)
        try:
            writer.row_factory = Row
            writer.execute("PRAGMA journal_mode=WAL")
            writer.execute("PRAGMA synchronous=NORMAL")
            writer.execute("PRAGMA foreign_keys=ON")
            writer.execute("PRAGMA busy_timeout=5000")
            reader = await aiosqlite.connect(path, isolation_level=None)
        except BaseException:
            writer.close()
            raise
        reader.row_factory = Row
        await reader.execute("PRAGMA query_only=ON")
        await reader.execute("PRAGMA busy_timeout=5000")
        return cls(writer, reader)

    async def close(self) -> None:
        try:
            await self.reader.close()
        finally:
            self.writer.close()

    @property
    def in_transaction(self) -> bool:
        return self.writer.in_transaction

    async def begin(self) -> None:
        self.writer.execute("BEGIN IMMEDIATE")

    async def commit(self) -> None:
        self.writer.execute("COMMIT")

    async def rollback(self) -> None:
        self.writer.execute("ROLLBACK")

    async def script(self, sql: str) -> None:
        self.writer.executescript(sql)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return _run_one(self.writer, sql, params)

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.writer.executemany(sql, rows)

    async def batch(self, statements: Sequence[Statement], *, begin: bool, commit: bool) -> int:
        """BEGIN (with ``begin``), ``statements`` in order and COMMIT (with ``commit``);
        returns the last statement's row id. A failure leaves the transaction open: the
        unit that sent the batch rolls it back."""
        c = self.writer
        if begin:
            c.execute("BEGIN IMMEDIATE")
        rowid = 0
        for sql, params, many in statements:
            if many:
                c.executemany(sql, params)
            else:
                rowid = _run_one(c, sql, params)
        if commit:
            c.execute("COMMIT")
        return rowid

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        if self.writer.in_transaction:
            return _fetch_one(self.writer, sql, params)
        row: Row | None = await self._on_reader(lambda c: _fetch_one(c, sql, params))
        return row

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        if self.writer.in_transaction:
            return _fetch_all(self.writer, sql, params)
        rows: list[Row] = await self._on_reader(lambda c: _fetch_all(c, sql, params))
        return rows

    async def _on_reader(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """``fn`` on the reader's thread, in one hand-off (aiosqlite's cursor API takes one
        per step: execute, fetch, close). ``_execute`` is aiosqlite's own way to run a
        function there; it has no public name for it (aiosqlite is pinned for that)."""
        reader = self.reader
        return await reader._execute(lambda: fn(reader._conn))  # type: ignore[no-untyped-call]


def _fetch_one(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> Row | None:
    cursor = conn.execute(sql, params)
    try:
        row: Row | None = cursor.fetchone()
        return row
    finally:
        cursor.close()


def _fetch_all(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Row]:
    cursor = conn.execute(sql, params)
    try:
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _run_one(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> int:
    """One statement; its row id (lastrowid, 0 for none)."""
    cursor = conn.execute(sql, params)
    try:
        return cursor.lastrowid or 0
    finally:
        cursor.close()


class _Postgres:
    """One asyncpg connection; statements are rewritten from SQLite's dialect.

    A lost connection (PostgreSQL restarted, the network cut) fails the statement in flight
    with ``errors.Unavailable`` naming the database, and the next statement connects again:
    the master keeps serving once the database is back. A transaction the loss cut short
    stays failed until its unit rolls back, so that none of its later statements runs on
    the new connection outside it.
    """

    dialect = "postgres"

    def __init__(self, cfg: DbConfig) -> None:
        self.cfg = cfg
        self.conn: Any = None
        # Between BEGIN and its COMMIT or ROLLBACK; and whether the connection was lost then.
        self._transaction = False
        self._lost_transaction = False
        # asyncpg refuses a second operation while one is in flight on the connection:
        # they queue here, as aiosqlite's queue to its thread.
        self._op = asyncio.Lock()

    @property
    def where(self) -> str:
        return f"the PostgreSQL database {self.cfg.name} at {self.cfg.host}:{self.cfg.port}"

    @classmethod
    async def connect(cls, cfg: DbConfig) -> _Postgres:
        self = cls(cfg)
        await self._reconnect(timeout=30)
        return self

    async def _reconnect(self, timeout: float) -> None:
        import asyncpg  # only a master on PostgreSQL needs it

        cfg = self.cfg
        password = None
        if cfg.password_file is not None:
            password = cfg.password_file.read_text().strip()
        try:
            self.conn = await asyncpg.connect(
                host=cfg.host,
                port=cfg.port,
                database=cfg.name,
                user=cfg.user,
                password=password,
                timeout=timeout,
            )
        except (OSError, TimeoutError, asyncpg.PostgresError) as e:
            raise errors.Unavailable(
                f"cannot connect to {self.where} ({_reason(e)}); check that it runs and the"
                " master's db: settings"
            ) from None

    def _lost(self, e: BaseException) -> bool:
        import asyncpg

        return (
            isinstance(e, (OSError, asyncpg.PostgresConnectionError))
            or isinstance(e, asyncpg.exceptions.OperatorInterventionError)
            or (self.conn is not None and self.conn.is_closed())
        )

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """The connection for one operation (connecting again after a loss); a loss during
        the operation becomes ``errors.Unavailable``."""
        async with self._op:
            if self._lost_transaction:
                raise errors.Unavailable(
                    f"the connection to {self.where} was lost in a transaction"
                )
            if self.conn is None or self.conn.is_closed():
                if self._transaction:  # lost between two statements of a transaction
                    self._lost_transaction = True
                    raise errors.Unavailable(
                        f"the connection to {self.where} was lost in a transaction"
                    )
                if self.conn is not None:
                    log.warning("the connection to %s was lost; connecting again", self.where)
                self.conn = None
                await self._reconnect(timeout=5)
            try:
                yield self.conn
            except Exception as e:
                if not self._lost(e):
                    raise
                self.conn.terminate()
                self.conn = None
                self._lost_transaction = self._transaction
                raise errors.Unavailable(
                    f"lost the connection to {self.where} ({_reason(e)})"
                ) from None

    async def close(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            await conn.close()

    @property
    def in_transaction(self) -> bool:
        return self._transaction

    async def begin(self) -> None:
        await self.script("BEGIN")
        self._transaction = True

    async def commit(self) -> None:
        await self.script("COMMIT")
        self._transaction = False

    async def rollback(self) -> None:
        if not self._lost_transaction:
            # A connection lost now ends the transaction as surely as ROLLBACK does.
            with contextlib.suppress(errors.Unavailable):
                await self.script("ROLLBACK")
        # The server ended a transaction it lost the connection of.
        self._transaction = self._lost_transaction = False

    async def script(self, sql: str) -> None:
        async with self._connection() as conn:
            await conn.execute(sql)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        query, returns_id = dialect.postgres(sql, new_id=True)
        async with self._connection() as conn:
            if returns_id:
                return int(await conn.fetchval(query, *params) or 0)
            await conn.execute(query, *params)
            return 0

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        query, _ = dialect.postgres(sql)
        args = [tuple(row) for row in rows]
        if not args:
            return
        async with self._connection() as conn:
            await conn.executemany(query, args)

    async def batch(self, statements: Sequence[Statement], *, begin: bool, commit: bool) -> int:
        """As SQLite's: BEGIN, the statements and COMMIT, in order; the last one's row id."""
        if begin:
            await self.begin()
        rowid = 0
        for sql, params, many in statements:
            if many:
                await self.execute_many(sql, params)
            else:
                rowid = await self.execute(sql, params)
        if commit:
            await self.commit()
        return rowid

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        query, _ = dialect.postgres(sql)
        async with self._connection() as conn:
            row: Row | None = await conn.fetchrow(query, *params)
            return row

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        query, _ = dialect.postgres(sql)
        async with self._connection() as conn:
            return list(await conn.fetch(query, *params))


def _reason(e: BaseException) -> str:
    return str(e).strip() or type(e).__name__


# What migrations and units of work run their statements on.
Connection = _SQLite | _Postgres


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
            self._conn = await _SQLite.connect(self.path)
        else:
            self._conn = await _Postgres.connect(self.config)
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
        unit = self._unit()
        if unit is not None:
            return await self._send(unit, (sql, params, False))
        async with self._write:
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
