"""Experiments and trials as the API lists and shows them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from determined.common import errors
from pydet.master.states import State
from pydet.master.store.db import Database, Row

# What `order_by` may name (Determined's sort keys, lowercased), and the column each sorts by.
ORDER_COLUMNS = {
    "id": "e.id",
    "name": "e.name",
    "description": "e.description",
    "state": "e.state",
    "start_time": "e.start_time",
    "end_time": "e.end_time",
    "progress": "e.progress",
    "num_trials": "n",
    "user": "e.username",
    "forked_from": "e.parent_id",
    "project_id": "e.project_id",
}


@dataclass(frozen=True)
class ExperimentRow:
    id: int
    name: str
    description: str
    labels: list[str]
    state: State
    # The config as stored (JSON text, secrets included) and as the user wrote it (YAML).
    config: str
    original_config: str
    username: str
    archived: bool
    start_time: float
    end_time: float | None
    progress: float
    parent_id: int
    job_id: str
    num_trials: int
    # The best searcher metric over its trials' validations, if any was reported.
    best_validation: float | None
    # What its trials are doing (their phases, each once), from which its shown state follows.
    trial_phases: tuple[str, ...] = ()
    unmanaged: bool = False
    notes: str = ""
    # Where it is: its project and that project's workspace.
    project_id: int = 1
    project_name: str = ""
    workspace_id: int = 1
    workspace_name: str = ""
    external_id: str | None = None
    # Filled in by _details: the owner's id, its trials' ids, the trial with the best
    # searcher metric, and its checkpoints (COMPLETED ones) and their bytes.
    user_id: int = 0
    trial_ids: tuple[int, ...] = ()
    best_trial_id: int | None = None
    checkpoint_count: int = 0
    checkpoint_size: int = 0

    # The config as parsed when the row was read (a page of experiments reads it twice).
    parsed_config: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def config_dict(self) -> dict[str, Any]:
        if self.parsed_config is not None:
            return self.parsed_config
        value = json.loads(self.config)
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class TrialRow:
    id: int
    experiment_id: int
    state: State
    phase: str
    hparams: str
    seed: int
    restarts: int
    run_id: int
    steps_completed: int
    start_time: float
    end_time: float | None
    latest_checkpoint: str | None
    best_validation: float | None
    latest_validation: str
    searcher_length: int
    progress: float
    early_exit: str
    # The checkpoint it started from, if it was warm-started.
    warm_start_checkpoint: str | None = None
    log_signal: str | None = None
    # The trial whose checkpoint it started from (a PBT child's parent).
    parent_trial_id: int | None = None
    metadata: str = "{}"
    # Filled in by _trial_details: its COMPLETED checkpoints and their bytes, and the step
    # and time of its latest validation (None without one).
    checkpoint_count: int = 0
    checkpoint_size: int = 0
    latest_validation_steps: int | None = None
    latest_validation_time: float | None = None

    @property
    def task_id(self) -> str:
        return f"{self.experiment_id}.{self.id}"


@dataclass(frozen=True)
class ExperimentFilter:
    """What `det experiment list` and the WebUI's list ask for."""

    states: Sequence[State] = ()
    archived: bool | None = None
    name: str = ""
    order_by: str = "id"
    descending: bool = False
    limit: int = 0
    offset: int = 0
    # Owners' usernames; empty for everybody's.
    users: Sequence[str] = ()
    # One project's experiments; 0 for every project's.
    project_id: int = 0
    # Only those with all of these labels, and whose description contains this.
    labels: Sequence[str] = ()
    description: str = ""


# Each experiment with its trials' count and the best of their validations (whether the
# best is the lowest or the highest is in its config).
_EXPERIMENTS = (
    "SELECT e.*, (SELECT COUNT(*) FROM trials t WHERE t.experiment_id = e.id) AS n,"
    " (SELECT MIN(best_validation) FROM trials t WHERE t.experiment_id = e.id) AS lo,"
    " (SELECT MAX(best_validation) FROM trials t WHERE t.experiment_id = e.id) AS hi,"
    " (SELECT GROUP_CONCAT(DISTINCT phase) FROM trials t WHERE t.experiment_id = e.id)"
    " AS phases, p.name AS project_name, p.workspace_id, w.name AS workspace_name,"
    " u.id AS user_id"
    " FROM experiments e JOIN projects p ON p.id = e.project_id"
    " JOIN workspaces w ON w.id = p.workspace_id"
    " LEFT JOIN users u ON u.username = e.username"
)


def _experiment(row: Row, details: Mapping[int, _Details] | None = None) -> ExperimentRow:
    found = (details or {}).get(row["id"], _Details())
    parsed = json.loads(row["config"])
    config = parsed if isinstance(parsed, dict) else {}
    # Its best trial and metric by its searcher's direction.
    smaller = config.get("searcher", {}).get("smaller_is_better", True)
    best_trial, best_value = (found.lowest, row["lo"]) if smaller else (found.highest, row["hi"])
    return ExperimentRow(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        labels=list(json.loads(row["labels"])),
        state=State(row["state"]),
        config=row["config"],
        original_config=row["original_config"],
        username=row["username"],
        archived=bool(row["archived"]),
        start_time=row["start_time"],
        end_time=row["end_time"],
        progress=row["progress"],
        parent_id=row["parent_id"] or 0,
        job_id=row["job_id"],
        num_trials=row["n"],
        best_validation=best_value,
        trial_phases=tuple((row["phases"] or "").split(",")) if row["phases"] else (),
        unmanaged=bool(row["unmanaged"]),
        notes=row["notes"],
        project_id=row["project_id"],
        project_name=row["project_name"],
        workspace_id=row["workspace_id"],
        workspace_name=row["workspace_name"],
        external_id=row["external_id"],
        user_id=found.user_id,
        trial_ids=found.trial_ids,
        checkpoint_count=found.checkpoint_count,
        checkpoint_size=found.checkpoint_size,
        best_trial_id=best_trial,
        parsed_config=config,
    )


@dataclass(frozen=True)
class _Details:
    """What Determined's API shows of an experiment besides its own columns: its owner's id,
    its trials' ids, the trials with the lowest and highest searcher metric, and its
    checkpoints (COMPLETED ones) and their bytes."""

    user_id: int = 0
    trial_ids: tuple[int, ...] = ()
    lowest: int | None = None
    highest: int | None = None
    checkpoint_count: int = 0
    checkpoint_size: int = 0


async def _details(db: Database, rows: Sequence[Row]) -> dict[int, _Details]:
    """The ``_Details`` of each experiment of ``rows`` (read with ``_EXPERIMENTS``, which
    has the owner's id): one query for the whole page."""
    if not rows:
        return {}
    ids = [r["id"] for r in rows]
    trials: dict[int, list[tuple[int, float | None]]] = {i: [] for i in ids}
    checkpoints = dict.fromkeys(ids, (0, 0))
    for t in await db.fetch_all(
        "SELECT t.experiment_id, t.id, t.best_validation,"
        " (SELECT COUNT(*) FROM checkpoints c WHERE c.trial_id = t.id"
        "  AND c.state = 'COMPLETED') AS n,"
        " (SELECT SUM(c.size) FROM checkpoints c WHERE c.trial_id = t.id"
        "  AND c.state = 'COMPLETED') AS size"
        f" FROM trials t WHERE t.experiment_id IN ({','.join('?' * len(ids))}) ORDER BY t.id",
        ids,
    ):
        trials[t["experiment_id"]].append((t["id"], t["best_validation"]))
        count, size = checkpoints[t["experiment_id"]]
        checkpoints[t["experiment_id"]] = (count + t["n"], size + (t["size"] or 0))
    out = {}
    for r in rows:
        scored = [(v, i) for i, v in trials[r["id"]] if v is not None]
        count, size = checkpoints[r["id"]]
        out[r["id"]] = _Details(
            user_id=r["user_id"] or 0,
            trial_ids=tuple(i for i, _ in trials[r["id"]]),
            lowest=min(scored)[1] if scored else None,
            highest=max(scored)[1] if scored else None,
            checkpoint_count=count,
            checkpoint_size=int(size),
        )
    return out


def _trial(row: Row) -> TrialRow:
    return TrialRow(
        id=row["id"],
        experiment_id=row["experiment_id"],
        state=State(row["state"]),
        phase=row["phase"],
        hparams=row["hparams"],
        seed=row["seed"],
        restarts=row["restarts"],
        run_id=row["run_id"],
        steps_completed=row["steps_completed"],
        start_time=row["start_time"],
        end_time=row["end_time"],
        latest_checkpoint=row["latest_checkpoint"],
        best_validation=row["best_validation"],
        latest_validation=row["latest_validation"],
        searcher_length=row["searcher_length"],
        progress=row["progress"],
        early_exit=row["early_exit"],
        warm_start_checkpoint=row["warm_start_checkpoint"],
        log_signal=row["log_signal"],
        parent_trial_id=row["parent_trial_id"],
        metadata=row["metadata"],
    )


async def _trial_details(db: Database, rows: list[TrialRow]) -> list[TrialRow]:
    """``rows`` with their checkpoints' count and size and their latest validation's step
    and time: two queries for them all."""
    if not rows:
        return rows
    ids = [r.id for r in rows]
    marks = ",".join("?" * len(ids))
    checkpoints = {
        c["trial_id"]: (c["n"], c["size"] or 0)
        for c in await db.fetch_all(
            "SELECT trial_id, COUNT(*) AS n, SUM(size) AS size FROM checkpoints"
            f" WHERE trial_id IN ({marks}) AND state = 'COMPLETED' GROUP BY trial_id",
            ids,
        )
    }
    validations = {
        v["trial_id"]: (v["steps_completed"], v["timestamp"])
        for v in await db.fetch_all(
            "SELECT m.trial_id, m.steps_completed, m.timestamp FROM metrics m"
            f" WHERE m.trial_id IN ({marks}) AND m.grp = 'validation' AND m.archived = 0"
            " AND m.steps_completed = (SELECT MAX(n.steps_completed) FROM metrics n"
            "  WHERE n.trial_id = m.trial_id AND n.grp = 'validation' AND n.archived = 0)",
            ids,
        )
    }
    out = []
    for r in rows:
        count, size = checkpoints.get(r.id, (0, 0))
        steps, when = validations.get(r.id, (None, None))
        out.append(
            dataclasses.replace(
                r,
                checkpoint_count=count,
                checkpoint_size=int(size),
                latest_validation_steps=steps,
                latest_validation_time=when,
            )
        )
    return out


async def ensure_experiment(db: Database, experiment_id: int) -> None:
    """Raise ``NotFound`` unless the experiment exists."""
    row = await db.fetch_one("SELECT id FROM experiments WHERE id = ?", (experiment_id,))
    if row is None:
        raise errors.NotFound(f"experiment {experiment_id} not found")


async def ensure_trial(db: Database, trial_id: int) -> None:
    """Raise ``NotFound`` unless the trial exists."""
    row = await db.fetch_one("SELECT id FROM trials WHERE id = ?", (trial_id,))
    if row is None:
        raise errors.NotFound(f"trial {trial_id} not found")


async def experiment(db: Database, experiment_id: int) -> ExperimentRow:
    row = await db.fetch_one(f"{_EXPERIMENTS} WHERE e.id = ?", (experiment_id,))
    if row is None:
        raise errors.NotFound(f"experiment {experiment_id} not found")
    found = _experiment(row, await _details(db, [row]))
    return found


async def experiments(db: Database, f: ExperimentFilter) -> tuple[list[ExperimentRow], int]:
    """One page of the experiments ``f`` selects, and how many it selects in all."""
    where = ["1 = 1"]
    params: list[object] = []
    if f.states:
        where.append(f"e.state IN ({','.join('?' * len(f.states))})")
        params += [s.value for s in f.states]
    if f.archived is not None:
        where.append("e.archived = ?")
        params.append(int(f.archived))
    if f.name:
        where.append("instr(lower(e.name), lower(?)) > 0")
        params.append(f.name)
    if f.users:
        where.append(f"e.username IN ({','.join('?' * len(f.users))})")
        params.extend(f.users)
    if f.project_id:
        where.append("e.project_id = ?")
        params.append(f.project_id)
    for label in f.labels:
        where.append(has_label(db.dialect, "e.labels"))
        params.append(label)
    if f.description:
        where.append("instr(lower(e.description), lower(?)) > 0")
        params.append(f.description)
    column = ORDER_COLUMNS.get(f.order_by or "id")
    if column is None:
        raise errors.InvalidArgument(
            f"order_by: expected one of {', '.join(ORDER_COLUMNS)}; got {f.order_by!r}"
        )
    clause = " AND ".join(where)
    total = await db.fetch_one(f"SELECT COUNT(*) AS n FROM experiments e WHERE {clause}", params)
    rows = await db.fetch_all(
        f"{_EXPERIMENTS} WHERE {clause}"
        f" ORDER BY {column} {'DESC' if f.descending else 'ASC'} LIMIT ? OFFSET ?",
        [*params, f.limit or -1, f.offset],
    )
    details = await _details(db, rows)
    found = [_experiment(r, details) for r in rows]
    return found, total["n"] if total is not None else 0


def has_label(dialect: str, column: str) -> str:
    """A condition (with one parameter, the label) that the JSON list of strings in
    ``column`` (an experiment's or a model's labels) holds the label."""
    if dialect == "postgres":
        return f"jsonb_exists({column}::jsonb, ?)"
    return f"EXISTS (SELECT 1 FROM json_each({column}) WHERE json_each.value = ?)"


async def experiment_labels(db: Database, project_id: int = 0) -> list[str]:
    """Every label experiments carry (of one project, or of all), most used first."""
    where, params = ("WHERE project_id = ?", [project_id]) if project_id else ("", [])
    rows = await db.fetch_all(f"SELECT labels FROM experiments {where}", params)
    counts: dict[str, int] = {}
    for row in rows:
        for label in json.loads(row["labels"]):
            counts[label] = counts.get(label, 0) + 1
    return sorted(counts, key=lambda label: (-counts[label], label))


async def stored_config(db: Database, experiment_id: int) -> str | None:
    """An experiment's config as stored (JSON, secrets included); None if it does not exist."""
    row = await db.fetch_one("SELECT config FROM experiments WHERE id = ?", (experiment_id,))
    return None if row is None else str(row["config"])


async def context(db: Database, experiment_id: int) -> bytes:
    """The context directory an experiment was created with (a gzipped tar)."""
    row = await db.fetch_one("SELECT data FROM contexts WHERE experiment_id = ?", (experiment_id,))
    if row is None:
        raise errors.NotFound(f"experiment {experiment_id} not found")
    return bytes(row["data"])


async def trial(db: Database, trial_id: int) -> TrialRow:
    row = await db.fetch_one("SELECT * FROM trials WHERE id = ?", (trial_id,))
    if row is None:
        raise errors.NotFound(f"trial {trial_id} not found")
    (found,) = await _trial_details(db, [_trial(row)])
    return found


async def trials(db: Database, experiment_id: int, *, details: bool = False) -> list[TrialRow]:
    """An experiment's trials, oldest first; with ``details``, as the API shows them (their
    checkpoints and latest validation)."""
    await ensure_experiment(db, experiment_id)
    rows = await db.fetch_all(
        "SELECT * FROM trials WHERE experiment_id = ? ORDER BY id", (experiment_id,)
    )
    found = [_trial(r) for r in rows]
    return await _trial_details(db, found) if details else found
