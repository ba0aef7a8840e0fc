"""Log retention: Determined's ``retention_policy.log_retention_days``.

An ended experiment's trial logs are deleted once it has been over for that many days: the
experiment's own ``retention_policy`` wins, else the master config's
(``retention_policy: {log_retention_days: N}``); ``-1`` or none keeps them forever, ``0``
deletes them at the next pass. A pass runs when the master starts and every hour. Metrics,
checkpoints and the experiment itself are kept.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from pydet.master.store.db import Database

log = logging.getLogger(__name__)

DAY = 24 * 3600.0
PASS_EVERY = 3600.0


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


async def delete_expired_logs(db: Database, *, now: float, default_days: int | None) -> int:
    """Deletes the trial logs of every experiment ended past its retention; how many lines."""
    deleted = 0
    ended = await db.fetch_all(
        "SELECT id, config, end_time FROM experiments WHERE end_time IS NOT NULL"
    )
    for row in ended:
        days = retention_days(row["config"], default_days)
        if days is None or row["end_time"] + days * DAY > now:
            continue
        where = "trial_id IN (SELECT id FROM trials WHERE experiment_id = ?)"
        found = await db.fetch_one(
            f"SELECT COUNT(*) AS n FROM task_logs WHERE {where}", (row["id"],)
        )
        lines = int(found["n"]) if found is not None else 0
        if lines:
            await db.delete_in_chunks("task_logs", where, (row["id"],))
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
