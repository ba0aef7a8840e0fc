"""``core_v2``: the Core API as module-level objects, set up by one ``init()`` call.

Inside a trial on the cluster, ``init()`` is ``det.core.init()`` with its contexts published
as ``core_v2.train``, ``core_v2.checkpoint`` and the rest, so a script can report without
passing a context around. The config arguments describe a run outside the cluster (an
"unmanaged" run, which Determined reports into an experiment it creates); inside a trial
they are ignored, as in Determined.
"""

from __future__ import annotations

import atexit
import dataclasses
import warnings
from typing import TYPE_CHECKING, Any

import determined as det
from determined import core
from determined.common import errors

if TYPE_CHECKING:
    from determined.experimental import client as sdk

_context: core.Context | None = None
_client: sdk.Determined | None = None
_atexit_registered = False


@dataclasses.dataclass
class Config:
    """What an unmanaged run's experiment would be made from; ignored inside a trial."""

    name: str | None = None
    hparams: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    description: str | None = None
    labels: list[str] | None = None
    workspace: str | None = None
    project: str | None = None
    checkpoint_storage: str | dict[str, Any] | None = None
    searcher: dict[str, Any] | None = None
    external_experiment_id: str | None = None
    external_trial_id: str | None = None


class _Deprecated(Config):
    def __init__(self, **kwargs: Any) -> None:
        warnings.warn(
            f"core_v2.{type(self).__name__} is deprecated; use core_v2.Config",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(**kwargs)


class DefaultConfig(_Deprecated):
    """Determined's older name for ``Config`` (deprecated there too)."""


class UnmanagedConfig(_Deprecated):
    """Determined's older name for the unmanaged part of ``Config`` (deprecated)."""


def init_context(
    *,
    config: Config | dict[str, Any] | None = None,
    defaults: Config | None = None,
    unmanaged: Config | bool | None = None,
    client: sdk.Determined | None = None,
    distributed: core.DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: core.PreemptMode = core.PreemptMode.WorkersAskChief,
    tensorboard_mode: core.TensorboardMode = core.TensorboardMode.AUTO,
) -> core.Context:
    """Build a Core API context the way ``init()`` does, and return it instead of
    publishing it (use it as ``with core_v2.init_context(...) as core_context:``).

    Raises:
        errors.FailedPrecondition: not inside a trial: pydet's master does not take
            unmanaged runs.
    """
    info = det.get_cluster_info()
    if info is None or info.task_type != "TRIAL":
        _unmanaged_refused(config, defaults, unmanaged)
    return core.init(
        distributed=distributed,
        checkpoint_storage=checkpoint_storage,
        preempt_mode=preempt_mode,
        tensorboard_mode=tensorboard_mode,
    )


def init(
    *,
    config: Config | dict[str, Any] | None = None,
    defaults: Config | None = None,
    unmanaged: Config | bool | None = None,
    client: sdk.Determined | None = None,
    distributed: core.DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: core.PreemptMode = core.PreemptMode.WorkersAskChief,
    tensorboard_mode: core.TensorboardMode = core.TensorboardMode.AUTO,
) -> None:
    """Set up the Core API and publish it as ``core_v2.train``, ``checkpoint``,
    ``distributed``, ``preempt``, ``searcher`` and ``info``; ``close()`` (also run at exit)
    ships what is pending. A second ``init()`` closes the first."""
    global _context, _client, _atexit_registered
    if _context is not None:
        close()
    _context = init_context(
        config=config,
        defaults=defaults,
        unmanaged=unmanaged,
        client=client,
        distributed=distributed,
        checkpoint_storage=checkpoint_storage,
        preempt_mode=preempt_mode,
        tensorboard_mode=tensorboard_mode,
    )
    _client = client
    _publish(_context)
    if not _atexit_registered:
        atexit.register(close)
        _atexit_registered = True


def close() -> None:
    """Close what ``init()`` set up (idempotent): pending metrics reach the master."""
    global _context
    context, _context = _context, None
    _publish(None)
    if context is not None:
        context.close()


def url_reverse_webui_exp_view() -> str:
    """The WebUI address of the running trial's experiment."""
    from determined.experimental import core_v2

    info = core_v2.info
    if info is None or info.trial is None:
        raise errors.FailedPrecondition("core_v2.init() has not set up a trial")
    return f"{info.master_url.rstrip('/')}/det/experiments/{info.trial.experiment_id}"


def _publish(context: core.Context | None) -> None:
    from determined.experimental import core_v2

    core_v2.train = context.train if context else None
    core_v2.checkpoint = context.checkpoint if context else None
    core_v2.distributed = context.distributed if context else None
    core_v2.preempt = context.preempt if context else None
    core_v2.searcher = context.searcher if context else None
    core_v2.info = context.info if context else None


def _unmanaged_refused(
    config: Config | dict[str, Any] | None,
    defaults: Config | None,
    unmanaged: Config | bool | None,
) -> None:
    if config is None and defaults is None and not unmanaged:
        raise errors.InvalidArgument(
            "core_v2.init() outside a trial needs a config (core_v2.Config(name=...)) to "
            "describe the run"
        )
    raise errors.FailedPrecondition(
        "core_v2.init() outside a trial would report an unmanaged run, and pydet's master "
        "does not take unmanaged runs yet; submit the script as an experiment (det "
        "experiment create, or client.create_experiment), or use det.core.init() to run "
        "it here without a master"
    )
