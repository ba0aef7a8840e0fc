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

import functools
import inspect
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

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
    """Forget the default ``Determined`` object, so ``login()`` may be called again."""
    global _determined
    if _determined is not None:
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
