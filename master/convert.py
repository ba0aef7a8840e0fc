"""Store rows to API messages, in one place."""

from __future__ import annotations

import json

from determined.api.gen import v1
from master.db import Row
from master.redaction import redacted_json
from master.states import State


def experiment(row: Row, *, num_trials: int = 0, best: float | None = None) -> v1.Experiment:
    cfg = json.loads(row["config"])
    searcher = cfg.get("searcher") or {}
    resources = cfg.get("resources") or {}
    return v1.Experiment(
        id=row["id"],
        name=row["name"] or f"Experiment {row['id']}",
        description=row["description"],
        labels=json.loads(row["labels"]),
        state=State(row["state"]).to_proto(),
        start_time=row["start_time"],
        end_time=row["end_time"],
        username=row["username"],
        archived=bool(row["archived"]),
        progress=row["progress"],
        num_trials=num_trials,
        resource_pool=resources.get("resource_pool") or "",
        job_id=row["job_id"],
        searcher_name=searcher.get("name") or "",
        searcher_metric=searcher.get("metric") or "",
        smaller_is_better=bool(searcher.get("smaller_is_better", True)),
        best_searcher_metric=best,
        parent_id=row["parent_id"] or 0,
        project=cfg.get("project") or "",
        workspace=cfg.get("workspace") or "",
    )


def trial(row: Row) -> v1.Trial:
    return v1.Trial(
        id=row["id"],
        experiment_id=row["experiment_id"],
        state=State(row["state"]).to_proto(),
        hparams=row["hparams"],
        seed=row["seed"],
        restarts=row["restarts"],
        run_id=row["run_id"],
        steps_completed=row["steps_completed"],
        start_time=row["start_time"],
        end_time=row["end_time"],
        latest_checkpoint_uuid=row["latest_checkpoint"],
        best_validation_metric=row["best_validation"],
        latest_validation=row["latest_validation"],
        task_id=f"{row['experiment_id']}.{row['id']}",
        searcher_length=row["searcher_length"],
        progress=row["progress"],
        early_exit=row["early_exit"],
        phase=v1.TrialPhase[row["phase"]],
    )


def task_log(row: Row) -> v1.TaskLog:
    return v1.TaskLog(
        id=row["id"],
        task_id=row["task_id"],
        allocation_id=row["allocation_id"],
        trial_id=row["trial_id"] or 0,
        rank=row["rank"],
        level=row["level"],
        stdtype=row["stdtype"],
        timestamp=row["timestamp"],
        message=row["message"],
        agent_id=row["agent_id"],
        container_id=row["container_id"],
    )


def checkpoint(row: Row, searcher_metric: float | None) -> v1.Checkpoint:
    return v1.Checkpoint(
        uuid=row["uuid"],
        trial_id=row["trial_id"] or 0,
        experiment_id=row["experiment_id"] or 0,
        allocation_id=row["allocation_id"],
        task_id=row["task_id"],
        steps_completed=row["steps_completed"],
        metadata=row["metadata"],
        resources={k: int(v) for k, v in json.loads(row["resources"]).items()},
        size=row["size"],
        state=row["state"],
        report_time=row["report_time"],
        storage=redacted_json(row["storage"], storage=True),
        searcher_metric=searcher_metric,
    )


def metric(row: Row) -> v1.MetricReport:
    return v1.MetricReport(
        group=row["grp"],
        steps_completed=row["steps_completed"],
        metrics=row["metrics"],
        timestamp=row["timestamp"],
        batch_metrics=row["batch_metrics"],
    )
