"""The master's store: SQLite through aiosqlite, in WAL mode (the embedded default), or
PostgreSQL through asyncpg (``db: {type: postgres}``), with one set of versioned migrations.

Statements are written once, in SQLite's dialect; on PostgreSQL the dialect layer
(master/dialect.py) rewrites what differs (placeholders, upserts, new rows' ids, a few
functions, the migrations' column types). Rows are read by column name on both.

One connection serves the whole master; aiosqlite runs it on its own thread, so statements
never block the event loop (asyncpg's connection is asynchronous itself, and runs one
statement at a time). Writes take a lock so that one coroutine's transaction never
interleaves with another's statements (one writer). Each public write commits before
returning: whatever the master acknowledged to a caller is durable.

A unit of work (``async with db.atomic():``) makes every write the coroutine does inside it
— through ``execute``, ``execute_many`` or ``transaction``, however deep in the call stack —
one transaction, committed once at the end or rolled back on an error. It holds the writer
lock from BEGIN until it sends COMMIT, so code inside a unit must never wait for another
coroutine that writes; in particular a unit never waits for the master's lock (take that lock
first, then open the unit). Work that must follow the commit (removing files the transaction
marked deleted) is handed to ``after_commit``.

Inside a unit, ``write`` and ``execute_many`` (the statements whose caller needs no result)
wait in the unit and go to the database together with the next statement that needs an
answer (``execute``'s row id, a read by the unit's own task) or with the COMMIT; BEGIN waits
with them. On SQLite each such batch is one hand-off to aiosqlite's thread: a transition's
writes cost one round trip, not one or two per statement. An error in a waiting write is
raised where the batch runs, still inside the unit, which rolls back as for any error.

On SQLite a unit whose writes all waited (none needed an answer) hands BEGIN, its writes
and COMMIT to the thread in one go and lets the writer lock go at once. The thread runs
what it is sent in order, so every later statement, reads included, sees the unit's writes,
and units commit in the order they ended. The unit still returns only once its COMMIT is
done; inside a section of the master's lock (``MasterLock``) it leaves that wait to the end
of the section, after the lock is let go. So the next section runs while this one's
transactions commit, and the section's caller still hears nothing before they are durable.
A transaction that fails to commit rolls back on the thread, alone, and its error is raised
where its section ends.
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
from pydet.master import dialect
from pydet.master.config import DbConfig
from pydet.master.migrations import MIGRATIONS

log = logging.getLogger(__name__)

# aiosqlite's rows, or asyncpg's Records on PostgreSQL: both are read by column name (and by
# position), iterate over their values and give their names from keys().
Row = aiosqlite.Row

# Test-only: the master exits (as if killed) right after this many commits, so that tests can
# stop it at every commit point of a search (tests/integration/test_crash_consistency.py).
# Read here and nowhere else; unset in real use.
EXIT_AFTER_COMMITS_ENV = "PYDET_TEST_EXIT_AFTER_COMMITS"

AfterCommit = Callable[[], Awaitable[None]]


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


@dataclass(eq=False)
class _Section:
    """A section of the master's lock: the commits its units left to wait for."""

    task: asyncio.Task[Any] | None
    commits: list[tuple[asyncio.Future[int], list[AfterCommit]]] = field(default_factory=list)

    async def settle(self, *, failed: bool) -> None:
        """Wait for the commits in order, running each one's after-commit work; the first
        failure is raised (logged, when the section failed anyway)."""
        error: Exception | None = None
        for commit, after in self.commits:
            try:
                await asyncio.shield(commit)
            except Exception as e:
                error = error or e
                continue
            for work in after:
                await _run_after_commit(work)
        if error is None:
            return
        if failed:
            log.error("a transaction of a failed section did not commit: %s", error)
            return
        raise error


# The section of the master's lock the running coroutine is inside, if any.
_section: contextvars.ContextVar[_Section | None] = contextvars.ContextVar(
    "pydet_db_section", default=None
)


def _own_section() -> _Section | None:
    """The section the running task holds (a task started inside one does not hold it)."""
    section = _section.get()
    return section if section is not None and section.task is asyncio.current_task() else None


def _committed_already() -> asyncio.Future[int]:
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    done.set_result(0)
    return done


async def _run_after_commit(work: AfterCommit) -> None:
    # What it follows has committed: a failure here is logged, not reported as the
    # transaction's.
    try:
        await work()
    except Exception:
        log.exception("work after a commit failed")


class _SQLite:
    """aiosqlite's connection, as today's store has always used it."""

    dialect = "sqlite"

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    @classmethod
    async def connect(cls, path: pathlib.Path) -> _SQLite:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = await aiosqlite.connect(path, isolation_level=None)
        conn.row_factory = aiosqlite.Row
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=5000")
        return cls(conn)

    async def close(self) -> None:
        await self.conn.close()

    @property
    def in_transaction(self) -> bool:
        return self.conn.in_transaction

    async def begin(self) -> None:
        await self.conn.execute("BEGIN IMMEDIATE")

    async def commit(self) -> None:
        await self.conn.execute("COMMIT")

    async def rollback(self) -> None:
        await self.conn.execute("ROLLBACK")

    async def script(self, sql: str) -> None:
        await self.conn.executescript(sql)

    # Each call below is one hand-off to aiosqlite's thread, which runs a whole function
    # there (its cursor API takes one per step: execute, fetch, close). ``_execute`` is
    # aiosqlite's own way to run a function on its thread; it has no public name for it.

    async def _on_thread(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        conn = self.conn
        # aiosqlite leaves _execute untyped.
        return await conn._execute(lambda: fn(conn._conn))  # type: ignore[no-untyped-call]

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(await self._on_thread(lambda c: _run_one(c, sql, params)))

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self.conn.executemany(sql, rows)

    async def batch(self, statements: Sequence[Statement], *, begin: bool, commit: bool) -> int:
        """BEGIN (with ``begin``), ``statements`` in order and COMMIT (with ``commit``) in one
        hand-off; returns the last statement's row id."""

        return int(await self._on_thread(_batch(statements, begin=begin, commit=commit)))

    # Units of work commit in the order they submit their writes, without waiting: a unit
    # that has only writes to send hands them over (BEGIN, the writes, COMMIT) and lets the
    # next unit run while the thread commits it. Everything sent later, reads included, runs
    # after it on the thread, so it sees the unit's writes. (asyncpg's connection takes one
    # operation at a time: on PostgreSQL a unit waits for its COMMIT.)

    def submit(self, statements: Sequence[Statement]) -> asyncio.Future[int]:
        """BEGIN, ``statements`` and COMMIT, queued on the thread now; a future of the last
        statement's row id. What aiosqlite's ``_execute`` does before it waits (aiosqlite is
        pinned to 0.22 for these internals)."""
        conn = self.conn
        if not conn._running or not conn._connection:
            raise ValueError("Connection closed")
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        run = _batch(statements, begin=True, commit=True)
        conn._tx.put_nowait((future, lambda: run(conn._conn)))
        return future

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        def run(c: sqlite3.Connection) -> Row | None:
            cursor = c.execute(sql, params)
            try:
                row: Row | None = cursor.fetchone()
                return row
            finally:
                cursor.close()

        row: Row | None = await self._on_thread(run)
        return row

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        def run(c: sqlite3.Connection) -> list[Row]:
            cursor = c.execute(sql, params)
            try:
                return list(cursor.fetchall())
            finally:
                cursor.close()

        rows: list[Row] = await self._on_thread(run)
        return rows


def _batch(
    statements: Sequence[Statement], *, begin: bool, commit: bool
) -> Callable[[sqlite3.Connection], int]:
    """What a batch runs on aiosqlite's thread. One that was to commit and failed rolls back
    there, so that the batches queued behind it find no transaction left open."""

    def run(c: sqlite3.Connection) -> int:
        try:
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
        except BaseException:
            if commit and c.in_transaction:
                c.execute("ROLLBACK")
            raise

    return run


def _run_one(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> int:
    """One statement on aiosqlite's thread; its row id (lastrowid, 0 for none)."""
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
    def conn(self) -> aiosqlite.Connection:
        """SQLite's connection (tests look at it)."""
        backend = self.backend
        if not isinstance(backend, _SQLite):
            raise RuntimeError("the store is on PostgreSQL")
        return backend.conn

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
        """One transaction for every write inside; a unit inside a unit joins it. It returns
        once the transaction has committed, or, inside a section of the master's lock,
        once it is queued to commit (the section waits for it)."""
        if self._unit() is not None:
            yield
            return
        unit = _Unit(self, asyncio.current_task())
        submitted: asyncio.Future[int] | None = None
        async with self._write:
            token = _current.set(unit)
            try:
                yield
            except BaseException:
                _current.reset(token)
                if unit.begun:
                    await self._rollback()
                raise
            _current.reset(token)
            pending, unit.pending = unit.pending, []
            backend = self.backend
            if pending and not unit.begun and isinstance(backend, _SQLite):
                submitted = backend.submit(pending)
                submitted.add_done_callback(self._counted)
            else:
                if pending or unit.begun:
                    try:
                        await self.backend.batch(pending, begin=not unit.begun, commit=True)
                    except BaseException:
                        await self._rollback()
                        raise
                self._committed()
        if submitted is not None:
            section = _own_section()
            if section is not None:
                # The section waits for the commit once it has let the master's lock go.
                section.commits.append((submitted, unit.after_commit))
                return
            await asyncio.shield(submitted)
        for work in unit.after_commit:
            await self.after_commit(work)

    def _counted(self, commit: asyncio.Future[int]) -> None:
        if not commit.cancelled() and commit.exception() is None:
            self._committed()

    async def _rollback(self) -> None:
        if self.backend.in_transaction:
            await self.backend.rollback()

    async def after_commit(self, work: AfterCommit) -> None:
        """Run ``work`` once the current unit has committed (outside a unit: at once, or
        behind the commits a section of the master's lock still waits for); it is dropped
        if the unit rolls back."""
        unit = self._unit()
        if unit is not None:
            unit.after_commit.append(work)
            return
        section = _own_section()
        if section is not None and section.commits:
            section.commits.append((_committed_already(), [work]))
            return
        await _run_after_commit(work)

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


class MasterLock:
    """The master's one lock over its state.

    Units of work inside a section of the lock (``async with lock:``) leave their commits
    queued on the database's thread; the section waits for them, in order, once it has let
    the lock go, and runs their after-commit work then. So the next section runs while the
    last one commits, and whoever holds a section still learns nothing before its writes are
    durable: a failed commit is raised where the section ends. On PostgreSQL each unit
    commits in turn, inside the section.
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        # The holder's section and its context token (one holder at a time).
        self._held: tuple[_Section, contextvars.Token[_Section | None]] | None = None

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        section = _Section(asyncio.current_task())
        self._held = (section, _section.set(section))

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        assert self._held is not None
        (section, token), self._held = self._held, None
        _section.reset(token)
        self._lock.release()
        # What the section wrote before it failed was sent all the same.
        await section.settle(failed=kind is not None)
