"""The API's reads, in one place: each function takes the store and returns typed rows
(frozen dataclasses), never the store's own row objects; ``convert`` turns rows into API
messages. Writes stay with the modules that own the data (experiments, checkpoints,
reports, logs, auth), which may read through these functions too.

One module per kind of thing read: ``experiments`` (experiments, trials and contexts),
``metrics``, ``checkpoints``, ``models`` (the checkpoints the model registry holds),
``logs``, ``users``, and ``owners`` (what authorization looks up).

May use: ``store``, ``states`` and ``search`` (a searcher metric's value); nothing above.
"""

from __future__ import annotations

from pydet.master.queries.checkpoints import (
    CheckpointRow,
    checkpoint,
    checkpoints_by_uuid,
    experiment_checkpoints,
    trial_checkpoints,
)
from pydet.master.queries.experiments import (
    ORDER_COLUMNS,
    ExperimentFilter,
    ExperimentRow,
    TrialRow,
    context,
    ensure_experiment,
    ensure_trial,
    experiment,
    experiment_labels,
    experiments,
    has_label,
    stored_config,
    trial,
    trials,
)
from pydet.master.queries.logs import LogFilter, LogRow, task_logs
from pydet.master.queries.metrics import (
    MetricRow,
    best_validation,
    checkpoint_metrics,
    metrics,
    trial_metrics_json,
)
from pydet.master.queries.models import (
    Registration,
    experiment_registrations,
    registrations,
)
from pydet.master.queries.owners import (
    checkpoint_experiment,
    checkpoint_trial,
    experiment_owner,
    experiment_owners,
    experiment_workspace,
    job_experiment,
    model_owner,
    project_owners,
    task_identity,
    task_owner,
    task_workspace,
    trial_experiment,
    workspace_owner,
)
from pydet.master.queries.users import UserRow, user, user_by_id, users

__all__ = [
    "ORDER_COLUMNS",
    "CheckpointRow",
    "ExperimentFilter",
    "ExperimentRow",
    "LogFilter",
    "LogRow",
    "MetricRow",
    "Registration",
    "TrialRow",
    "UserRow",
    "best_validation",
    "checkpoint",
    "checkpoint_experiment",
    "checkpoint_metrics",
    "checkpoint_trial",
    "checkpoints_by_uuid",
    "context",
    "ensure_experiment",
    "ensure_trial",
    "experiment",
    "experiment_checkpoints",
    "experiment_labels",
    "experiment_owner",
    "experiment_owners",
    "experiment_registrations",
    "experiment_workspace",
    "experiments",
    "has_label",
    "job_experiment",
    "metrics",
    "model_owner",
    "project_owners",
    "registrations",
    "stored_config",
    "task_identity",
    "task_logs",
    "task_owner",
    "task_workspace",
    "trial",
    "trial_checkpoints",
    "trial_experiment",
    "trial_metrics_json",
    "trials",
    "user",
    "user_by_id",
    "users",
    "workspace_owner",
]
