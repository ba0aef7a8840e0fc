"""Warm-starting a search from a finished experiment (``searcher.source_experiment_id``).

The old experiment's finished trials are read once, when the new experiment is created: their
hyperparameters, latest validation and searcher-metric history become
:class:`~pydet.master.search.base.ImportedTrial` records that the search method is seeded with
(its state keeps what it made of them, so a restarted master replays the same search), and a
row per trial in ``imported_trials`` says what was imported and why a trial was skipped. The
imported trials are never run; ``det experiment describe`` and the WebUI list them apart from
the experiment's own trials.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from determined.common import errors, expconf
from pydet.master.search.base import ImportedTrial
from pydet.master.store.db import Database

FIELD = "searcher.source_experiment_id"


@dataclass(frozen=True)
class ImportRow:
    """An imported trial as describe shows it."""

    source_experiment_id: int
    source_trial_id: int
    hparams: str
    latest_validation: str
    best_validation: float | None
    steps_completed: int
    note: str


async def source_trials(db: Database, cfg: expconf.ExperimentConfig) -> list[ImportedTrial]:
    """The finished trials of the experiment ``cfg`` warm-starts from ([] when it sets none),
    after checking that it searched the same metric over the same hyperparameter names."""
    source_id = getattr(cfg.searcher, "source_experiment_id", None)
    if source_id is None:
        return []
    row = await db.fetch_one("SELECT config FROM experiments WHERE id = ?", (source_id,))
    if row is None:
        raise errors.NotFound(f"{FIELD}: experiment {source_id} not found")
    old = json.loads(row["config"])
    _check_same_search(source_id, cfg, old)
    time_metric = getattr(cfg.searcher, "time_metric", None)
    metric = cfg.searcher.metric
    trials = await db.fetch_all(
        "SELECT id, hparams, latest_validation, steps_completed FROM trials"
        " WHERE experiment_id = ? AND state = 'COMPLETED' ORDER BY id",
        (source_id,),
    )
    found: list[ImportedTrial] = []
    for trial in trials:
        reports = await db.fetch_all(
            "SELECT steps_completed, metrics FROM metrics WHERE trial_id = ? AND grp = 'validation'"
            " ORDER BY steps_completed, id",
            (trial["id"],),
        )
        history: list[list[float]] = []
        for report in reports:
            values = json.loads(report["metrics"])
            value = _number(values.get(metric)) if metric else None
            at = _number(values.get(time_metric)) if time_metric else report["steps_completed"]
            if value is not None and at is not None:
                history.append([float(at), value])
        latest = json.loads(trial["latest_validation"] or "{}")
        found.append(
            ImportedTrial(
                experiment_id=source_id,
                trial_id=int(trial["id"]),
                hparams=json.loads(trial["hparams"]),
                metrics={
                    k: v for k, v in ((k, _number(v)) for k, v in latest.items()) if v is not None
                },
                history=history,
                length=int(trial["steps_completed"]),
            )
        )
    return found


def _check_same_search(source_id: int, cfg: expconf.ExperimentConfig, old: dict[str, Any]) -> None:
    searcher = old.get("searcher") or {}
    new_goals = _goals(cfg.searcher.to_dict())
    old_goals = _goals(searcher)
    if new_goals != old_goals:
        raise errors.InvalidArgument(
            f"{FIELD}: experiment {source_id} searched {_shown(old_goals)}, this search "
            f"{_shown(new_goals)}; a warm start needs the same searcher metric"
        )
    new_names = {".".join(p) for p in expconf.flatten_hparams(cfg.hyperparameters)}
    old_names = _names(old.get("hyperparameters") or {})
    if new_names != old_names:
        extra = sorted(new_names - old_names)
        missing = sorted(old_names - new_names)
        parts = []
        if extra:
            parts.append(f"only this search has {', '.join(extra)}")
        if missing:
            parts.append(f"only experiment {source_id} has {', '.join(missing)}")
        raise errors.InvalidArgument(
            f"{FIELD}: the hyperparameter names differ ({'; '.join(parts)})"
        )


def _goals(searcher: dict[str, Any]) -> list[tuple[str, bool]]:
    metrics = searcher.get("metrics")
    if isinstance(metrics, list) and metrics:
        return [(str(m["name"]), bool(m.get("smaller_is_better", True))) for m in metrics]
    return [(str(searcher.get("metric")), bool(searcher.get("smaller_is_better", True)))]


def _shown(goals: list[tuple[str, bool]]) -> str:
    return ", ".join(
        f"{name} ({'lower' if smaller else 'higher'} is better)" for name, smaller in goals
    )


def _names(tree: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted names of a stored config's hyperparameters (a group is a mapping without
    ``type``; a declared hyperparameter or a constant is a leaf)."""
    names: set[str] = set()
    for key, value in tree.items():
        if isinstance(value, dict) and "type" not in value:
            names |= _names(value, f"{prefix}{key}.")
        else:
            names.add(f"{prefix}{key}")
    return names


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return None if math.isnan(value) else value


async def save_imports(
    db: Database,
    experiment_id: int,
    trials: list[ImportedTrial],
    skipped: dict[int, str],
    *,
    smaller_is_better: bool,
) -> None:
    """A row per imported trial, with its best searcher metric and the reason the search did
    not use it (or "")."""
    pick = min if smaller_is_better else max
    await db.execute_many(
        "INSERT INTO imported_trials (experiment_id, source_experiment_id, source_trial_id,"
        " hparams, latest_validation, best_validation, steps_completed, note)"
        " VALUES (?,?,?,?,?,?,?,?)",
        [
            (
                experiment_id,
                t.experiment_id,
                t.trial_id,
                json.dumps(t.hparams),
                json.dumps(t.metrics),
                pick((v for _, v in t.history), default=None),
                t.length,
                skipped.get(t.trial_id, ""),
            )
            for t in trials
        ],
    )


async def imports(db: Database, experiment_id: int) -> list[ImportRow]:
    rows = await db.fetch_all(
        "SELECT * FROM imported_trials WHERE experiment_id = ? ORDER BY source_trial_id",
        (experiment_id,),
    )
    return [
        ImportRow(
            source_experiment_id=int(r["source_experiment_id"]),
            source_trial_id=int(r["source_trial_id"]),
            hparams=str(r["hparams"]),
            latest_validation=str(r["latest_validation"]),
            best_validation=r["best_validation"],
            steps_completed=int(r["steps_completed"]),
            note=str(r["note"]),
        )
        for r in rows
    ]
