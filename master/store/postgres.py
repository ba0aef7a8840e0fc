"""PostgreSQL (``db: {type: postgres}``) through one asyncpg connection, statements rewritten
from SQLite's dialect, reconnecting after a lost connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from determined.common import errors
from pydet.master.store import dialect
from pydet.master.store.connection import DbConfig, Row, Statement

log = logging.getLogger(__name__)


class Postgres:
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
    async def connect(cls, cfg: DbConfig) -> Postgres:
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

    @staticmethod
    def is_disk_full(e: BaseException) -> bool:
        """SQLSTATE 53100 (disk_full) from the server."""
        return getattr(e, "sqlstate", None) == "53100"

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
