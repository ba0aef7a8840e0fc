"""Log retention: Determined's ``retention_policy.log_retention_days``.

An ended experiment's trial logs are deleted once it has been over for that many days: the
experiment's own ``retention_policy`` wins, else the master config's
(``retention_policy: {log_retention_days: N}``); ``-1`` or none keeps them forever, ``0``
deletes them at the next pass. A trial given days of its own later (`det experiment|trial
set log-retention`, its row's ``log_retention_days``) keeps its logs that many days after it
ended, whatever its experiment says and whether or not the experiment has ended. A pass runs
when the master starts and every hour (`det task cleanup-logs` runs one now). Metrics,
checkpoints and the experiment itself are kept.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from determined.common import errors
from pydet.master.store.db import Database

log = logging.getLogger(__name__)

DAY = 24 * 3600.0
PASS_EVERY = 3600.0
MAX_DAYS = 32767  # Determined's bound (a smallint)


def retention_days(config_json: str, default: int | None) -> int | None:
    """Days an ended experiment's logs are kept; None: forever."""
    try:
        policy = json.loads(config_json).get("retention_policy") or {}
    except (ValueError, AttributeError):
        policy = {}
    days = policy.get("log_retention_days") if isinstance(policy, dict) else None
    if days is None:
        days = default
    return None if days is None or days < 0 else int(days)


async def _delete_trial_logs(db: Database, where: str, params: tuple[object, ...]) -> int:
    found = await db.fetch_one(f"SELECT COUNT(*) AS n FROM task_logs WHERE {where}", params)
    lines = int(found["n"]) if found is not None else 0
    if lines:
        await db.delete_in_chunks("task_logs", where, params)
    return lines


async def delete_expired_logs(db: Database, *, now: float, default_days: int | None) -> int:
    """Deletes the trial logs past their retention; how many lines."""
    deleted = 0
    own = await db.fetch_all(
        "SELECT t.id, t.log_retention_days AS days, COALESCE(t.end_time, e.end_time) AS ended"
        " FROM trials t JOIN experiments e ON e.id = t.experiment_id"
        " WHERE t.log_retention_days IS NOT NULL AND t.log_retention_days >= 0"
        " AND COALESCE(t.end_time, e.end_time) IS NOT NULL"
    )
    for row in own:
        if row["ended"] + row["days"] * DAY > now:
            continue
        lines = await _delete_trial_logs(db, "trial_id = ?", (row["id"],))
        if lines:
            log.info(
                "deleted %d log lines of trial %d (kept %d days)", lines, row["id"], row["days"]
            )
            deleted += lines
    ended = await db.fetch_all(
        "SELECT id, config, end_time FROM experiments WHERE end_time IS NOT NULL"
    )
    for row in ended:
        days = retention_days(row["config"], default_days)
        if days is None or row["end_time"] + days * DAY > now:
            continue
        where = (
            "trial_id IN (SELECT id FROM trials WHERE experiment_id = ?"
            " AND log_retention_days IS NULL)"
        )
        lines = await _delete_trial_logs(db, where, (row["id"],))
        if lines:
            log.info("deleted %d log lines of experiment %d (kept %d days)", lines, row["id"], days)
            deleted += lines
    return deleted


async def run(db: Database, default_days: int | None) -> None:
    """A pass now and every hour, until cancelled; a failed pass is logged, not fatal."""
    while True:
        try:
            await delete_expired_logs(db, now=time.time(), default_days=default_days)
        except Exception:
            log.exception("deleting expired logs failed")
        await asyncio.sleep(PASS_EVERY)


async def set_experiment_days(db: Database, experiment_id: int, days: int) -> None:
    """Keep the logs of the experiment's trials ``days`` after each ends (-1: forever): on
    its trials' rows, and in its stored config's ``retention_policy`` for those to come."""
    check_days(days)
    row = await db.fetch_one("SELECT config FROM experiments WHERE id = ?", (experiment_id,))
    if row is None:
        raise errors.NotFound(f"experiment {experiment_id} not found")
    config = json.loads(row["config"])
    config["retention_policy"] = {"log_retention_days": days}
    async with db.atomic():
        await db.execute(
            "UPDATE experiments SET config = ? WHERE id = ?", (json.dumps(config), experiment_id)
        )
        await db.execute(
            "UPDATE trials SET log_retention_days = ? WHERE experiment_id = ?",
            (days, experiment_id),
        )


async def set_trial_days(db: Database, trial_id: int, days: int) -> None:
    check_days(days)
    if await db.fetch_one("SELECT id FROM trials WHERE id = ?", (trial_id,)) is None:
        raise errors.NotFound(f"trial {trial_id} not found")
    await db.execute("UPDATE trials SET log_retention_days = ? WHERE id = ?", (days, trial_id))


def check_days(days: int) -> None:
    if not -1 <= days <= MAX_DAYS:
        raise errors.InvalidArgument(
            f"num_days: expected -1 (forever) to {MAX_DAYS} days, got {days}"
        )
