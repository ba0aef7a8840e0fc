from __future__ import annotations

import asyncio
import pathlib

from pydet.master.store.db import Database


async def test_concurrent_writers_never_interleave_transactions(tmp_path: pathlib.Path) -> None:
    db = Database(tmp_path / "x.db")
    await db.open()
    try:
        await db.execute("CREATE TABLE t (v INTEGER)")

        async def writer(n: int) -> None:
            for i in range(20):
                await db.execute_many("INSERT INTO t (v) VALUES (?)", [(n,), (i,)])
                await db.execute("INSERT INTO t (v) VALUES (?)", (n,))
                await db.transaction([("INSERT INTO t (v) VALUES (?)", (n,))])

        await asyncio.gather(*(writer(n) for n in range(8)))
        row = await db.fetch_one("SELECT COUNT(*) AS n FROM t")
        assert row is not None and row["n"] == 8 * 20 * 4
    finally:
        await db.close()


async def test_migrations_are_applied_once(tmp_path: pathlib.Path) -> None:
    for _ in range(2):
        db = Database(tmp_path / "x.db")
        await db.open()
        rows = await db.fetch_all("SELECT version FROM schema_version ORDER BY version")
        assert [r["version"] for r in rows] == list(range(1, len(rows) + 1))
        await db.close()
