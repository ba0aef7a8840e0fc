"""SQLite's dialect, as the store's statements are written, rewritten for PostgreSQL.

The store's SQL is written once, in the subset the two share, with what differs spelled the
SQLite way; this module rewrites that for PostgreSQL:

- ``?`` placeholders become ``$1``, ``$2``, ... (outside quoted strings);
- ``INSERT OR REPLACE`` becomes ``INSERT ... ON CONFLICT (its key) DO UPDATE`` and
  ``INSERT OR IGNORE`` ``INSERT ... ON CONFLICT DO NOTHING``;
- an ``INSERT`` into a table with an id column returns the new row's id (SQLite's
  ``lastrowid``), and ``last_insert_rowid()`` becomes ``lastval()``;
- ``GROUP_CONCAT(x)`` becomes ``STRING_AGG(x, ',')`` and ``instr(a, b)`` ``strpos(a, b)``;
- SQLite's two-argument ``MAX(a, b)`` and ``MIN(a, b)`` become ``GREATEST`` and ``LEAST``,
  and ``CAST(x AS REAL)`` a cast to ``DOUBLE PRECISION`` (PostgreSQL's REAL has 32 bits);
- ``NOT archived`` (SQLite's booleans are integers) becomes ``archived = 0``;
- ``LIMIT ?`` takes SQLite's -1 for no limit (``LIMIT NULLIF(?, -1)``);
- in the migrations, ``INTEGER PRIMARY KEY AUTOINCREMENT`` becomes ``BIGSERIAL PRIMARY KEY``,
  ``INTEGER`` ``BIGINT`` (SQLite's integers have 64 bits), ``REAL`` ``DOUBLE PRECISION`` and
  ``BLOB`` ``BYTEA``.

The few statements this cannot rewrite (JSON built by the database) are written in each
dialect where they are used (``Database.dialect``).
"""

from __future__ import annotations

import functools
import re

# Tables whose rows have an id the database assigns, and the key an upsert replaces by.
_SERIAL = frozenset(
    {
        "experiments",
        "trials",
        "task_logs",
        "metrics",
        "users",
        "webhooks",
        "webhook_triggers",
        "workspaces",
        "projects",
        "models",
        "model_versions",
        "cluster_messages",
        "user_groups",
        "role_assignments",
        "access_tokens",
    }
)
_KEYS = {
    "cluster": "key",
    "contexts": "experiment_id",
    "allocations": "id",
    "checkpoints": "uuid",
    "sessions": "token_digest",
    "templates": "name",
    "imported_trials": "experiment_id, source_trial_id",
}
for _table in _SERIAL:
    _KEYS[_table] = "id"

_INSERT = re.compile(r"^\s*INSERT\s+(?:OR\s+(REPLACE|IGNORE)\s+)?INTO\s+(\w+)", re.IGNORECASE)
_COLUMNS = re.compile(r"^\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+\w+\s*\(([^)]*)\)", re.IGNORECASE)
_GROUP_CONCAT = re.compile(r"\bGROUP_CONCAT\(([^()]*)\)", re.IGNORECASE)


def _scalar_extremes(sql: str) -> str:
    """MAX(a, b) -> GREATEST(a, b), MIN(a, b) -> LEAST(a, b); aggregates (one argument) stay.

    On the values the store passes them (never NULL where it matters: the statements test
    for NULL first), both mean the same."""
    out: list[str] = []
    pos = 0
    for found in re.finditer(r"\b(MAX|MIN)\(", sql, flags=re.IGNORECASE):
        start = found.end()
        if start <= pos:
            continue
        depth, comma, end = 1, False, start
        while end < len(sql) and depth:
            ch = sql[end]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 1:
                comma = True
            end += 1
        if comma:
            name = "GREATEST" if found.group(1).upper() == "MAX" else "LEAST"
            out.append(sql[pos : found.start()] + name + "(")
            pos = start
    out.append(sql[pos:])
    return "".join(out)


def _placeholders(sql: str) -> str:
    out: list[str] = []
    n = 0
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "?":
            n += 1
            out.append(f"${n}")
            continue
        out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def postgres(sql: str, *, new_id: bool = False) -> tuple[str, bool]:
    """``sql`` for PostgreSQL, and whether it returns the new row's id (asked with
    ``new_id``: an INSERT into a table with an id column)."""
    query = _GROUP_CONCAT.sub(r"STRING_AGG(\1, ',')", _scalar_extremes(sql))
    query = re.sub(r"\bAS\s+REAL\)", "AS DOUBLE PRECISION)", query, flags=re.IGNORECASE)
    query = re.sub(r"\blast_insert_rowid\(\)", "lastval()", query, flags=re.IGNORECASE)
    query = re.sub(r"\bNOT\s+archived\b", "archived = 0", query, flags=re.IGNORECASE)
    query = re.sub(r"\binstr\(", "strpos(", query, flags=re.IGNORECASE)
    query = re.sub(r"\bLIMIT\s+\?", "LIMIT NULLIF(?, -1)", query, flags=re.IGNORECASE)
    returns_id = False
    insert = _INSERT.match(query)
    if insert is not None:
        verb, table = insert.group(1), insert.group(2).lower()
        if verb is not None:
            query = re.sub(r"\bOR\s+(REPLACE|IGNORE)\s+", "", query, count=1, flags=re.I)
            query = query.rstrip().rstrip(";")
            if verb.upper() == "IGNORE":
                query += " ON CONFLICT DO NOTHING"
            else:
                columns = _COLUMNS.match(query)
                if columns is None or table not in _KEYS:
                    raise ValueError(f"cannot rewrite for PostgreSQL: {sql}")
                key = _KEYS[table]
                keys = {k.strip() for k in key.split(",")}
                names = [c.strip() for c in columns.group(1).split(",")]
                sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in keys)
                query += f" ON CONFLICT ({key}) DO " + (f"UPDATE SET {sets}" if sets else "NOTHING")
        if new_id and table in _SERIAL and "RETURNING" not in query.upper():
            query = query.rstrip().rstrip(";") + " RETURNING id"
            returns_id = True
    return _placeholders(query), returns_id


def postgres_ddl(script: str) -> str:
    """A migration's script for PostgreSQL."""
    script = re.sub(
        r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", "BIGSERIAL PRIMARY KEY", script, flags=re.I
    )
    script = re.sub(r"\bINTEGER\b", "BIGINT", script)
    script = re.sub(r"\bREAL\b", "DOUBLE PRECISION", script)
    return re.sub(r"\bBLOB\b", "BYTEA", script)
