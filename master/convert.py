"""Rows read by ``queries`` to API messages, and JSON objects callers send, in one place."""

from __future__ import annotations

import datetime
import json
import time

from determined.api.gen import v1
from determined.common import structs, timestamps
from determined.common.pagination import pagination as pagination
from pydet.master import queries
from pydet.master.auth.redaction import redacted, redacted_json, redacted_yaml
from pydet.master.experiments import shown_state
from pydet.master.experiments.trial_lifecycle import TrialPhase
from pydet.master.models.models import Model
from pydet.master.models.versions import ModelVersion
from pydet.master.workspaces.projects import Note, Project
from pydet.master.workspaces.workspaces import Workspace


def experiment(
    row: queries.ExperimentRow, *, pulling: int = 0, full: bool = False
) -> v1.Experiment:
    """``pulling``: how many of its trials wait for an agent to pull their image. ``full``:
    with its config and original config (secrets hidden), as GetExperiment shows it."""
    cfg = row.config_dict
    searcher = cfg.get("searcher") or {}
    resources = cfg.get("resources") or {}
    end = row.end_time
    return v1.Experiment(
        id=row.id,
        name=row.name or f"Experiment {row.id}",
        description=row.description,
        labels=row.labels,
        state=shown_state.experiment(
            row.state, (TrialPhase(p) for p in row.trial_phases), pulling=pulling
        ),
        start_time=timestamps.to_datetime(row.start_time),
        end_time=timestamps.to_datetime(end),
        duration=int((end if end is not None else time.time()) - row.start_time),
        username=row.username,
        user_id=row.user_id,
        display_name=row.username,
        archived=row.archived,
        progress=row.progress,
        num_trials=row.num_trials,
        trial_ids=list(row.trial_ids),
        resource_pool=resources.get("resource_pool") or "",
        job_id=row.job_id,
        searcher_type=searcher.get("name") or "",
        searcher_metric=searcher.get("metric") or "",
        smaller_is_better=bool(searcher.get("smaller_is_better", True)),
        best_trial_searcher_metric=row.best_validation,
        best_trial_id=row.best_trial_id,
        hyperparameters=structs.struct(cfg.get("hyperparameters") or {}),
        forked_from=row.parent_id or None,
        project_name=row.project_name,
        project_id=row.project_id,
        workspace_name=row.workspace_name,
        workspace_id=row.workspace_id,
        notes=row.notes,
        checkpoint_count=row.checkpoint_count,
        checkpoint_size=row.checkpoint_size,
        unmanaged=row.unmanaged,
        external_experiment_id=row.external_id,
        config=structs.struct(redacted(cfg)) if full else None,
        original_config=redacted_yaml(row.original_config) if full else "",
    )


def trial(row: queries.TrialRow, *, pulling: bool = False) -> v1.Trial:
    """``pulling``: an agent pulls the image of its allocation."""
    latest = json.loads(row.latest_validation or "{}")
    return v1.Trial(
        id=row.id,
        experiment_id=row.experiment_id,
        state=shown_state.trial(TrialPhase(row.phase), pulling=pulling),
        hparams=structs.struct(json.loads(row.hparams or "{}")),
        seed=row.seed,
        restarts=row.restarts,
        run_id=row.run_id,
        total_batches_processed=row.steps_completed,
        start_time=timestamps.to_datetime(row.start_time),
        end_time=timestamps.to_datetime(row.end_time),
        latest_checkpoint_uuid=row.latest_checkpoint,
        best_validation_metric=row.best_validation,
        searcher_metric_value=row.best_validation or 0.0,
        latest_validation=None
        if row.latest_validation_steps is None and not latest
        else v1.MetricsWorkload(
            end_time=timestamps.to_datetime(row.latest_validation_time),
            total_batches=row.latest_validation_steps or 0,
            metrics=v1.Metrics(avg_metrics=structs.struct(latest)),
        ),
        task_id=row.task_id,
        task_ids=[row.task_id],
        checkpoint_count=row.checkpoint_count,
        total_checkpoint_size=row.checkpoint_size,
        searcher_length=row.searcher_length,
        progress=row.progress,
        early_exit=row.early_exit,
        phase=v1.TrialPhase[row.phase],
        warm_start_checkpoint_uuid=row.warm_start_checkpoint or "",
        log_policy_matched=row.log_signal,
        parent_trial_id=row.parent_trial_id,
        metadata=structs.struct(json.loads(row.metadata or "{}")),
    )


def log_level(name: str) -> v1.LogLevel:
    """A stored level ("INFO", or "" for none) as Determined's LogLevel."""
    return v1.LogLevel.__members__.get(name, v1.LogLevel.UNSPECIFIED)


def task_log(row: queries.LogRow) -> v1.TaskLog:
    return v1.TaskLog(
        id=row.id,
        task_id=row.task_id,
        allocation_id=row.allocation_id,
        trial_id=row.trial_id,
        rank_id=row.rank,
        level=log_level(row.level),
        stdtype=row.stdtype,
        timestamp=timestamps.to_datetime(row.timestamp),
        message=row.message,
        log=row.message,
        agent_id=row.agent_id or None,
        container_id=row.container_id or None,
    )


def checkpoint(row: queries.CheckpointRow) -> v1.Checkpoint:
    return v1.Checkpoint(
        uuid=row.uuid,
        training=v1.CheckpointTrainingMetadata(
            trial_id=row.trial_id,
            experiment_id=row.experiment_id,
            searcher_metric=row.searcher_metric,
            validation_metrics=v1.Metrics(
                avg_metrics=structs.struct(json.loads(row.validation_metrics))
            )
            if row.validation_metrics
            else None,
        ),
        allocation_id=row.allocation_id,
        task_id=row.task_id,
        steps_completed=row.steps_completed,
        metadata=structs.struct(json.loads(row.metadata or "{}")),
        resources=row.resources,
        size=row.size,
        state=v1.CheckpointState[row.state],
        report_time=timestamps.to_datetime(row.report_time),
        storage=structs.struct(json.loads(redacted_json(row.storage, storage=True) or "{}")),
    )


def metric(row: queries.MetricRow) -> v1.MetricReport:
    return v1.MetricReport(
        group=row.group,
        steps_completed=row.steps_completed,
        metrics=row.metrics,
        timestamp=row.timestamp,
        batch_metrics=row.batch_metrics,
        trial_id=row.trial_id,
        trial_run_id=row.run_id,
    )


def timestamp(seconds: float | None) -> datetime.datetime | None:
    """Seconds since the epoch as a Timestamp field's value (None stays unset)."""
    return timestamps.to_datetime(seconds)


def workspace(w: Workspace) -> v1.Workspace:
    storage = w.checkpoint_storage
    return v1.Workspace(
        id=w.id,
        name=w.name,
        archived=w.archived,
        username=w.username,
        immutable=w.immutable,
        num_projects=w.num_projects,
        user_id=w.user_id or 0,
        num_experiments=w.num_experiments,
        state=v1.WorkspaceState.UNSPECIFIED,
        # Its storage's secrets are never shown (as an experiment config's are not).
        checkpoint_storage_config=structs.from_dict(
            None
            if storage is None
            else redacted({"checkpoint_storage": storage})["checkpoint_storage"]
        ),
        default_compute_pool=w.default_compute_pool,
        default_aux_pool=w.default_aux_pool,
        agent_user_group=(
            None
            if w.agent is None
            else v1.AgentUserGroup(
                agent_uid=w.agent[0],
                agent_gid=w.agent[1],
                agent_user=w.agent[2],
                agent_group=w.agent[3],
            )
        ),
    )


def note(n: Note) -> v1.Note:
    return v1.Note(name=n.name, contents=n.contents)


def project(p: Project) -> v1.Project:
    return v1.Project(
        id=p.id,
        name=p.name,
        workspace_id=p.workspace_id,
        description=p.description,
        last_experiment_started_at=timestamp(p.last_experiment_started_at),
        notes=[note(n) for n in p.notes],
        num_experiments=p.num_experiments,
        num_active_experiments=p.num_active_experiments,
        archived=p.archived,
        username=p.username,
        immutable=p.immutable,
        user_id=p.user_id or 0,
        workspace_name=p.workspace_name,
        state=v1.WorkspaceState.UNSPECIFIED,
        key=p.key,
        num_runs=p.num_runs,
    )


def model(m: Model) -> v1.Model:
    return v1.Model(
        name=m.name,
        description=m.description,
        metadata=structs.from_dict(m.metadata),
        creation_time=timestamp(m.creation_time),
        last_updated_time=timestamp(m.last_updated_time),
        id=m.id,
        num_versions=m.num_versions,
        labels=list(m.labels),
        username=m.username,
        archived=m.archived,
        notes=m.notes,
        user_id=m.user_id or 0,
        workspace_id=m.workspace_id,
    )


def model_version(v: ModelVersion) -> v1.ModelVersion:
    return v1.ModelVersion(
        model=model(v.model),
        # A version whose checkpoint record is gone (its experiment deleted by an older
        # master) still names it.
        checkpoint=(
            checkpoint(v.checkpoint)
            if v.checkpoint is not None
            else v1.Checkpoint(uuid=v.checkpoint_uuid, state=v1.CheckpointState.DELETED)
        ),
        version=v.version,
        creation_time=timestamp(v.creation_time),
        id=v.id,
        name=v.name,
        metadata=structs.from_dict(v.metadata),
        last_updated_time=timestamp(v.last_updated_time),
        comment=v.comment,
        username=v.username,
        labels=list(v.labels),
        notes=v.notes,
        user_id=v.user_id or 0,
    )
