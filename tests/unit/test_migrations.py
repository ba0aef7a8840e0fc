"""Migrations applied to a store an older master wrote."""

from __future__ import annotations

import json
import pathlib
import sqlite3

import pytest

from pydet.master.store import db as db_module
from pydet.master.store.db import Database
from pydet.master.store.migrations import MIGRATIONS


def older_store(path: pathlib.Path, version: int) -> sqlite3.Connection:
    """A store as a master that knew only the first ``version`` migrations left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for n, migration in enumerate(MIGRATIONS[:version], start=1):
        assert isinstance(migration, str)
        conn.executescript(migration)
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (n,))
    return conn


async def test_reports_stored_twice_become_one_and_stay_one(tmp_path: pathlib.Path) -> None:
    conn = older_store(tmp_path / "pydet.db", 5)
    conn.execute(
        "INSERT INTO experiments (id, state, config, original_config, start_time, job_id)"
        " VALUES (1, 'ACTIVE', '{}', '', 0, 'j')"
    )
    conn.execute(
        "INSERT INTO trials (id, experiment_id, request_id, state, hparams, seed, start_time)"
        " VALUES (1, 1, 'r', 'ACTIVE', '{}', 0, 0)"
    )
    reports = [
        # (run, group, steps, metrics): a retried report, two reports of one step, and the
        # same step in a later run (kept: it is that run's report).
        (1, "training", 10, {"loss": 0.5}),
        (1, "training", 10, {"loss": 0.5}),
        (1, "validation", 10, {"loss": 0.4}),
        (1, "validation", 10, {"acc": 0.9, "loss": 0.3}),
        (2, "training", 10, {"loss": 0.6}),
    ]
    for run, group, steps, metrics in reports:
        conn.execute(
            "INSERT INTO metrics (trial_id, run_id, grp, steps_completed, metrics, timestamp)"
            " VALUES (1, ?, ?, ?, ?, 0)",
            (run, group, steps, json.dumps(metrics)),
        )
    conn.close()

    await reports_are_folded(Database(tmp_path / "pydet.db"), sqlite3.IntegrityError)


async def reports_are_folded(db: Database, duplicate: type[Exception]) -> None:
    """Opened (migrated), the store above holds one report per step, and keeps it so:
    another is refused with ``duplicate``."""
    await db.open()
    try:
        rows = await db.fetch_all("SELECT run_id, grp, metrics FROM metrics ORDER BY id")
        assert [(r["run_id"], r["grp"], json.loads(r["metrics"])) for r in rows] == [
            (1, "training", {"loss": 0.5}),
            (1, "validation", {"loss": 0.4, "acc": 0.9}),
            (2, "training", {"loss": 0.6}),
        ]
        version = await db.fetch_one("SELECT MAX(version) AS v FROM schema_version")
        assert version is not None and version["v"] == len(MIGRATIONS)
        with pytest.raises(duplicate):
            await db.execute(
                "INSERT INTO metrics (trial_id, run_id, grp, steps_completed, metrics, timestamp)"
                " VALUES (1, 1, 'training', 10, '{}', 0)"
            )
    finally:
        await db.close()


# The migrations today's release (before workspaces) knew.
BEFORE_WORKSPACES = 20


async def test_every_experiment_of_an_existing_store_lands_in_uncategorized(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pydet.db"
    # The store as today's release writes it: its migrations only, applied by its Database.
    with monkeypatch.context() as m:
        m.setattr(db_module, "MIGRATIONS", MIGRATIONS[:BEFORE_WORKSPACES])
        old = Database(path)
        await old.open()
        for exp_id, owner in ((1, "alice"), (2, "bob"), (3, "alice")):
            await old.execute(
                "INSERT INTO experiments (id, state, config, original_config, username,"
                " start_time, job_id) VALUES (?, 'COMPLETED', '{}', '', ?, ?, ?)",
                (exp_id, owner, float(exp_id), f"job-{exp_id}"),
            )
        await old.close()

    db = Database(path)
    await db.open()
    try:
        version = await db.fetch_one("SELECT MAX(version) AS v FROM schema_version")
        assert version is not None and version["v"] == len(MIGRATIONS)
        workspaces = await db.fetch_all("SELECT id, name, immutable FROM workspaces")
        assert [tuple(r) for r in workspaces] == [(1, "Uncategorized", 1)]
        projects = await db.fetch_all("SELECT id, workspace_id, name, immutable FROM projects")
        assert [tuple(r) for r in projects] == [(1, 1, "Uncategorized", 1)]
        placed = await db.fetch_all("SELECT id, project_id FROM experiments ORDER BY id")
        assert [tuple(r) for r in placed] == [(1, 1), (2, 1), (3, 1)]
        # A new experiment that names no project goes there too; a new workspace is the next id.
        await db.execute(
            "INSERT INTO experiments (state, config, original_config, start_time, job_id)"
            " VALUES ('ACTIVE', '{}', '', 4, 'job-4')"
        )
        row = await db.fetch_one("SELECT project_id FROM experiments WHERE job_id = 'job-4'")
        assert row is not None and row["project_id"] == 1
        new_id = await db.execute("INSERT INTO workspaces (name, created_at) VALUES ('team', 0)")
        assert new_id == 2
        with pytest.raises(sqlite3.IntegrityError):
            await db.execute("INSERT INTO workspaces (name, created_at) VALUES ('team', 0)")
    finally:
        await db.close()
