"""SQLite's dialect rewritten for PostgreSQL (master/store/dialect.py), without a server."""

from __future__ import annotations

import pytest

from pydet.master.store import dialect
from pydet.master.store.migrations import MIGRATIONS


def test_placeholders_are_numbered_outside_quoted_text() -> None:
    sql, _ = dialect.postgres("SELECT ?, '?', \"a?\" FROM t WHERE a = ? AND b = ?")
    assert sql == "SELECT $1, '?', \"a?\" FROM t WHERE a = $2 AND b = $3"


def test_an_insert_into_a_table_with_ids_returns_the_new_id_when_asked() -> None:
    sql = "INSERT INTO trials (seed) VALUES (?)"
    assert dialect.postgres(sql, new_id=True) == (
        "INSERT INTO trials (seed) VALUES ($1) RETURNING id",
        True,
    )
    assert dialect.postgres(sql) == ("INSERT INTO trials (seed) VALUES ($1)", False)
    assert dialect.postgres("INSERT INTO cluster (key, value) VALUES (?, ?)", new_id=True)[1] is (
        False
    )


def test_replace_and_ignore_become_upserts_on_the_tables_key() -> None:
    sql, _ = dialect.postgres(
        "INSERT OR REPLACE INTO templates (name, config, username) VALUES (?,?,?)"
    )
    assert sql == (
        "INSERT INTO templates (name, config, username) VALUES ($1,$2,$3) ON CONFLICT (name)"
        " DO UPDATE SET config = EXCLUDED.config, username = EXCLUDED.username"
    )
    sql, _ = dialect.postgres("INSERT OR IGNORE INTO cluster (key, value) VALUES (?, ?)")
    assert sql == "INSERT INTO cluster (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING"
    with pytest.raises(ValueError, match="cannot rewrite"):
        dialect.postgres("INSERT OR REPLACE INTO nowhere VALUES (?)")


def test_sqlite_functions_become_postgresqls() -> None:
    sql, _ = dialect.postgres(
        "SELECT GROUP_CONCAT(DISTINCT phase), MAX(id), MIN(MAX(a, ?), b), instr(name, ?),"
        " last_insert_rowid(), CAST(? AS REAL) FROM t WHERE NOT archived LIMIT ?"
    )
    assert sql == (
        "SELECT STRING_AGG(DISTINCT phase, ','), MAX(id), LEAST(GREATEST(a, $1), b),"
        " strpos(name, $2), lastval(), CAST($3 AS DOUBLE PRECISION) FROM t"
        " WHERE archived = 0 LIMIT NULLIF($4, -1)"
    )


def test_migrations_column_types_keep_sqlites_ranges() -> None:
    ddl = dialect.postgres_ddl(
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER NOT NULL,"
        " x REAL, data BLOB)"
    )
    assert ddl == (
        "CREATE TABLE t (id BIGSERIAL PRIMARY KEY, n BIGINT NOT NULL,"
        " x DOUBLE PRECISION, data BYTEA)"
    )
    # Every table with an AUTOINCREMENT id is known to return its new rows' ids.
    scripts = " ".join(m for m in MIGRATIONS if isinstance(m, str))
    for table in dialect._SERIAL:
        assert f"CREATE TABLE {table} (\n        id INTEGER PRIMARY KEY AUTOINCREMENT" in scripts
    assert scripts.count("AUTOINCREMENT") == len(dialect._SERIAL)
