"""Checkpoints, each with the searcher metric of the validation taken at its step."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from determined.common import errors
from pydet.master.queries.experiments import ensure_experiment, ensure_trial
from pydet.master.search.searcher import searcher_value
from pydet.master.store.db import Database, Row


@dataclass(frozen=True)
class CheckpointRow:
    uuid: str
    trial_id: int
    experiment_id: int
    allocation_id: str
    task_id: str
    steps_completed: int
    metadata: str
    resources: dict[str, int]
    size: int
    state: str
    report_time: float
    # The storage section it was written to, as JSON text (secrets included).
    storage: str
    # The searcher metric of its trial's latest validation at the same step, if any.
    searcher_metric: float | None
    # That validation's metrics (JSON text as reported; "" when there was none).
    validation_metrics: str = ""


async def checkpoint(db: Database, uuid: str) -> CheckpointRow:
    found = await _checkpoints(db, "c.uuid = ?", (uuid,))
    if not found:
        raise errors.NotFound(f"checkpoint {uuid} not found")
    return found[0]


async def trial_checkpoints(db: Database, trial_id: int) -> list[CheckpointRow]:
    """A trial's checkpoints, oldest first."""
    await ensure_trial(db, trial_id)
    return await _checkpoints(db, "c.trial_id = ?", (trial_id,))


async def experiment_checkpoints(db: Database, experiment_id: int) -> list[CheckpointRow]:
    """An experiment's checkpoints, oldest first."""
    await ensure_experiment(db, experiment_id)
    return await _checkpoints(db, "c.experiment_id = ?", (experiment_id,))


async def _checkpoints(db: Database, where: str, params: Sequence[object]) -> list[CheckpointRow]:
    """The checkpoints matching ``where`` (on ``checkpoints c``), oldest first.

    The metric is read in Python, not with SQLite's JSON functions: reports may hold NaN or
    Infinity, which those functions refuse as malformed JSON.
    """
    rows = await db.fetch_all(
        f"SELECT c.* FROM checkpoints c WHERE {where} ORDER BY c.report_time", params
    )
    if not rows:
        return []
    validations = await db.fetch_all(
        "SELECT c.uuid, m.metrics FROM checkpoints c JOIN metrics m"
        " ON m.trial_id = c.trial_id AND m.grp = 'validation'"
        f" AND m.steps_completed = c.steps_completed WHERE {where} ORDER BY m.id",
        params,
    )
    latest = {v["uuid"]: v["metrics"] for v in validations}  # the last report wins
    names = await _searcher_metric_names(db, {r["experiment_id"] for r in rows})
    out = []
    for r in rows:
        metrics = latest.get(r["uuid"])
        name = names.get(r["experiment_id"])
        metric = None if metrics is None else searcher_value(json.loads(metrics), name)
        out.append(_row(r, metric, metrics or ""))
    return out


def _row(r: Row, metric: float | None, validation: str) -> CheckpointRow:
    return CheckpointRow(
        uuid=r["uuid"],
        trial_id=r["trial_id"] or 0,
        experiment_id=r["experiment_id"] or 0,
        allocation_id=r["allocation_id"],
        task_id=r["task_id"],
        steps_completed=r["steps_completed"],
        metadata=r["metadata"],
        resources={k: int(v) for k, v in json.loads(r["resources"]).items()},
        size=r["size"],
        state=r["state"],
        report_time=r["report_time"],
        storage=r["storage"],
        searcher_metric=metric,
        validation_metrics=validation,
    )


async def _searcher_metric_names(db: Database, experiment_ids: set[int]) -> dict[int, str]:
    ids = sorted(i for i in experiment_ids if i is not None)
    if not ids:
        return {}
    rows = await db.fetch_all(
        f"SELECT id, config FROM experiments WHERE id IN ({','.join('?' * len(ids))})", ids
    )
    return {r["id"]: json.loads(r["config"]).get("searcher", {}).get("metric") for r in rows}


async def checkpoints_by_uuid(db: Database, uuids: Sequence[str]) -> dict[str, CheckpointRow]:
    """Those of the checkpoints that exist, by uuid."""
    wanted = sorted(set(uuids))
    found: dict[str, CheckpointRow] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        found.update((c.uuid, c) for c in await _checkpoints(db, f"c.uuid IN ({marks})", chunk))
    return found
