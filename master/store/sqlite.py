"""SQLite, the embedded default: the writer on the event loop's thread, reads outside a
transaction on aiosqlite's."""

from __future__ import annotations

import logging
import pathlib
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import aiosqlite

from pydet.master.store.connection import Row, Statement

log = logging.getLogger(__name__)


class SQLite:
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
    async def connect(cls, path: pathlib.Path) -> SQLite:
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

    @staticmethod
    def is_disk_full(e: BaseException) -> bool:
        """SQLITE_FULL: a write found no space (the database's file or its WAL)."""
        code = getattr(e, "sqlite_errorcode", None)
        return isinstance(e, sqlite3.Error) and code is not None and code & 0xFF == 13

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
