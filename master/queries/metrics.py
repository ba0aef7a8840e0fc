"""Trials' metric reports, and the best validation of an experiment."""

from __future__ import annotations

import json
from dataclasses import dataclass

from determined.common import errors
from pydet.master.queries.experiments import ensure_trial
from pydet.master.store.db import Database, Row


@dataclass(frozen=True)
class MetricRow:
    group: str
    steps_completed: int
    # JSON texts as the trial reported them (they may hold NaN and Infinity).
    metrics: str
    batch_metrics: str
    timestamp: float
    trial_id: int = 0
    # The run of the trial that reported it (1 for its first process).
    run_id: int = 0


def _where(trial_id: int, group: str, after_steps: int) -> tuple[str, list[object]]:
    where = "trial_id = ? AND steps_completed > ? AND NOT archived"
    params: list[object] = [trial_id, after_steps]
    if group:
        where += " AND grp = ?"
        params.append(group)
    return where, params


async def metrics(
    db: Database, trial_id: int, *, group: str = "", after_steps: int = -1, limit: int = 0
) -> list[MetricRow]:
    """A trial's reports (of one group, or all) after ``after_steps``, in step order."""
    await ensure_trial(db, trial_id)
    where, params = _where(trial_id, group, after_steps)
    rows = await db.fetch_all(
        f"SELECT * FROM metrics WHERE {where} ORDER BY steps_completed, id LIMIT ?",
        [*params, limit or -1],
    )
    return [_metric(r) for r in rows]


def _metric(r: Row) -> MetricRow:
    return MetricRow(
        group=r["grp"],
        steps_completed=r["steps_completed"],
        metrics=r["metrics"],
        batch_metrics=r["batch_metrics"],
        timestamp=r["timestamp"],
        trial_id=r["trial_id"],
        run_id=r["run_id"],
    )


async def checkpoint_metrics(
    db: Database, uuid: str, *, source_type: str = "", group: str = ""
) -> list[MetricRow]:
    """The reports of the trials that said they used checkpoint ``uuid`` (of that
    ``source_type``, any when empty; of ``group``, every group when empty), trial by trial
    in step order."""
    where = "s.checkpoint_uuid = ? AND m.archived = 0"
    params: list[object] = [uuid]
    if source_type:
        where += " AND s.source_type = ?"
        params.append(source_type)
    if group:
        where += " AND m.grp = ?"
        params.append(group)
    rows = await db.fetch_all(
        "SELECT DISTINCT m.* FROM metrics m JOIN trial_source_infos s ON s.trial_id = m.trial_id"
        f" WHERE {where} ORDER BY m.trial_id, m.steps_completed, m.id",
        params,
    )
    return [_metric(r) for r in rows]


async def trial_metrics_json(
    db: Database,
    trial_id: int,
    *,
    group: str = "",
    after_steps: int = -1,
    limit: int = 0,
    max_points: int = 0,
) -> str:
    """A trial's metric reports as the JSON list of MetricReport the HTTP API returns,
    built by the database in one statement: a trial can have 100,000 reports, which as API
    messages take seconds to encode and as one JSON text a fraction of one.

    With ``max_points``, each group (training, validation, ...) with more reports than that
    is thinned to about that many, evenly over its whole length by its position in the
    group (not by row id, which training and validation reports share), its last report
    always kept: what a chart needs for a first view of a long trial.
    """
    await ensure_trial(db, trial_id)
    where, params = _where(trial_id, group, after_steps)
    thinned = (
        "  SELECT * FROM ("
        "   SELECT m.*,"
        "    ROW_NUMBER() OVER (PARTITION BY trial_id, grp ORDER BY steps_completed, id) AS pos,"
        "    COUNT(*) OVER (PARTITION BY trial_id, grp) AS n"
        f"   FROM metrics m WHERE {where}"
        "  ) AS numbered"
        "  WHERE ? <= 0 OR n <= ? OR (pos - 1) % ((n + ? - 1) / ?) = 0 OR pos = n"
        "  ORDER BY steps_completed, id LIMIT ?"
    )
    if db.dialect == "postgres":
        sql = (
            "SELECT COALESCE(json_agg(json_build_object('group', grp,"
            " 'stepsCompleted', CAST(steps_completed AS TEXT), 'metrics', metrics,"
            " 'timestamp', timestamp, 'batchMetrics', batch_metrics,"
            " 'trialId', trial_id, 'trialRunId', run_id)"
            " ORDER BY steps_completed, id), '[]') AS reports"
            f" FROM ({thinned}) AS kept"
        )
    else:
        sql = (
            "SELECT json_group_array(json_object('group', grp,"
            " 'stepsCompleted', CAST(steps_completed AS TEXT), 'metrics', metrics,"
            " 'timestamp', timestamp, 'batchMetrics', batch_metrics,"
            " 'trialId', trial_id, 'trialRunId', run_id)) AS reports"
            f" FROM ({thinned})"
        )
    row = await db.fetch_one(
        sql, [*params, max_points, max_points, max_points, max_points, limit or -1]
    )
    return str(row["reports"]) if row is not None else "[]"


async def best_validation(db: Database, experiment_id: int) -> float | None:
    """The best searcher metric any trial of the experiment has reported."""
    row = await db.fetch_one("SELECT config FROM experiments WHERE id = ?", (experiment_id,))
    if row is None:
        raise errors.NotFound(f"experiment {experiment_id} not found")
    smaller = json.loads(row["config"])["searcher"].get("smaller_is_better", True)
    agg = "MIN" if smaller else "MAX"
    best = await db.fetch_one(
        f"SELECT {agg}(best_validation) AS v FROM trials WHERE experiment_id = ?",
        (experiment_id,),
    )
    return None if best is None or best["v"] is None else float(best["v"])
