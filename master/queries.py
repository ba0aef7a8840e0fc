"""Reads for the API that SQLite answers better than Python: each is one statement."""

from __future__ import annotations

from master.db import Database


async def trial_metrics_json(
    db: Database,
    trial_id: int,
    *,
    group: str = "",
    after_steps: int = -1,
    limit: int = 0,
    max_points: int = 0,
) -> str:
    """A trial's metric reports as the JSON list of MetricReport the HTTP API returns.

    With ``max_points``, each group (training, validation, ...) with more reports than that
    is thinned to about that many, evenly over its whole length by its position in the
    group (not by row id, which training and validation reports share), its last report
    always kept: what a chart needs for a first view of a long trial.
    """
    where = "trial_id = ? AND steps_completed > ?"
    params: list[object] = [trial_id, after_steps]
    if group:
        where += " AND grp = ?"
        params.append(group)
    row = await db.fetch_one(
        "SELECT json_group_array(json_object('group', grp,"
        " 'steps_completed', CAST(steps_completed AS TEXT), 'metrics', metrics,"
        " 'timestamp', timestamp, 'batch_metrics', batch_metrics)) AS reports FROM ("
        "  SELECT * FROM ("
        "   SELECT m.*,"
        "    ROW_NUMBER() OVER (PARTITION BY trial_id, grp ORDER BY steps_completed, id) AS pos,"
        "    COUNT(*) OVER (PARTITION BY trial_id, grp) AS n"
        f"   FROM metrics m WHERE {where}"
        "  )"
        "  WHERE ? <= 0 OR n <= ? OR (pos - 1) % ((n + ? - 1) / ?) = 0 OR pos = n"
        "  ORDER BY steps_completed, id LIMIT ?"
        ")",
        [*params, max_points, max_points, max_points, max_points, limit or -1],
    )
    return str(row["reports"]) if row is not None else "[]"
