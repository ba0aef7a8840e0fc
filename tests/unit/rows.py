"""Rows written straight into a real SQLite store, for tests of what reads them."""

from __future__ import annotations

import json
from typing import Any

from pydet.master.store.db import Database


async def experiment(
    db: Database,
    experiment_id: int,
    *,
    name: str = "",
    state: str = "ACTIVE",
    archived: bool = False,
    smaller_is_better: bool = True,
    metric: str = "loss",
    username: str = "alice",
) -> None:
    config = {
        "searcher": {"name": "single", "metric": metric, "smaller_is_better": smaller_is_better}
    }
    await db.execute(
        "INSERT INTO experiments (id, name, state, archived, config, original_config, username,"
        " start_time, job_id) VALUES (?, ?, ?, ?, ?, '', ?, ?, ?)",
        (
            experiment_id,
            name,
            state,
            int(archived),
            json.dumps(config),
            username,
            float(experiment_id),
            f"job-{experiment_id}",
        ),
    )


async def trial(
    db: Database, trial_id: int, experiment_id: int, *, best: float | None = None
) -> None:
    await db.execute(
        "INSERT INTO trials (id, experiment_id, request_id, state, hparams, seed, start_time,"
        " best_validation) VALUES (?, ?, ?, 'ACTIVE', '{}', 0, 0, ?)",
        (trial_id, experiment_id, f"r{trial_id}", best),
    )


async def metric(
    db: Database, trial_id: int, group: str, step: int, *, run: int = 1, **values: Any
) -> None:
    await db.execute(
        "INSERT INTO metrics (trial_id, run_id, grp, steps_completed, metrics, timestamp)"
        " VALUES (?, ?, ?, ?, ?, 0)",
        (trial_id, run, group, step, json.dumps(values)),
    )
