"""The API's reads, in one place: each function takes the store and returns typed rows
(frozen dataclasses), never the store's own row objects; ``convert`` turns rows into API
messages. Writes stay with the modules that own the data (experiments, checkpoints,
reports, logs, auth), which may read through these functions too.

One module per kind of thing read: ``experiments`` (experiments, trials and contexts),
``metrics``, ``checkpoints``, ``logs``, ``users``, and ``owners`` (what authorization
looks up).

May use: ``store``, ``states`` and ``search`` (a searcher metric's value); nothing above.
"""

from __future__ import annotations

from pydet.master.queries.checkpoints import (
    CheckpointRow,
    checkpoint,
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
    experiments,
    stored_config,
    trial,
    trials,
)
from pydet.master.queries.logs import LogFilter, LogRow, task_logs
from pydet.master.queries.metrics import MetricRow, best_validation, metrics, trial_metrics_json
from pydet.master.queries.owners import (
    checkpoint_experiment,
    checkpoint_trial,
    experiment_owner,
    job_experiment,
    tensorboard_owner,
    trial_experiment,
)
from pydet.master.queries.users import UserRow, user, users

__all__ = [
    "ORDER_COLUMNS",
    "CheckpointRow",
    "ExperimentFilter",
    "ExperimentRow",
    "LogFilter",
    "LogRow",
    "MetricRow",
    "TrialRow",
    "UserRow",
    "best_validation",
    "checkpoint",
    "checkpoint_experiment",
    "checkpoint_trial",
    "context",
    "ensure_experiment",
    "ensure_trial",
    "experiment",
    "experiment_checkpoints",
    "experiment_owner",
    "experiments",
    "job_experiment",
    "metrics",
    "stored_config",
    "task_logs",
    "tensorboard_owner",
    "trial",
    "trial_checkpoints",
    "trial_experiment",
    "trial_metrics_json",
    "trials",
    "user",
    "users",
]
