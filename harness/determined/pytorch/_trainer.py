"""The training loop of ``PyTorchTrial``, driven by the Core API.

``run(TrialClass)`` is what ``python3 -m determined.exec.harness module:Class`` does in every
worker: it joins ``torch.distributed`` when ``WORLD_SIZE > 1``, opens the Core API
(``det.core.init``) and hands both to a ``TrialController``, which:

- seeds torch, numpy and ``random`` with the trial seed, builds the trial, and restores the
  latest checkpoint if the trial has one;
- for each searcher operation, trains until ``op.length`` (in the unit of
  ``searcher.max_length``, converted to batches), validates, checkpoints, and (on the chief)
  calls ``op.report_completed`` with the ``searcher.metric`` validation metric;
- every ``scheduling_unit`` batches, and at the end of each op, reports the training metrics
  averaged over the batches and workers, reports progress, and asks
  ``core_context.preempt.should_preempt()``: when told to stop it checkpoints and returns;
- validates every ``min_validation_period`` and checkpoints every ``min_checkpoint_period``
  (and validates first with ``perform_initial_validation``).

Off the cluster the Core API's stand-ins are used and the one searcher operation has the
length of the config's ``searcher.max_length``.

Test mode (``DET_TEST_MODE=1``): a quick check that the trial's code runs. The trainer
trains ``TEST_MODE_BATCHES`` (2) batches (fewer if the op is shorter), validates on at most
2 batches per worker, reports, checkpoints once, completes the first searcher operation
and returns; initial and periodic validation and periodic checkpoints are skipped.
"""

from __future__ import annotations

import enum
import inspect
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from determined import core
from determined.core import DummySearcherContext, EarlyExitReason, SearcherContext
from determined.pytorch import _checkpoint, _data
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._env import TrialEnv, TrialEnvError
from determined.pytorch._reducer import Partial, check_reducers, combine, scalar
from determined.pytorch._schedule import Schedule
from determined.pytorch._trial import PyTorchTrial, evaluates_full_dataset

log = logging.getLogger("determined.pytorch")

TEST_MODE_BATCHES = 2


class Outcome(enum.Enum):
    """How ``TrialController.run()`` ended."""

    COMPLETED = "completed"
    """Every searcher operation was done (or test mode finished)."""
    PREEMPTED = "preempted"
    """The task was asked to stop; a checkpoint was saved to resume from."""
    STOPPED = "stopped"
    """The trial called ``context.set_stop_requested(True)``."""


def default_device(distributed: core.DistributedContext) -> Any:
    """``cuda:LOCAL_RANK`` when CUDA is available, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", distributed.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def run(trial_class: type[PyTorchTrial], *, trial_env: TrialEnv | None = None) -> Outcome:
    """Train ``trial_class`` in this worker; what ``python3 -m determined.exec.harness`` runs.

    With ``WORLD_SIZE > 1`` (set by ``determined.launch.torch_distributed``) this worker
    joins ``torch.distributed`` (NCCL with CUDA, else gloo) and the Core API's distributed
    context. Off the cluster, the config's ``checkpoint_storage`` (if any) is used, else
    ``./checkpoints``.
    """
    env = TrialEnv.from_env() if trial_env is None else trial_env
    # torchrun's variable; the same one DistributedContext.from_torch_distributed() reads.
    world = int(os.environ.get("WORLD_SIZE") or "1")
    distributed = core.DistributedContext.from_torch_distributed() if world > 1 else None
    joined = False
    if distributed is not None and not torch.distributed.is_initialized():
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(default_device(distributed))
        torch.distributed.init_process_group(backend="nccl" if cuda else "gloo")
        joined = True
    storage = None if env.on_cluster else env.config.get("checkpoint_storage")
    try:
        with core.init(distributed=distributed, checkpoint_storage=storage) as core_context:
            return TrialController(trial_class, core_context, env).run()
    finally:
        if joined:
            torch.distributed.destroy_process_group()


class TrialController:
    """Trains one ``PyTorchTrial`` with a Core API context (see the module docstring).

    Building it seeds the random generators and builds the trial and its data loaders;
    ``run()`` restores the latest checkpoint (``trial_env.latest_checkpoint``) and trains.
    """

    def __init__(
        self,
        trial_class: type[PyTorchTrial],
        core_context: core.Context,
        trial_env: TrialEnv,
        *,
        device: Any = None,
    ) -> None:
        if not (isinstance(trial_class, type) and issubclass(trial_class, PyTorchTrial)):
            raise TypeError(f"{trial_class!r} is not a subclass of pytorch.PyTorchTrial")
        self._core = core_context
        self._env = trial_env
        self._dist = core_context.distributed
        self._chief = self._dist.rank == 0
        self._schedule = Schedule.from_config(trial_env.config)
        self._test_mode = trial_env.test_mode
        self._seed = trial_env.trial_seed
        _checkpoint.seed_everything(self._seed)
        self.context = PyTorchTrialContext(
            core_context=core_context,
            trial_env=trial_env,
            device=default_device(self._dist) if device is None else device,
        )
        self.trial = trial_class(self.context)
        self._full_dataset = evaluates_full_dataset(self.trial)
        self._evaluate_takes_index = _takes_batch_idx(self.trial)
        self._reducers = check_reducers(self.trial.evaluation_reducer())
        self._train_source = _loader(self.trial.build_training_data_loader(), "training")
        self._val_source = _loader(self.trial.build_validation_data_loader(), "validation")
        self._batches = 0
        self._last_validation: int | None = None
        self._last_metrics: dict[str, Any] = {}
        self._last_checkpoint: int | None = None
        self._batches_per_epoch: int | None = None

    @property
    def batches_trained(self) -> int:
        """Global batches trained so far (the ``steps_completed`` of reports)."""
        return self._batches

    def run(self) -> Outcome:
        """Restore, then train for every searcher operation; see ``Outcome``."""
        restored = False
        if self._env.latest_checkpoint:
            self._restore(self._env.latest_checkpoint)
            restored = True
        stream = _data.TrainingStream(
            self._train_source,
            seed=self._seed,
            rank=self._dist.rank,
            size=self._dist.size,
            start=self._batches,
        )
        self._batches_per_epoch = stream.batches_per_epoch
        self.context._batches_per_epoch = stream.batches_per_epoch
        self.context._current_batch = self._batches
        batches = iter(stream)
        if self._schedule.perform_initial_validation and not restored and not self._test_mode:
            self._validate()
        for op in self._searcher().operations():
            target = self._to_batches(self._schedule.op_length(op.length))
            if self._test_mode:
                target = min(target, self._batches + TEST_MODE_BATCHES)
            outcome = self._train(batches, op, target)
            if outcome is not None:
                return outcome
            metrics = self._validate() if self._last_validation != self._batches else None
            metrics = self._last_metrics if metrics is None else metrics
            self._checkpoint_if_new()
            if self._chief:
                op.report_completed(self._searcher_metric(metrics))
            if self._test_mode:
                log.info(
                    "test mode: trained %d batches, validated and checkpointed; stopping",
                    self._batches,
                )
                return Outcome.COMPLETED
            if self._core.preempt.should_preempt():
                log.info("preempted after completing a searcher operation")
                return Outcome.PREEMPTED
        return Outcome.COMPLETED

    # Training.

    def _train(
        self, batches: Iterator[Any], op: core.SearcherOperation, target: int
    ) -> Outcome | None:
        if self._batches >= target:
            return None
        unit = self._schedule.scheduling_unit
        window = _Window()
        self._reset_reducers(training=True)
        self._set_train_mode(True)
        while self._batches < target:
            idx = self._batches
            epoch_idx = idx // self._batches_per_epoch if self._batches_per_epoch else 0
            self.context._current_batch = idx
            batch = self.context.to_device(next(batches))
            out = self.trial.train_batch(batch, epoch_idx, idx)
            window.add(_training_metrics(out))
            epoch_end = bool(self._batches_per_epoch) and self.context.is_epoch_end()
            for scheduler in self.context.lr_schedulers:
                scheduler._after_batch(idx, epoch_end=epoch_end, epoch_idx=epoch_idx)
            self._batches += 1
            self.context._current_batch = self._batches
            at_unit = self._batches % unit == 0
            stop = False
            if at_unit or self._batches == target:
                stop = self._report_training(window, op, target)
                window = _Window()
            if not self._test_mode:
                if self._due(self._last_validation, self._schedule.min_validation_period):
                    self._validate()
                if self._due(self._last_checkpoint, self._schedule.min_checkpoint_period):
                    self._checkpoint()
            if stop:
                return self._stop()
            if at_unit and self._core.preempt.should_preempt():
                self._checkpoint_if_new()
                log.info("preempted at batch %d; checkpointed, exiting", self._batches)
                return Outcome.PREEMPTED
        return None

    def _report_training(self, window: _Window, op: core.SearcherOperation, target: int) -> bool:
        """Report the window's metrics (all workers take part); whether a stop was asked."""
        reducers = [r for r in self.context.reducers if r.for_training]
        mine = (window.partial(), [r.reducer.per_slot_reduce() for r in reducers])
        gathered = self._dist.allgather((*mine, self.context.get_stop_requested()))
        for r in reducers:
            r.reducer.reset()
        if self._chief:
            metrics: dict[str, Any] = combine([g[0] for g in gathered])
            for j, r in enumerate(reducers):
                metrics.update(r.result([g[1][j] for g in gathered]))
            if metrics:
                self._core.train.report_training_metrics(
                    steps_completed=self._batches, metrics=metrics
                )
            op.report_progress(op.length * min(1.0, self._batches / target))
        return any(g[2] for g in gathered)

    def _stop(self) -> Outcome:
        log.info("the trial asked to stop (set_stop_requested) at batch %d", self._batches)
        if self._last_validation != self._batches:
            self._validate()
        self._checkpoint_if_new()
        if self._chief:
            self._core.train.report_early_exit(EarlyExitReason.USER_REQUESTED_STOP)
        return Outcome.STOPPED

    # Validation.

    def _validate(self) -> dict[str, Any]:
        self._set_train_mode(False)
        try:
            with torch.no_grad():
                if self._full_dataset:
                    metrics = self._evaluate_full()
                else:
                    metrics = self._evaluate_batches()
        finally:
            self._set_train_mode(True)
        self._last_validation = self._batches
        self._last_metrics = metrics
        if self._chief:
            self._core.train.report_validation_metrics(
                steps_completed=self._batches, metrics=metrics
            )
        return metrics

    def _evaluate_batches(self) -> dict[str, Any]:
        loader = _data.validation_loader(
            self._val_source, seed=self._seed, rank=self._dist.rank, size=self._dist.size
        )
        reducers = [r for r in self.context.reducers if r.for_validation]
        self._reset_reducers(training=False)
        partial = Partial()
        for idx, batch in enumerate(loader):
            if self._test_mode and idx >= TEST_MODE_BATCHES:
                break
            batch = self.context.to_device(batch)
            if self._evaluate_takes_index:
                out = self.trial.evaluate_batch(batch, idx)  # type: ignore[call-arg]  # the two-argument form
            else:
                out = self.trial.evaluate_batch(batch)
            if not isinstance(out, Mapping):
                raise TypeError(
                    f"evaluate_batch() must return a dict of metrics, not {type(out).__name__}"
                )
            partial.add(out, what="validation")
        gathered = self._dist.allgather((partial, [r.reducer.per_slot_reduce() for r in reducers]))
        metrics: dict[str, Any] = combine([g[0] for g in gathered], self._reducers)
        for j, r in enumerate(reducers):
            metrics.update(r.result([g[1][j] for g in gathered]))
        if not metrics:
            raise ValueError(
                "validation produced no metrics: the validation data loader is empty or "
                "evaluate_batch() returned empty dicts"
            )
        return metrics

    def _evaluate_full(self) -> dict[str, Any]:
        if not self._chief:
            return {}
        loader = _data.full_loader(self._val_source, seed=self._seed)
        out = self.trial.evaluate_full_dataset(loader)
        if not isinstance(out, Mapping) or not out:
            raise TypeError(
                f"evaluate_full_dataset() must return a non-empty dict of metrics, not {out!r}"
            )
        return dict(out)

    def _searcher_metric(self, metrics: Mapping[str, Any]) -> float:
        name = self._schedule.searcher_metric
        if name is None:
            # Only possible off-cluster with no config: the stand-in just logs the value.
            return float("nan")
        if name not in metrics:
            raise ValueError(
                f"the searcher's metric {name!r} (searcher.metric) is not among the validation "
                f"metrics: {', '.join(sorted(metrics)) or 'none'}"
            )
        return float(metrics[name])

    # Checkpoints.

    def _checkpoint_if_new(self) -> None:
        if self._last_checkpoint != self._batches:
            self._checkpoint()

    def _checkpoint(self) -> None:
        # Every worker's random state goes into the checkpoint, so all resume exactly.
        rng_states = self._dist.gather(_checkpoint.rng_state())
        self._last_checkpoint = self._batches
        if not self._chief:
            return
        assert rng_states is not None
        ctx = self.context
        state = {
            "format": _checkpoint.FORMAT,
            "models_state_dict": [m.state_dict() for m in ctx._unwrapped_models()],
            "optimizers_state_dict": [o.state_dict() for o in ctx.optimizers],
            "lr_schedulers_state_dict": [s.state_dict() for s in ctx.lr_schedulers],
            "rng_states": rng_states,
            "trial_state": {
                "batches_trained": self._batches,
                "epochs_trained": (
                    self._batches // self._batches_per_epoch if self._batches_per_epoch else 0
                ),
                "last_validation_batch": self._last_validation,
                "last_validation_metrics": dict(self._last_metrics),
                "lr_scheduler_optimizer_steps": [s._optimizer_steps for s in ctx.lr_schedulers],
                "trial_id": self._env.trial_id,
            },
        }
        metadata = {
            "steps_completed": self._batches,
            "framework": f"torch-{torch.__version__}",
            "format": _checkpoint.FORMAT,
        }
        with self._core.checkpoint.store_path(metadata) as (path, storage_id):
            torch.save(state, path / _checkpoint.STATE_FILE)
        log.info("checkpoint %s saved at batch %d", storage_id, self._batches)

    def _restore(self, storage_id: str) -> None:
        with self._core.checkpoint.restore_path(storage_id) as path:
            file = path / _checkpoint.STATE_FILE
            if not file.is_file():
                raise TrialEnvError(
                    f"checkpoint {storage_id} has no {_checkpoint.STATE_FILE}: it was not saved "
                    "by a PyTorchTrial"
                )
            state = torch.load(file, map_location=self.context.device, weights_only=True)
        ctx = self.context
        _load_all("models", ctx._unwrapped_models(), state["models_state_dict"], storage_id)
        _load_all("optimizers", ctx.optimizers, state["optimizers_state_dict"], storage_id)
        _load_all("LR schedulers", ctx.lr_schedulers, state["lr_schedulers_state_dict"], storage_id)
        trial_state = state["trial_state"]
        for scheduler, steps in zip(
            ctx.lr_schedulers, trial_state["lr_scheduler_optimizer_steps"], strict=True
        ):
            scheduler._optimizer_steps = int(steps)
        self._batches = int(trial_state["batches_trained"])
        self._last_validation = trial_state["last_validation_batch"]
        self._last_metrics = dict(trial_state["last_validation_metrics"])
        self._last_checkpoint = self._batches
        rng_states = state["rng_states"]
        if self._dist.rank < len(rng_states):
            _checkpoint.set_rng_state(rng_states[self._dist.rank])
        else:
            # More workers than when saved: a fresh, still deterministic, state.
            _checkpoint.seed_everything(_data.mix_seed(self._seed, self._dist.rank, self._batches))
        log.info("resumed from checkpoint %s at batch %d", storage_id, self._batches)

    # Helpers.

    def _searcher(self) -> SearcherContext:
        searcher = self._core.searcher
        if type(searcher) is not DummySearcherContext:
            return searcher
        # Off-cluster: one operation, as long as the config's searcher.max_length.
        max_length = self._schedule.max_length
        if max_length is None:
            if self._test_mode:
                return DummySearcherContext(self._dist, length=TEST_MODE_BATCHES)
            raise TrialEnvError(
                "off-cluster, the length to train is the config's searcher.max_length: set "
                "DET_EXPERIMENT_CONFIG to a config that has one (e.g. "
                "DET_EXPERIMENT_CONFIG=const.yaml), or use DET_TEST_MODE=1"
            )
        if max_length.value < 1:
            raise TrialEnvError("searcher.max_length is 0: there is nothing to train")
        return DummySearcherContext(self._dist, length=max_length.value)

    def _to_batches(self, length: Any) -> int:
        return self._schedule.to_batches(
            length,
            global_batch_size=self.context._global_batch_size,
            batches_per_epoch=self._batches_per_epoch,
        )

    def _due(self, last: int | None, period: Any) -> bool:
        if not period.value:
            return False
        every = self._to_batches(period)
        return every > 0 and self._batches - (last or 0) >= every

    def _set_train_mode(self, train: bool) -> None:
        for model in self.context.models:
            model.train(train)

    def _reset_reducers(self, *, training: bool) -> None:
        for r in self.context.reducers:
            if r.for_training if training else r.for_validation:
                r.reducer.reset()


class _Window:
    """Training metrics since the last report, kept on the device until reported."""

    def __init__(self) -> None:
        self._sums: dict[str, Any] = {}
        self._counts: dict[str, int] = {}

    def add(self, metrics: Mapping[str, Any]) -> None:
        for name, value in metrics.items():
            if isinstance(value, torch.Tensor):
                if value.numel() != 1:
                    raise TypeError(
                        f"training metric {name!r} must be a scalar, not a tensor of shape "
                        f"{tuple(value.shape)}"
                    )
                value = value.detach().reshape(())
            self._sums[name] = self._sums.get(name, 0.0) + value
            self._counts[name] = self._counts.get(name, 0) + 1

    def partial(self) -> Partial:
        """The window as a ``Partial`` (sums and counts), for averaging over workers."""
        out = Partial()
        for name, total in self._sums.items():
            value = scalar(total, what=f"training metric {name!r}")
            out.sums[name] = value
            out.counts[name] = self._counts[name]
        return out


def _training_metrics(out: Any) -> Mapping[str, Any]:
    if isinstance(out, torch.Tensor):
        return {"loss": out}
    if isinstance(out, Mapping):
        return out
    raise TypeError(
        f"train_batch() must return a dict of metrics or a loss tensor, not {type(out).__name__}"
    )


def _loader(value: Any, what: str) -> Any:
    if not _data.is_loader(value):
        raise TypeError(
            f"build_{what}_data_loader() must return a determined.pytorch.DataLoader or a "
            f"torch.utils.data.DataLoader, not {type(value).__name__}"
        )
    return value


def _load_all(what: str, objects: list[Any], states: list[Any], storage_id: str) -> None:
    if len(objects) != len(states):
        raise TrialEnvError(
            f"checkpoint {storage_id} holds {len(states)} {what}, but the trial wraps "
            f"{len(objects)}; it was saved by a different trial definition"
        )
    for obj, state in zip(objects, states, strict=True):
        obj.load_state_dict(state)


def _takes_batch_idx(trial: PyTorchTrial) -> bool:
    """Whether ``evaluate_batch`` has Determined's two-argument form ``(batch, batch_idx)``."""
    try:
        params = inspect.signature(trial.evaluate_batch).parameters
    except (TypeError, ValueError):
        return False
    return "batch_idx" in params
