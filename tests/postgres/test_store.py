"""The store itself on both dialects: migrations, units of work, new rows' ids, upserts."""

from __future__ import annotations

import asyncio
import json
import pathlib
import sqlite3

import asyncpg
import pytest

from pydet.master.config import DbConfig
from pydet.master.store import dialect
from pydet.master.store.db import Database
from pydet.master.store.migrations import MIGRATIONS
from tests.postgres.conftest import fresh_database
from tests.unit.test_migrations import reports_are_folded


async def values(db: Database) -> list[int]:
    return [int(r["v"]) for r in await db.fetch_all("SELECT v FROM t ORDER BY v")]


async def test_migrations_reach_the_latest_version_once(new_store: Database) -> None:
    for _ in range(2):
        await new_store.open()
        try:
            rows = await new_store.fetch_all("SELECT version FROM schema_version ORDER BY version")
            assert [r["version"] for r in rows] == list(range(1, len(MIGRATIONS) + 1))
        finally:
            await new_store.close()


async def test_new_rows_ids_and_rows_by_name(store: Database) -> None:
    first = await store.execute(
        "INSERT INTO webhooks (name, url, webhook_type, mode) VALUES (?,?,?,?)",
        ("a", "http://x", "DEFAULT", "WORKSPACE"),
    )
    second = await store.execute(
        "INSERT INTO webhooks (name, url, webhook_type, mode) VALUES (?,?,?,?)",
        ("b", "http://x", "DEFAULT", "WORKSPACE"),
    )
    assert first > 0 and second == first + 1
    row = await store.fetch_one("SELECT id, name FROM webhooks WHERE id = ?", (second,))
    assert row is not None and row["name"] == "b" and row[0] == second
    assert list(row.keys()) == ["id", "name"] and dict(row) == {"id": second, "name": "b"}


async def test_a_context_follows_its_experiment_in_one_transaction(store: Database) -> None:
    ids = await store.transaction(
        [
            (
                "INSERT INTO experiments (state, config, original_config, start_time, job_id)"
                " VALUES (?,?,?,?,?)",
                ("ACTIVE", "{}", "", 1.5, "j"),
            ),
            ("INSERT INTO contexts (experiment_id, data) VALUES (last_insert_rowid(), ?)", (b"z",)),
        ]
    )
    row = await store.fetch_one("SELECT experiment_id, data FROM contexts")
    assert row is not None and row["experiment_id"] == ids[0] and bytes(row["data"]) == b"z"


async def test_replace_overwrites_the_row_with_its_key(store: Database) -> None:
    sql = "INSERT OR REPLACE INTO templates (name, config, username) VALUES (?,?,?)"
    await store.execute(sql, ("t", "{}", "alice"))
    await store.execute(sql, ("t", '{"a": 1}', "bob"))
    rows = await store.fetch_all("SELECT name, config, username FROM templates")
    assert [tuple(r) for r in rows] == [("t", '{"a": 1}', "bob")]


async def test_large_integers_and_exact_floats_survive(store: Database) -> None:
    await store.execute(
        "INSERT INTO checkpoints (uuid, steps_completed, metadata, resources, size, state,"
        " report_time, storage) VALUES (?,?,?,?,?,?,?,?)",
        ("u", 3, "{}", "{}", 5 * 2**40, "COMPLETED", 1700000000.123456, "{}"),
    )
    row = await store.fetch_one("SELECT size, report_time FROM checkpoints")
    assert row is not None and row["size"] == 5 * 2**40
    assert row["report_time"] == 1700000000.123456


@pytest.fixture
async def db(store: Database) -> Database:
    await store.execute("CREATE TABLE t (v INTEGER)")
    return store


async def test_a_unit_commits_every_write_inside_once(db: Database) -> None:
    async with db.atomic():
        await db.execute("INSERT INTO t (v) VALUES (?)", (1,))
        await db.execute_many("INSERT INTO t (v) VALUES (?)", [(2,), (3,)])
        await db.transaction([("INSERT INTO t (v) VALUES (?)", (4,))])
        assert db.in_unit and db.in_transaction
    assert not db.in_transaction
    assert await values(db) == [1, 2, 3, 4]


async def test_an_error_rolls_the_unit_back_and_the_store_goes_on(db: Database) -> None:
    await db.execute("INSERT INTO t (v) VALUES (?)", (0,))
    with pytest.raises(RuntimeError):
        async with db.atomic():
            await db.execute("INSERT INTO t (v) VALUES (?)", (1,))
            raise RuntimeError("half way")
    # A failing statement (a table that is not there) rolls back too.
    with pytest.raises((sqlite3.OperationalError, asyncpg.PostgresError)):
        async with db.atomic():
            await db.execute("INSERT INTO t (v) VALUES (?)", (2,))
            await db.execute("INSERT INTO nowhere (v) VALUES (?)", (3,))
    assert not db.in_transaction
    await db.execute("INSERT INTO t (v) VALUES (?)", (4,))
    assert await values(db) == [0, 4]


async def test_concurrent_writers_and_readers_share_the_connection(db: Database) -> None:
    async def writer(n: int) -> None:
        for i in range(10):
            async with db.atomic():
                await db.execute("INSERT INTO t (v) VALUES (?)", (n,))
                await asyncio.sleep(0)
                await db.execute("INSERT INTO t (v) VALUES (?)", (i,))

    async def reader() -> None:
        for _ in range(20):
            await db.fetch_all("SELECT v FROM t")
            await asyncio.sleep(0)

    await asyncio.gather(*(writer(n) for n in range(4)), reader(), reader())
    row = await db.fetch_one("SELECT COUNT(*) AS n FROM t")
    assert row is not None and row["n"] == 4 * 10 * 2


async def test_the_python_migration_folds_an_older_stores_reports_on_postgres(
    postgres: tuple[DbConfig, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    """tests/unit/test_migrations.py's first case, on a PostgreSQL store at version 5."""
    cfg = await fresh_database(postgres)
    assert cfg.password_file is not None
    conn = await asyncpg.connect(
        host=cfg.host,
        port=cfg.port,
        user=cfg.user,
        database=cfg.name,
        password=cfg.password_file.read_text().strip(),
    )
    try:
        await conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for n, migration in enumerate(MIGRATIONS[:5], start=1):
            assert isinstance(migration, str)
            await conn.execute(dialect.postgres_ddl(migration))
            await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", n)
        await conn.execute(
            "INSERT INTO experiments (id, state, config, original_config, start_time, job_id)"
            " VALUES (1, 'ACTIVE', '{}', '', 0, 'j');"
            "INSERT INTO trials (id, experiment_id, request_id, state, hparams, seed, start_time)"
            " VALUES (1, 1, 'r', 'ACTIVE', '{}', 0, 0)"
        )
        await conn.executemany(
            "INSERT INTO metrics (trial_id, run_id, grp, steps_completed, metrics, timestamp)"
            " VALUES (1, $1, $2, $3, $4, 0)",
            [
                (1, "training", 10, json.dumps({"loss": 0.5})),
                (1, "training", 10, json.dumps({"loss": 0.5})),
                (1, "validation", 10, json.dumps({"loss": 0.4})),
                (1, "validation", 10, json.dumps({"acc": 0.9, "loss": 0.3})),
                (2, "training", 10, json.dumps({"loss": 0.6})),
            ],
        )
    finally:
        await conn.close()

    await reports_are_folded(Database(tmp_path / "unused.db", cfg), asyncpg.UniqueViolationError)
