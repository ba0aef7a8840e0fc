"""``PyTorchTrialContext``: what a ``PyTorchTrial`` uses to set itself up and train."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from determined.pytorch import _data
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import MetricReducer, WrappedReducer, wrap

if TYPE_CHECKING:
    from determined import core
    from determined.pytorch._env import TrialEnv

log = logging.getLogger("determined.pytorch")


class PyTorchTrialContext:
    """Hyperparameters, config and the distributed setup, and the wrappers for training.

    Wrap every model, optimizer and LR scheduler in ``__init__`` (``wrap_model``,
    ``wrap_optimizer``, ``wrap_lr_scheduler``): wrapped objects are moved to ``device``,
    synchronized between workers, and saved in and restored from checkpoints. In
    ``train_batch`` use ``backward(loss)`` and ``step_optimizer(optimizer)``.

    Attributes:
        distributed: the Core API's ``DistributedContext`` (rank, size, collectives).
        device: the ``torch.device`` this worker trains on (``cuda:LOCAL_RANK`` or ``cpu``).
    """

    def __init__(
        self,
        *,
        core_context: core.Context,
        trial_env: TrialEnv,
        device: Any,
    ) -> None:
        self._core = core_context
        self._env = trial_env
        self.distributed = core_context.distributed
        self.device = device
        self.models: list[Any] = []
        self.optimizers: list[Any] = []
        self.lr_schedulers: list[LRScheduler] = []
        self.reducers: list[WrappedReducer] = []
        self._current_batch = 0
        self._batches_per_epoch: int | None = None
        self._stop_requested = False
        self._per_slot_batch_size, self._global_batch_size = self._batch_sizes()

    # The trial's parameters.

    def get_hparams(self) -> dict[str, Any]:
        """All hyperparameters of this trial."""
        return copy.deepcopy(self._env.hparams)

    def get_hparam(self, name: str) -> Any:
        """The hyperparameter ``name``; a ``KeyError`` naming the known ones if missing."""
        try:
            return self._env.hparams[name]
        except KeyError:
            known = ", ".join(sorted(self._env.hparams)) or "none"
            raise KeyError(
                f"hyperparameter {name!r} is not defined for this trial (known: {known})"
            ) from None

    def get_experiment_config(self) -> dict[str, Any]:
        """The experiment config (with defaults filled in on a cluster)."""
        return copy.deepcopy(self._env.config)

    def get_data_config(self) -> dict[str, Any]:
        """The experiment config's ``data`` section."""
        return copy.deepcopy(self._env.config.get("data") or {})

    def get_trial_id(self) -> int:
        """This trial's id (0 off-cluster)."""
        return self._env.trial_id

    def get_experiment_id(self) -> int:
        """This trial's experiment id (0 off-cluster)."""
        return self._env.experiment_id

    def get_trial_seed(self) -> int:
        """The seed of this trial; the harness seeds torch, numpy and random with it."""
        return self._env.trial_seed

    def get_per_slot_batch_size(self) -> int:
        """The batch size of one worker: the ``global_batch_size`` hyperparameter divided by
        the number of workers."""
        self._require_batch_size()
        return self._per_slot_batch_size

    def get_global_batch_size(self) -> int:
        """The batch size of one step of all workers together (per-slot size x workers)."""
        return self._require_batch_size()

    # Where training is.

    def current_train_batch(self) -> int:
        """The index of the current (or next) training batch among all of the trial's."""
        return self._current_batch

    def current_train_epoch(self) -> int:
        """The index of the current (or next) training epoch."""
        if not self._batches_per_epoch:
            return 0
        return self._current_batch // self._batches_per_epoch

    def is_epoch_start(self) -> bool:
        """Whether the current training batch is the first of an epoch."""
        if not self._batches_per_epoch:
            return self._current_batch == 0
        return self._current_batch % self._batches_per_epoch == 0

    def is_epoch_end(self) -> bool:
        """Whether the current training batch is the last of an epoch."""
        if not self._batches_per_epoch:
            return False
        return (self._current_batch + 1) % self._batches_per_epoch == 0

    def get_stop_requested(self) -> bool:
        """Whether ``set_stop_requested(True)`` was called."""
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask the trainer to end the trial early: it validates, checkpoints and exits after
        the current batch, reporting the stop to the searcher."""
        if not isinstance(stop_requested, bool):
            raise TypeError(f"set_stop_requested() takes a bool, not {stop_requested!r}")
        self._stop_requested = stop_requested

    # Wrappers.

    def to_device(self, data: _data.TorchData) -> _data.TorchData:
        """``data`` with every tensor moved to this worker's device."""
        return _data.to_device(data, self.device)

    def wrap_model(self, model: Any) -> Any:
        """Register ``model``: move it to ``device`` and, with more than one worker, wrap it in
        ``DistributedDataParallel``. Use (and call) the returned model."""
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"wrap_model() takes a torch.nn.Module, not {type(model).__name__}")
        model = model.to(self.device)
        if self.distributed.size > 1:
            if not torch.distributed.is_initialized():
                raise RuntimeError(
                    "wrap_model() with more than one worker needs torch.distributed to be "
                    "initialized; run the trial with python3 -m determined.exec.harness, which "
                    "does it"
                )
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
        self.models.append(model)
        return model

    def wrap_optimizer(self, optimizer: Any, backward_passes_per_step: int = 1) -> Any:
        """Register ``optimizer`` (its state is checkpointed); returns it.

        ``backward_passes_per_step`` other than 1 is not supported.
        """
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"wrap_optimizer() takes a torch.optim.Optimizer, not {type(optimizer).__name__}"
            )
        if backward_passes_per_step != 1:
            raise ValueError("backward_passes_per_step other than 1 is not supported")
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(
        self,
        lr_scheduler: Any,
        step_mode: LRScheduler.StepMode,
        frequency: int = 1,
    ) -> Any:
        """Register a torch LR scheduler and when the trainer steps it; returns it."""
        wrapped = LRScheduler(lr_scheduler, step_mode, frequency)
        optimizer = getattr(lr_scheduler, "optimizer", None)
        if optimizer is not None and not any(optimizer is o for o in self.optimizers):
            log.warning(
                "wrap_lr_scheduler(): the scheduler's optimizer was not passed to "
                "wrap_optimizer(), so its state is not checkpointed"
            )
        self.lr_schedulers.append(wrapped)
        return lr_scheduler

    def wrap_reducer(
        self,
        reducer: MetricReducer | Callable[[list[Any]], Any],
        name: str | None = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> Any:
        """Register a custom metric reduction; returns the reducer to feed.

        ``reducer`` is a ``MetricReducer``, or a function of the list of every value passed
        to the returned object's ``update(value)`` (across all workers). Its result is the
        metric ``name``; without a name it must be a dict of metric names to values.
        """
        wrapped = wrap(reducer, name=name, for_training=for_training, for_validation=for_validation)
        self.reducers.append(wrapped)
        return wrapped.reducer

    def backward(
        self,
        loss: Any,
        gradient: Any = None,
        retain_graph: bool = False,
        create_graph: bool = False,
    ) -> None:
        """Compute the gradients of ``loss`` (averaged over workers by the wrapped models)."""
        loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def step_optimizer(
        self,
        optimizer: Any,
        clip_grads: Callable[[Iterator[Any]], None] | None = None,
        auto_zero_grads: bool = True,
    ) -> None:
        """Step a wrapped optimizer, after ``clip_grads(params)`` if given; then zero its
        gradients (unless ``auto_zero_grads=False``) and step the LR schedulers that follow
        its steps (``STEP_EVERY_OPTIMIZER_STEP``)."""
        if not any(optimizer is o for o in self.optimizers):
            raise ValueError("step_optimizer() got an optimizer not passed to wrap_optimizer()")
        if clip_grads is not None:
            clip_grads(
                p for group in optimizer.param_groups for p in group["params"] if p.grad is not None
            )
        optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad()
        for scheduler in self.lr_schedulers:
            scheduler._after_optimizer_step(optimizer)

    # Internals used by the trainer.

    def _batch_sizes(self) -> tuple[int, int]:
        raw = self._env.hparams.get("global_batch_size")
        if raw is None:
            # Trials that never ask for a batch size still run; asking is the error.
            return 0, 0
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise ValueError(
                f"the hyperparameter global_batch_size must be a positive integer, not {raw!r}"
            )
        size = self.distributed.size
        if raw < size:
            raise ValueError(
                f"global_batch_size={raw} is smaller than the number of workers ({size}); "
                "every worker needs at least one record per batch"
            )
        per_slot = raw // size
        if per_slot * size != raw:
            log.warning(
                "global_batch_size=%d is not divisible by the %d workers: each trains on %d "
                "records per batch, %d in all",
                raw,
                size,
                per_slot,
                per_slot * size,
            )
        return per_slot, per_slot * size

    def _require_batch_size(self) -> int:
        if not self._global_batch_size:
            raise ValueError(
                "this trial needs the hyperparameter global_batch_size (e.g. "
                "hyperparameters: {global_batch_size: 32})"
            )
        return self._global_batch_size

    def _unwrapped_models(self) -> list[Any]:
        return [getattr(m, "module", m) if _is_ddp(m) else m for m in self.models]


def _is_ddp(model: Any) -> bool:
    return isinstance(model, torch.nn.parallel.DistributedDataParallel)
