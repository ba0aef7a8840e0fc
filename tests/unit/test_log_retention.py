"""retention_policy.log_retention_days: an ended experiment's logs go once it is over for
that many days (its own setting, else the master's); the rest stays."""

from __future__ import annotations

import json
import pathlib

import pytest

from pydet.master.logs.retention import DAY, delete_expired_logs, retention_days
from pydet.master.store.db import Database
from tests.unit import rows

NOW = 1_800_000_000.0


async def _experiment_with_logs(
    db: Database, exp_id: int, *, ended_days_ago: float | None, policy: dict | None
) -> None:
    await rows.experiment(db, exp_id)
    config = {"searcher": {"name": "single", "metric": "loss"}}
    if policy is not None:
        config["retention_policy"] = policy
    end = None if ended_days_ago is None else NOW - ended_days_ago * DAY
    await db.execute(
        "UPDATE experiments SET config = ?, end_time = ? WHERE id = ?",
        (json.dumps(config), end, exp_id),
    )
    await rows.trial(db, exp_id, exp_id)
    for n in range(3):
        await db.execute(
            "INSERT INTO task_logs (trial_id, task_id, allocation_id, timestamp, message)"
            " VALUES (?, ?, 'a', ?, ?)",
            (exp_id, f"{exp_id}.1", float(n), f"line {n}"),
        )


async def _lines(db: Database, exp_id: int) -> int:
    row = await db.fetch_one("SELECT COUNT(*) AS n FROM task_logs WHERE trial_id = ?", (exp_id,))
    assert row is not None
    return int(row["n"])


@pytest.mark.asyncio
async def test_logs_go_once_their_experiment_is_over_for_its_retention(
    tmp_path: pathlib.Path,
) -> None:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    try:
        await _experiment_with_logs(db, 1, ended_days_ago=10, policy={"log_retention_days": 7})
        await _experiment_with_logs(db, 2, ended_days_ago=3, policy={"log_retention_days": 7})
        await _experiment_with_logs(db, 3, ended_days_ago=400, policy={"log_retention_days": -1})
        await _experiment_with_logs(db, 4, ended_days_ago=None, policy={"log_retention_days": 0})
        await _experiment_with_logs(db, 5, ended_days_ago=40, policy=None)  # master's default
        await _experiment_with_logs(db, 6, ended_days_ago=0.5, policy={"log_retention_days": 0})
        deleted = await delete_expired_logs(db, now=NOW, default_days=30)
        assert deleted == 9
        kept = {exp: await _lines(db, exp) for exp in range(1, 7)}
        assert kept == {1: 0, 2: 3, 3: 3, 4: 3, 5: 0, 6: 0}
        # Without a master default, an experiment with no policy keeps its logs.
        await _experiment_with_logs(db, 7, ended_days_ago=4000, policy=None)
        assert await delete_expired_logs(db, now=NOW, default_days=None) == 0
        assert await _lines(db, 7) == 3
        # The experiment and its trial stay.
        assert await db.fetch_one("SELECT id FROM trials WHERE id = 1") is not None
    finally:
        await db.close()


def test_the_experiments_setting_wins_over_the_masters() -> None:
    assert retention_days(json.dumps({"retention_policy": {"log_retention_days": 2}}), 9) == 2
    assert retention_days(json.dumps({}), 9) == 9
    assert retention_days(json.dumps({"retention_policy": {"log_retention_days": -1}}), 9) is None
    assert retention_days(json.dumps({}), None) is None
