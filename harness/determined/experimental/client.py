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
to do; each is also the exception of ``determined.common.api.errors`` Determined raises
there (``NotFoundException``, ``UnauthenticatedException``, ``MasterNotFoundException``,
...), and a bad argument is also a ``ValueError``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Concatenate, ParamSpec, TypeVar

from determined.common.experimental._session import MasterSession as Session
from determined.common.experimental._util import OrderBy
from determined.common.experimental.checkpoint import (
    Checkpoint,
    CheckpointOrderBy,
    CheckpointSortBy,
    CheckpointState,
    CheckpointTrainingMetadata,
    DownloadMode,
)
from determined.common.experimental.determined import Determined
from determined.common.experimental.experiment import (
    Experiment,
    ExperimentOrderBy,
    ExperimentReference,
    ExperimentSortBy,
    ExperimentState,
)
from determined.common.experimental.metrics import TrainingMetrics, TrialMetrics, ValidationMetrics
from determined.common.experimental.model import Model, ModelOrderBy, ModelSortBy, ModelVersion
from determined.common.experimental.project import Project
from determined.common.experimental.trial import (
    LogLevel,
    Trial,
    TrialOrderBy,
    TrialReference,
    TrialSortBy,
    TrialState,
)
from determined.common.experimental.user import User
from determined.common.experimental.workspace import Workspace

__all__ = [
    "Checkpoint",
    "CheckpointOrderBy",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointTrainingMetadata",
    "Determined",
    "DownloadMode",
    "Experiment",
    "ExperimentOrderBy",
    "ExperimentReference",
    "ExperimentSortBy",
    "ExperimentState",
    "LogLevel",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "ModelVersion",
    "OrderBy",
    "Project",
    "Session",
    "TrainingMetrics",
    "Trial",
    "TrialMetrics",
    "TrialOrderBy",
    "TrialReference",
    "TrialSortBy",
    "TrialState",
    "User",
    "ValidationMetrics",
    "Workspace",
    "create_experiment",
    "create_model",
    "create_user",
    "create_workspace",
    "delete_workspace",
    "get_checkpoint",
    "get_experiment",
    "get_model",
    "get_model_by_id",
    "get_model_labels",
    "get_models",
    "get_session_username",
    "get_trial",
    "get_user_by_id",
    "get_user_by_name",
    "get_workspace",
    "iter_trials_metrics",
    "list_experiments",
    "list_models",
    "list_users",
    "list_workspaces",
    "login",
    "logout",
    "stream_trials_metrics",
    "stream_trials_training_metrics",
    "stream_trials_validation_metrics",
    "whoami",
]

logger = logging.getLogger("determined.client")

_determined: Determined | None = None
_P = ParamSpec("_P")
_R = TypeVar("_R")


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
    """End the default object's session on the master and forget its cached token, as
    Determined does; ``login()`` may then be called again. Without a default object (no
    call made yet) it only warns."""
    global _determined
    if _determined is None:
        logger.warning(
            "client has not been logged in, either explicitly by client.login() or implicitly "
            "by any other client.* function, so client.logout() has no session to log out of "
            "and is a no-op. If you would like to log out of the default active session, try "
            "client.Determined().logout() instead."
        )
        return
    try:
        _determined.logout()
    finally:
        _determined.close()
        _determined = None


def _on_default(method: Callable[Concatenate[Determined, _P], _R], doc: str) -> Callable[_P, _R]:
    """The module function of ``method``'s name: ``method`` called on the default
    ``Determined`` object, with the method's parameters (less ``self``) and ``doc``."""

    # wraps keeps the method's name and annotations (__wrapped__ resolves them); the
    # function is this module's, with its own docstring and no ``self``.
    @functools.wraps(method)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return method(_default(), *args, **kwargs)

    signature = inspect.signature(method)
    call.__signature__ = signature.replace(  # type: ignore[attr-defined]  # for help()
        parameters=list(signature.parameters.values())[1:]
    )
    call.__qualname__ = call.__name__
    call.__module__ = __name__
    call.__doc__ = doc
    return call


create_experiment = _on_default(
    Determined.create_experiment, "Create an experiment (``Determined.create_experiment``)."
)
get_experiment = _on_default(
    Determined.get_experiment, "The experiment with this id (``Determined.get_experiment``)."
)
list_experiments = _on_default(
    Determined.list_experiments,
    "Experiments matching every filter given (``Determined.list_experiments``).",
)
get_trial = _on_default(Determined.get_trial, "The trial with this id (``Determined.get_trial``).")
get_checkpoint = _on_default(
    Determined.get_checkpoint, "The checkpoint with this UUID (``Determined.get_checkpoint``)."
)
create_user = _on_default(Determined.create_user, "Create a user (``Determined.create_user``).")
get_user_by_id = _on_default(
    Determined.get_user_by_id, "The user with this id (``Determined.get_user_by_id``)."
)
get_user_by_name = _on_default(
    Determined.get_user_by_name, "The user with this name (``Determined.get_user_by_name``)."
)
get_session_username = _on_default(
    Determined.get_session_username,
    "The name of the user the calls run as (``Determined.get_session_username``).",
)
whoami = _on_default(Determined.whoami, "The user the calls run as (``Determined.whoami``).")
list_users = _on_default(
    Determined.list_users, "Every user, or the (in)active ones (``Determined.list_users``)."
)
iter_trials_metrics = _on_default(
    Determined.iter_trials_metrics,
    "One group's reports of several trials (``Determined.iter_trials_metrics``).",
)
stream_trials_training_metrics = _on_default(
    Determined.stream_trials_training_metrics,
    "Deprecated: ``iter_trials_metrics(trial_ids, group='training')``.",
)
stream_trials_validation_metrics = _on_default(
    Determined.stream_trials_validation_metrics,
    "Deprecated: ``iter_trials_metrics(trial_ids, group='validation')``.",
)


def stream_trials_metrics(trial_ids: list[int], group: str) -> Iterator[TrialMetrics]:
    """Deprecated: ``iter_trials_metrics``."""
    warnings.warn(
        "client.stream_trials_metrics is deprecated. Use client.iter_trials_metrics instead",
        FutureWarning,
        stacklevel=2,
    )
    return iter_trials_metrics(trial_ids, group=group)


# Workspaces and the model registry.
get_workspace = _on_default(
    Determined.get_workspace, "The workspace of this name (``Determined.get_workspace``)."
)
list_workspaces = _on_default(
    Determined.list_workspaces, "Every workspace (``Determined.list_workspaces``)."
)
create_workspace = _on_default(
    Determined.create_workspace, "Create a workspace (``Determined.create_workspace``)."
)
delete_workspace = _on_default(
    Determined.delete_workspace, "Delete a workspace (``Determined.delete_workspace``)."
)
create_model = _on_default(
    Determined.create_model, "Add a model to the registry (``Determined.create_model``)."
)
get_model = _on_default(
    Determined.get_model, "The model of this name or id (``Determined.get_model``)."
)
get_model_by_id = _on_default(
    Determined.get_model_by_id, "Deprecated: ``get_model`` (``Determined.get_model_by_id``)."
)
get_models = _on_default(
    Determined.get_models, "Deprecated: ``list_models`` (``Determined.get_models``)."
)
list_models = _on_default(
    Determined.list_models, "The models matching the filters (``Determined.list_models``)."
)
get_model_labels = _on_default(
    Determined.get_model_labels, "Every label models carry (``Determined.get_model_labels``)."
)
