"""The master's store: SQLite through aiosqlite, in WAL mode, with versioned migrations.

One connection serves the whole master; aiosqlite runs it on its own thread, so statements
never block the event loop. Writes take a lock so that one coroutine's transaction never
interleaves with another's statements (one writer). Each public write commits before
returning: whatever the master acknowledged to a caller is durable.
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite

from master.migrations import MIGRATIONS

log = logging.getLogger(__name__)

Row = aiosqlite.Row


class Database:
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._conn: aiosqlite.Connection | None = None
        self._write = asyncio.Lock()

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
        for version, script in enumerate(MIGRATIONS[current:], start=current + 1):
            log.info("migrating the database to version %d", version)
            await self.conn.executescript(
                f"BEGIN;\n{script}\nINSERT INTO schema_version (version) VALUES ({version});\n"
                "COMMIT;"
            )

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the last inserted row id."""
        async with self._write:
            cursor = await self.conn.execute(sql, params)
            rowid = cursor.lastrowid or 0
            await cursor.close()
            return rowid

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        async with self._write:
            await self.conn.execute("BEGIN")
            try:
                await self.conn.executemany(sql, rows)
            except BaseException:
                await self.conn.execute("ROLLBACK")
                raise
            await self.conn.execute("COMMIT")

    async def transaction(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[int]:
        """Run statements atomically; returns each one's last inserted row id."""
        ids: list[int] = []
        async with self._write:
            await self.conn.execute("BEGIN")
            try:
                for sql, params in statements:
                    cursor = await self.conn.execute(sql, params)
                    ids.append(cursor.lastrowid or 0)
                    await cursor.close()
            except BaseException:
                await self.conn.execute("ROLLBACK")
                raise
            await self.conn.execute("COMMIT")
        return ids

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        async with self.conn.execute(sql, params) as cursor:
            row: Row | None = await cursor.fetchone()
            return row

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        async with self.conn.execute(sql, params) as cursor:
            return list(await cursor.fetchall())
