"""The Python SDK: what ``det`` does, from Python.

.. code:: python

    from determined.experimental import client

    # Unneeded after `det user login`; DET_MASTER, DET_USER and DET_PASS work too.
    client.login(master="localhost:8080", user="admin", password="...")

    exp = client.create_experiment(config="const.yaml", model_dir=".")
    state = exp.wait()
    best = exp.top_checkpoint()
    path = best.download()

The module-level functions use one default ``Determined`` object, made on first use from
``login()``'s arguments or the environment; to talk to several masters, make ``Determined``
objects yourself. Failures raise ``determined.common.errors.DetError`` subclasses
(``NotFound``, ``Unauthenticated``, ``Unavailable``, ...) with a message that says what
to do.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

from determined.common.experimental._session import MasterSession as Session
from determined.common.experimental.checkpoint import (
    Checkpoint,
    CheckpointSortBy,
    CheckpointState,
    CheckpointTrainingMetadata,
    DownloadMode,
)
from determined.common.experimental.determined import Determined
from determined.common.experimental.experiment import (
    Experiment,
    ExperimentReference,
    ExperimentState,
)
from determined.common.experimental.trial import (
    LogLevel,
    OrderBy,
    Trial,
    TrialMetrics,
    TrialOrderBy,
    TrialSortBy,
    TrialState,
)

TrialReference = Trial

__all__ = [
    "Checkpoint",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointTrainingMetadata",
    "Determined",
    "DownloadMode",
    "Experiment",
    "ExperimentReference",
    "ExperimentState",
    "LogLevel",
    "OrderBy",
    "Session",
    "Trial",
    "TrialMetrics",
    "TrialOrderBy",
    "TrialReference",
    "TrialSortBy",
    "TrialState",
    "create_experiment",
    "get_checkpoint",
    "get_experiment",
    "get_trial",
    "list_experiments",
    "login",
    "logout",
]

_determined: Determined | None = None


def _default() -> Determined:
    global _determined
    if _determined is None:
        _determined = Determined()
    return _determined


def login(
    master: str | None = None,
    user: str | None = None,
    password: str | None = None,
    cert_path: str | None = None,
    cert_name: str | None = None,
    noverify: bool = False,
) -> None:
    """Set up the default ``Determined`` object the module's functions use.

    Needed only where the environment does not already say it: after ``det user login``
    (or with ``DET_MASTER``, ``DET_USER`` and ``DET_PASS`` set) the functions work without
    it. Call it once, before any other function here.

    Arguments:
        master: the master's address; default ``DET_MASTER``, else ``localhost:8080``.
        user: who to act as; default ``DET_USER``, else the last ``det user login``.
        password: log in with it; default the cached session, else ``DET_PASS``.
        cert_path: the CA certificate (PEM) that signed the master's.
        cert_name: accepted for compatibility.
        noverify: accept any certificate from the master.

    Raises:
        ValueError: the default object is already in use.
    """
    global _determined
    if _determined is not None:
        raise ValueError(
            "client.login() must come before any other client call, and only once; to use "
            "several masters or users, make client.Determined(...) objects"
        )
    _determined = Determined(master, user, password, cert_path, cert_name, noverify)


def logout() -> None:
    """Forget the default ``Determined`` object, so ``login()`` may be called again."""
    global _determined
    if _determined is not None:
        _determined.close()
    _determined = None


def create_experiment(
    config: str | pathlib.Path | dict[str, Any],
    model_dir: str | os.PathLike[str] | None = None,
    includes: Iterable[str | os.PathLike[str]] | None = None,
    parent_id: int | None = None,
    project_id: int | None = None,
    template: str | None = None,
) -> Experiment:
    """Create an experiment (``Determined.create_experiment``)."""
    return _default().create_experiment(
        config, model_dir, includes, parent_id, project_id, template
    )


def get_experiment(experiment_id: int) -> Experiment:
    """The experiment with this id (``Determined.get_experiment``)."""
    return _default().get_experiment(experiment_id)


def list_experiments(
    experiment_ids: Sequence[int] | None = None,
    labels: Sequence[str] | None = None,
    users: Sequence[str] | None = None,
    states: Sequence[ExperimentState] | None = None,
    name: str | None = None,
    project_id: int | None = None,
    archived: bool | None = None,
) -> list[Experiment]:
    """Experiments matching every filter given (``Determined.list_experiments``)."""
    return _default().list_experiments(
        experiment_ids, labels, users, states, name, project_id, archived
    )


def get_trial(trial_id: int) -> Trial:
    """The trial with this id (``Determined.get_trial``)."""
    return _default().get_trial(trial_id)


def get_checkpoint(uuid: str) -> Checkpoint:
    """The checkpoint with this UUID (``Determined.get_checkpoint``)."""
    return _default().get_checkpoint(uuid)
