"""Rows read by ``queries`` to API messages, and JSON objects callers send, in one place."""

from __future__ import annotations

from determined.api.gen import v1
from pydet.master import queries
from pydet.master.auth.redaction import redacted_json
from pydet.master.experiments import shown_state
from pydet.master.experiments.trial_lifecycle import TrialPhase


def pagination(total: int, offset: int = 0, limit: int = 0) -> v1.Pagination:
    """How a list of ``total`` was cut by ``offset`` and ``limit`` (0: no limit), as
    Determined's API reports it: what was returned is ``[start_index, end_index)``."""
    start = min(max(offset, 0), total)
    end = total if limit <= 0 else min(start + limit, total)
    return v1.Pagination(offset=offset, limit=limit, start_index=start, end_index=end, total=total)


def experiment(row: queries.ExperimentRow, *, pulling: int = 0) -> v1.Experiment:
    """``pulling``: how many of its trials wait for an agent to pull their image."""
    cfg = row.config_dict
    searcher = cfg.get("searcher") or {}
    resources = cfg.get("resources") or {}
    return v1.Experiment(
        id=row.id,
        name=row.name or f"Experiment {row.id}",
        description=row.description,
        labels=row.labels,
        state=shown_state.experiment(
            row.state, (TrialPhase(p) for p in row.trial_phases), pulling=pulling
        ),
        start_time=row.start_time,
        end_time=row.end_time,
        username=row.username,
        archived=row.archived,
        progress=row.progress,
        num_trials=row.num_trials,
        resource_pool=resources.get("resource_pool") or "",
        job_id=row.job_id,
        searcher_name=searcher.get("name") or "",
        searcher_metric=searcher.get("metric") or "",
        smaller_is_better=bool(searcher.get("smaller_is_better", True)),
        best_searcher_metric=row.best_validation,
        parent_id=row.parent_id,
        project=cfg.get("project") or "",
        workspace=cfg.get("workspace") or "",
        unmanaged=row.unmanaged,
    )


def trial(row: queries.TrialRow, *, pulling: bool = False) -> v1.Trial:
    """``pulling``: an agent pulls the image of its allocation."""
    return v1.Trial(
        id=row.id,
        experiment_id=row.experiment_id,
        state=shown_state.trial(TrialPhase(row.phase), pulling=pulling),
        hparams=row.hparams,
        seed=row.seed,
        restarts=row.restarts,
        run_id=row.run_id,
        steps_completed=row.steps_completed,
        start_time=row.start_time,
        end_time=row.end_time,
        latest_checkpoint_uuid=row.latest_checkpoint,
        best_validation_metric=row.best_validation,
        latest_validation=row.latest_validation,
        task_id=row.task_id,
        searcher_length=row.searcher_length,
        progress=row.progress,
        early_exit=row.early_exit,
        phase=v1.TrialPhase[row.phase],
        warm_start_checkpoint_uuid=row.warm_start_checkpoint,
        log_signal=row.log_signal,
        parent_trial_id=row.parent_trial_id,
        metadata=row.metadata,
    )


def task_log(row: queries.LogRow) -> v1.TaskLog:
    return v1.TaskLog(
        id=row.id,
        task_id=row.task_id,
        allocation_id=row.allocation_id,
        trial_id=row.trial_id,
        rank=row.rank,
        level=row.level,
        stdtype=row.stdtype,
        timestamp=row.timestamp,
        message=row.message,
        agent_id=row.agent_id,
        container_id=row.container_id,
    )


def checkpoint(row: queries.CheckpointRow) -> v1.Checkpoint:
    return v1.Checkpoint(
        uuid=row.uuid,
        trial_id=row.trial_id,
        experiment_id=row.experiment_id,
        allocation_id=row.allocation_id,
        task_id=row.task_id,
        steps_completed=row.steps_completed,
        metadata=row.metadata,
        resources=row.resources,
        size=row.size,
        state=row.state,
        report_time=row.report_time,
        storage=redacted_json(row.storage, storage=True),
        searcher_metric=row.searcher_metric,
    )


def metric(row: queries.MetricRow) -> v1.MetricReport:
    return v1.MetricReport(
        group=row.group,
        steps_completed=row.steps_completed,
        metrics=row.metrics,
        timestamp=row.timestamp,
        batch_metrics=row.batch_metrics,
    )
