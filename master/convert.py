"""Rows read by ``queries`` to API messages, and JSON objects callers send, in one place."""

from __future__ import annotations

import datetime

from determined.api.gen import v1
from determined.common import structs
from pydet.master import queries
from pydet.master.auth.redaction import redacted, redacted_json
from pydet.master.experiments import shown_state
from pydet.master.experiments.trial_lifecycle import TrialPhase
from pydet.master.models.models import Model
from pydet.master.models.versions import ModelVersion
from pydet.master.workspaces.projects import Note, Project
from pydet.master.workspaces.workspaces import Workspace


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
        project=row.project_name,
        workspace=row.workspace_name,
        unmanaged=row.unmanaged,
        notes=row.notes,
        project_id=row.project_id,
        workspace_id=row.workspace_id,
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
        validation_metrics=row.validation_metrics,
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
    return None if seconds is None else datetime.datetime.fromtimestamp(seconds, datetime.UTC)


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
            else v1.Checkpoint(uuid=v.checkpoint_uuid, state="DELETED")
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
