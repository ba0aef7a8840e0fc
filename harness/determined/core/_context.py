"""``core.init()`` and ``core.Context``: the entry point of the Core API.

On the cluster (``det.get_cluster_info()`` is not None) the contexts talk to the master
through one background session; off the cluster they are stand-ins that need no master
(metrics are logged, checkpoints go to a local directory, there is one searcher op and no
preemption), so the same script runs anywhere.
"""

from __future__ import annotations

import atexit
import logging
import os
import pathlib
import tempfile
import threading
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import determined as det
from determined.core import _storage, _tensorboard
from determined.core._checkpoint import CheckpointContext, DummyCheckpointContext
from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._experimental import DummyExperimentalCoreContext, ExperimentalCoreContext
from determined.core._preempt import DummyPreemptContext, PreemptContext, PreemptMode
from determined.core._searcher import DummySearcherContext, SearcherContext, parse_units
from determined.core._tensorboard import TensorboardMode
from determined.core._train import DummyTrainContext, EarlyExitReason, TrainContext

if TYPE_CHECKING:
    from determined.core._rpc import MasterClient

log = logging.getLogger("determined.core")

# Contexts that are open: closed when the script ends without closing them.
_open_contexts: set[Context] = set()
_exit_hook_registered = False


def _close_open_contexts() -> None:
    for context in list(_open_contexts):
        context._close_at_exit()


def _close_at_interpreter_exit(context: Context) -> None:
    """Close ``context`` at exit if the script does not.

    The hook runs among threading's exit hooks, registered after concurrent.futures' own
    (the session's call pool imports it first), so it runs before that one stops every
    thread pool: a plain ``atexit`` hook runs after it, when no call can be made any more,
    and the pending metrics were lost ("cannot schedule new futures after interpreter
    shutdown").
    """
    global _exit_hook_registered
    _open_contexts.add(context)
    if not _exit_hook_registered:
        register = getattr(threading, "_register_atexit", atexit.register)
        register(_close_open_contexts)
        _exit_hook_registered = True


DEFAULT_LOCAL_STORAGE = "checkpoints"


class Context:
    """The Core API: ``.train``, ``.checkpoint``, ``.preempt``, ``.searcher``, ``.distributed``
    and ``.experimental``.

    Build it with ``core.init()`` and use it as a context manager (``with core.init() as
    core_context:``); leaving the block, or ``close()``, waits until every reported metric
    has reached the master and stops the background thread.
    """

    def __init__(
        self,
        *,
        checkpoint: CheckpointContext,
        distributed: DistributedContext,
        preempt: PreemptContext,
        train: TrainContext,
        searcher: SearcherContext,
        info: det.ClusterInfo | None = None,
        _client: MasterClient | None = None,
        experimental: ExperimentalCoreContext | DummyExperimentalCoreContext | None = None,
    ) -> None:
        self.checkpoint = checkpoint
        self.experimental = experimental or DummyExperimentalCoreContext()
        self.distributed = distributed
        self.preempt = preempt
        self.train = train
        self.searcher = searcher
        self.info = info
        self._client = _client
        self._closed = False
        # An unmanaged run's end, told to the master once metrics are shipped: called with
        # whether the run failed (core_v2 sets both).
        self._on_close: Callable[[bool], None] | None = None
        self._failed = False
        if _client is not None:
            # A script that never closes its context still gets its metrics delivered.
            _close_at_interpreter_exit(self)

    def start(self) -> Context:
        """Kept for compatibility: ``core.init()`` has already started everything."""
        return self

    def __enter__(self) -> Context:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: types.TracebackType | None,
    ) -> None:
        invalid_hp = isinstance(exc_val, det.InvalidHP)
        if invalid_hp and self.distributed.rank == 0:
            try:
                self.train.report_early_exit(EarlyExitReason.INVALID_HP)
            except Exception:
                # Exiting 0 now would record the trial as completed; let InvalidHP fail it.
                log.exception("reporting InvalidHP to the master failed")
                invalid_hp = False
        self._failed = self._failed or (exc_val is not None and not invalid_hp)
        if exc_val is None:
            self.close()
        else:
            # The user's exception is the one to see; a failure to close is logged.
            try:
                self.close()
            except Exception:
                log.exception("closing the Core API context failed")
        if invalid_hp:
            log.info("InvalidHP raised: the trial ends as invalid; exiting with status 0")
            raise SystemExit(0)

    def close(self) -> None:
        """Ship pending metrics, stop the background work, release the master connection.

        Idempotent. Raises the failure of a metrics batch that was not raised before.
        """
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            _open_contexts.discard(self)
        try:
            self.train._close()
        finally:
            try:
                self.preempt._close()
                self.distributed.close()
                if self._on_close is not None:
                    self._on_close(self._failed)
            finally:
                if self._client is not None:
                    self._client.close()

    def alert(self, title: str = "", description: str = "", level: str = "INFO") -> None:
        """Send an alert to the CUSTOM webhooks this experiment names in its config's
        ``integrations.webhooks`` (``webhook_id`` or ``webhook_name``).

        ``level`` is one of INFO, WARN, DEBUG or ERROR. Off the cluster, or in a task that
        is not a trial, the alert is only logged. The master queues the delivery; this call
        does not wait for the receivers.
        """
        trial = self.info.trial if self.info is not None else None
        if self._client is None or trial is None:
            log.info("alert (not on a cluster, not sent): [%s] %s: %s", level, title, description)
            return
        self._client.post_alert(trial.trial_id, title=title, description=description, level=level)

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except Exception:
            log.exception("closing the Core API context at exit failed")


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    """Build the Core API context; use it as ``with det.core.init() as core_context:``.

    Arguments:
        distributed: this worker's ``DistributedContext``; needed when the task runs more
            than one worker (e.g. ``DistributedContext.from_torch_distributed()``).
        checkpoint_storage: where checkpoints go, overriding the experiment config: a
            directory path or a ``checkpoint_storage`` dict (``shared_fs`` or ``directory``).
            Off-cluster it defaults to ``./checkpoints``.
        preempt_mode: who calls ``preempt.should_preempt()`` (see ``PreemptMode``).
        tensorboard_mode: whether reported metrics are also written and uploaded for
            TensorBoard (``AUTO``) or only what ``train.upload_tensorboard_files()`` uploads
            (``MANUAL``); see ``TensorboardMode``.
    """
    try:
        preempt_mode = PreemptMode(preempt_mode)
        tensorboard_mode = TensorboardMode(tensorboard_mode)
    except ValueError as e:
        raise ValueError(f"core.init(): {e}") from None
    if distributed is not None and not isinstance(distributed, DistributedContext):
        raise TypeError(
            "core.init(distributed=...) takes a det.core.DistributedContext, not "
            f"{type(distributed).__name__}"
        )
    info = det.get_cluster_info()
    if info is None:
        return _dummy_init(distributed, checkpoint_storage, preempt_mode)
    return _cluster_init(info, distributed, checkpoint_storage, preempt_mode, tensorboard_mode)


def _dummy_init(
    distributed: DistributedContext | None,
    checkpoint_storage: str | dict[str, Any] | None,
    preempt_mode: PreemptMode,
) -> Context:
    distributed = distributed or DummyDistributedContext()
    storage = _storage.from_config(
        DEFAULT_LOCAL_STORAGE if checkpoint_storage is None else checkpoint_storage,
        what="core.init(checkpoint_storage=...)",
    )
    log.info("not running on a cluster: checkpoints are stored in %s", storage.where)
    return Context(
        checkpoint=DummyCheckpointContext(distributed, storage),
        distributed=distributed,
        preempt=DummyPreemptContext(distributed, preempt_mode),
        train=DummyTrainContext(distributed),
        searcher=DummySearcherContext(distributed),
    )


def _cluster_init(
    info: det.ClusterInfo,
    distributed: DistributedContext | None,
    checkpoint_storage: str | dict[str, Any] | None,
    preempt_mode: PreemptMode,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
    *,
    unmanaged: bool = False,
) -> Context:
    if distributed is None:
        _require_single_worker(info)
        distributed = DummyDistributedContext()
    # The generated API is slow to import; only tasks on a cluster need it.
    from determined.core import _metrics, _rpc, _session

    session = _session.Session(info.master_url, info.session_token, cert_file=info.master_cert_file)
    client = _rpc.MasterClient(session, allocation_id=info.allocation_id, owns_session=True)
    try:
        distributed._attach(client)
        # Nothing preempts a run off the cluster: no allocation, no preemption signal.
        preempt = (
            DummyPreemptContext(distributed, preempt_mode)
            if unmanaged
            else PreemptContext(client=client, distributed=distributed, preempt_mode=preempt_mode)
        )
        trial = info.trial
        if trial is None:
            storage = _storage.from_config(
                DEFAULT_LOCAL_STORAGE if checkpoint_storage is None else checkpoint_storage,
                what="core.init(checkpoint_storage=...)",
            )
            return Context(
                checkpoint=DummyCheckpointContext(distributed, storage),
                distributed=distributed,
                preempt=preempt,
                train=DummyTrainContext(distributed),
                searcher=DummySearcherContext(distributed),
                info=info,
                _client=client,
            )
        trial_id, run_id = trial.trial_id, trial.trial_run_id
        shipper = _metrics.MetricShipper(
            session,
            lambda records: client.report_metrics(trial_id, run_id, records),
            lambda progress: client.report_progress(trial_id, progress),
        )
        tensorboard = _tensorboard_files(info, distributed.rank)
        auto = tensorboard_mode is TensorboardMode.AUTO and distributed.rank == 0
        train = TrainContext(
            distributed=distributed,
            trial_id=trial_id,
            run_id=run_id,
            experiment_id=trial.experiment_id,
            shipper=shipper,
            client=client,
            tensorboard=tensorboard,
            metric_events=_tensorboard.MetricEvents(tensorboard.local) if auto else None,
        )
        storage = _storage.from_config(
            _storage_config(trial.config, checkpoint_storage), what="checkpoint_storage"
        )
        checkpoint = CheckpointContext(
            distributed=distributed,
            storage=storage,
            client=client,
            trial_id=trial_id,
            experiment_id=trial.experiment_id,
            task_id=info.task_id,
            allocation_id=info.allocation_id,
            flush_metrics=shipper.flush,
        )
        searcher = SearcherContext(
            client=client,
            distributed=distributed,
            trial_id=trial_id,
            report_progress=shipper.put_progress,
            flush_metrics=shipper.flush,
            units=parse_units(trial.config),
        )
    except BaseException:
        client.close()
        raise
    return Context(
        checkpoint=checkpoint,
        distributed=distributed,
        preempt=preempt,
        train=train,
        searcher=searcher,
        info=info,
        _client=client,
        experimental=ExperimentalCoreContext(client, trial_id),
    )


def _require_single_worker(info: det.ClusterInfo) -> None:
    hint = (
        "pass core.init(distributed=det.core.DistributedContext.from_torch_distributed()) "
        "(or from_deepspeed() / from_horovod(hvd), or DistributedContext(rank=..., ...))"
    )
    if len(info.container_addrs) > 1:
        raise ValueError(
            f"this task runs on {len(info.container_addrs)} containers, so core.init() needs "
            f"a DistributedContext; {hint}"
        )
    world = os.environ.get("WORLD_SIZE", "")
    if world.isdigit() and int(world) > 1:
        raise ValueError(
            f"this process is one of WORLD_SIZE={world} workers, so core.init() needs a "
            f"DistributedContext; {hint}"
        )


def _tensorboard_files(info: det.ClusterInfo, rank: int) -> _tensorboard.TensorboardFiles:
    """This worker's TensorBoard directory, and the trial's place in its TensorBoard
    storage (a directory, or a key prefix in S3)."""
    trial = info.trial
    assert trial is not None
    local = pathlib.Path(tempfile.gettempdir()) / f"tensorboard-{info.allocation_id}-rank{rank}"
    local.mkdir(parents=True, exist_ok=True)
    dest = None
    config = _tensorboard.storage_config(trial.config)
    if config is not None:
        storage = _storage.from_config(config, what="tensorboard_storage")
        path = _tensorboard.sync_path(info.cluster_id, trial.experiment_id, trial.trial_id)
        if isinstance(storage, _storage.Storage):
            dest = _tensorboard.Destination(directory=storage.base / path)
        else:
            key = f"{storage.prefix}/{path}" if storage.prefix else path
            dest = _tensorboard.Destination(s3=storage, key=key)
    return _tensorboard.TensorboardFiles(local, dest, rank)


def _storage_config(
    config: dict[str, Any], override: str | dict[str, Any] | None
) -> str | dict[str, Any]:
    if override is not None:
        return override
    value = config.get("checkpoint_storage")
    if value is None:
        raise ValueError(
            "the experiment config has no checkpoint_storage, and core.init() got no "
            "checkpoint_storage argument; set one of them"
        )
    if not isinstance(value, (str, dict)):
        raise TypeError(f"checkpoint_storage in the experiment config is {value!r}")
    return value
