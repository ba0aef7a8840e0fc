"""``core_v2``: the Core API as module-level objects, set up by one ``init()`` call.

Inside a trial on the cluster, ``init()`` is ``det.core.init()`` with its contexts published
as ``core_v2.train``, ``core_v2.checkpoint`` and the rest, so a script can report without
passing a context around. Outside the cluster the config describes an "unmanaged" run: the
script creates an experiment and a trial on the master (``DET_MASTER``, as the logged-in
user) and reports into them (``_unmanaged``); inside a trial the config is ignored, as in
Determined.
"""

from __future__ import annotations

import atexit
import dataclasses
import sys
import types
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

    Outside a trial it reports an unmanaged run into a new experiment on the master.

    Raises:
        errors.InvalidArgument: outside a trial without a config to describe the run.
    """
    info = det.get_cluster_info()
    if info is None or info.task_type != "TRIAL":
        from determined.experimental.core_v2 import _unmanaged

        return _unmanaged.init(
            _merged_config(config, defaults, unmanaged),
            client=client,
            distributed=distributed,
            checkpoint_storage=checkpoint_storage,
            preempt_mode=core.PreemptMode(preempt_mode),
        )
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
        _watch_for_failure()
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


def _merged_config(
    config: Config | dict[str, Any] | None,
    defaults: Config | None,
    unmanaged: Config | bool | None,
) -> Config:
    """The one config of an unmanaged run, from Determined's three ways of passing it."""
    if isinstance(config, dict):
        known = {f.name for f in dataclasses.fields(Config)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise errors.InvalidArgument(
                f"core_v2.init(config=...): unknown key {unknown[0]!r} (known: "
                f"{', '.join(sorted(known))})"
            )
        config = Config(**config)
    extra = unmanaged if isinstance(unmanaged, Config) else None
    chosen = config or defaults or extra
    if chosen is None:
        raise errors.InvalidArgument(
            "core_v2.init() outside a trial needs a config (core_v2.Config(name=...)) to "
            "describe the run"
        )
    if extra is not None and chosen is not extra:
        chosen = dataclasses.replace(
            chosen,
            project=chosen.project or extra.project,
            workspace=chosen.workspace or extra.workspace,
            external_experiment_id=chosen.external_experiment_id or extra.external_experiment_id,
            external_trial_id=chosen.external_trial_id or extra.external_trial_id,
        )
    return chosen


def _watch_for_failure() -> None:
    """A script that dies of an exception ends its unmanaged trial ERROR: the exception
    passes through sys.excepthook before close() runs at exit."""
    previous = sys.excepthook

    def hook(
        kind: type[BaseException], value: BaseException, tb: types.TracebackType | None
    ) -> None:
        if _context is not None:
            _context._failed = True
        previous(kind, value, tb)

    sys.excepthook = hook
