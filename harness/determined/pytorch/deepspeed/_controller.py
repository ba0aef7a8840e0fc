"""The training loop of ``DeepSpeedTrial``: ``DeepSpeedTrialController``.

``Trainer.fit()`` builds one and runs it. It trains batch after batch until ``max_length``
(batches or epochs); every ``reporting_period`` it reports the training metrics averaged
over the batches and workers, and progress; every ``validation_period`` it validates and
every ``checkpoint_period`` it checkpoints; after each of these it asks
``preempt.should_preempt()`` (and ``context.get_stop_requested()``) and, when told to stop,
checkpoints and returns. At the end it validates and checkpoints once more if the last
batch was not. After a validation the ``checkpoint_policy`` may checkpoint too (``all``, or
``best``: when the searcher's metric beat every earlier validation of the experiment).

A batch is ``gradient_accumulation_steps`` micro-batches per worker. The training data is
a ``det.pytorch.DataLoader`` of micro-batches, sharded between the data-parallel replicas
and started exactly where a resumed trial left off (``determined.pytorch._data``), or any
data loader after ``disable_dataset_reproducibility_checks()``, iterated as is.

A checkpoint is Determined's layout, written by every worker into one checkpoint
(``store_path(..., shard=True)``): each engine's DeepSpeed files under ``model{i}/`` (and
DeepSpeed's ``latest``), ``det_state_dict_rank{r}.pth`` per worker (its random state and
callbacks' state), and from the chief ``trial_state.pkl`` (batches and epochs trained, the
last checkpoint and validation, the trial id) and ``load_data.json`` (``trial_type:
DeepSpeedTrial``, the config and hyperparameters). A checkpoint of the same trial resumes
training where it stopped; one of another trial (a warm start) loads only the weights.
"""

from __future__ import annotations

import inspect
import json
import logging
import pathlib
import pickle
from collections.abc import Iterator, Mapping
from typing import Any

import deepspeed
import torch

import determined as det
from determined import core
from determined.pytorch import _checkpoint, _data
from determined.pytorch._env import TrialEnvError
from determined.pytorch._reducer import Partial, check_reducers, combine
from determined.pytorch._units import Batch, Epoch, TrainUnit
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from determined.pytorch.deepspeed._layout import (
    LOAD_DATA_FILE,
    STATE_FILE,
    TRIAL_TYPE,
    _PlainUnpickler,
    _TrialState,
    rank_file,
)
from determined.pytorch.deepspeed._loaders import loader_length, repeat
from determined.pytorch.deepspeed._trial import DeepSpeedTrial

log = logging.getLogger("determined.pytorch")


class _ShouldExit(Exception):
    """Leaves the training loop from inside it (preempted or asked to stop)."""


class DeepSpeedTrialController:
    """Trains one ``DeepSpeedTrial`` with its context (see the module docstring)."""

    def __init__(
        self,
        trial_inst: DeepSpeedTrial,
        context: DeepSpeedTrialContext,
        checkpoint_period: TrainUnit,
        validation_period: TrainUnit,
        reporting_period: TrainUnit,
        smaller_is_better: bool,
        steps_completed: int,
        latest_checkpoint: str | None,
        local_training: bool,
        test_mode: bool,
        searcher_metric_name: str | None,
        checkpoint_policy: str,
        step_zero_validation: bool,
        max_length: TrainUnit,
        global_batch_size: int | None,
        profiling_enabled: bool | None,
    ) -> None:
        if not isinstance(trial_inst, DeepSpeedTrial):
            raise TypeError(
                f"DeepSpeedTrialController needs a DeepSpeedTrial, not {type(trial_inst).__name__}"
            )
        if not context.models:
            raise TrialEnvError(
                "Must have at least one model engine. "
                "This might be caused by not wrapping your model with wrap_model_engine()"
            )
        if checkpoint_policy not in ("best", "all", "none"):
            raise ValueError(
                f"checkpoint_policy must be 'best', 'all' or 'none', not {checkpoint_policy!r}"
            )
        self.trial = trial_inst
        self.context = context
        self.core = context._core
        self.dist = context.distributed
        self.is_chief = self.dist.rank == 0
        self.callbacks = dict(trial_inst.build_callbacks())
        self.checkpoint_period = checkpoint_period
        self.validation_period = validation_period
        self.reporting_period = reporting_period
        self.smaller_is_better = smaller_is_better
        self.start_from_batch = steps_completed
        self.latest_checkpoint = latest_checkpoint
        self.local_training = local_training
        self.test_mode = test_mode
        self.searcher_metric_name = searcher_metric_name
        self.checkpoint_policy = checkpoint_policy
        self.step_zero_validation = step_zero_validation
        self.max_length = max_length
        self.global_batch_size = global_batch_size
        self.profiling_enabled = bool(profiling_enabled)
        self.trial_id = 0 if local_training else context.get_trial_id()
        self.seed = context._trial_seed or 0
        self.reducers = check_reducers(trial_inst.evaluation_reducer())
        self.state = _TrialState(trial_id=self.trial_id)
        self.training_loader: Any = None
        self.validation_loader: Any = None
        self.num_validation_batches = 0
        self._window = Partial()
        self._evaluate_takes_index = "batch_idx" in _parameters(trial_inst.evaluate_batch)

    # The run.

    def run(self) -> None:
        """Build the data, restore the latest checkpoint, and train (see the module)."""
        mpu = self.context._mpu
        log.info("model parallel unit: %s", mpu)
        for cb in self.callbacks.values():
            _call(cb, "on_trial_startup", self.start_from_batch, self.latest_checkpoint)
        try:
            self._build_data()
            if self.latest_checkpoint is not None:
                log.info("Restoring trial from checkpoint %s", self.latest_checkpoint)
                with self.core.checkpoint.restore_path(self.latest_checkpoint) as path:
                    self._load(path, self.latest_checkpoint)
            self._training_iterator = self._training_batches()
            for cb in self.callbacks.values():
                _call(cb, "on_training_start")
            self._run()
        finally:
            for cb in self.callbacks.values():
                _call(cb, "on_trial_shutdown")

    def _run(self) -> None:
        self._set_train_mode(True)
        try:
            if self.step_zero_validation and self.state.batches_trained == 0:
                self._validate()
            length = Batch(1) if self.test_mode else self.max_length
            while self._left(length) > 0:
                self._train_batch()
                train_done = self._left(length) <= 0
                report = train_done or self._reached(self.reporting_period)
                validate = self._reached(self.validation_period)
                checkpoint = self._reached(self.checkpoint_period)
                if report or validate or checkpoint:
                    self._report_training(progress=True)
                if validate and not self._validation_is_current():
                    self._validate()
                if checkpoint and not self._checkpoint_is_current():
                    self._checkpoint()
                if report or validate or checkpoint:
                    self._upload_tensorboard()
                    self._check_stop()
            if not self._validation_is_current():
                self._validate()
            if not self._checkpoint_is_current():
                self._checkpoint()
        except _ShouldExit:
            if not self._checkpoint_is_current():
                self._checkpoint()
        except det.InvalidHP:
            if not self._checkpoint_is_current():
                self._checkpoint()
            raise

    def _left(self, length: TrainUnit) -> int:
        assert isinstance(length.value, int)
        done = (
            self.state.epochs_trained if isinstance(length, Epoch) else self.state.batches_trained
        )
        return length.value - done

    def _reached(self, unit: TrainUnit) -> bool:
        """Whether the batch just trained ends a period of ``unit``."""
        if isinstance(unit, Epoch):
            epoch_end = self.state.batches_trained % self._epoch_len() == 0
            return epoch_end and unit.should_stop(self.state.epochs_trained)
        return unit.should_stop(self.state.batches_trained)

    def _check_stop(self) -> None:
        if self.core.preempt.should_preempt():
            log.info("preempted at batch %d; checkpointing and exiting", self.state.batches_trained)
            raise _ShouldExit()
        stop = self.dist.allgather(self.context.get_stop_requested())
        if any(stop):
            if self.is_chief:
                self.core.train.report_early_exit(core.EarlyExitReason.USER_REQUESTED_STOP)
            raise _ShouldExit()

    # Data.

    def _build_data(self) -> None:
        mpu = self.context._mpu
        micro = self.context.get_num_micro_batches_per_slot()
        epoch_lens: list[int | None]
        val_lens: list[int | None]
        if mpu.should_build_data_loader:
            train = self.trial.build_training_data_loader()
            if isinstance(train, _data.DataLoader):
                self.training_loader = train
            else:
                self._require_unchecked("build_training_data_loader", train)
                self.training_loader = train
                log.warning("Please make sure custom data loader repeats indefinitely.")
            val = self.trial.build_validation_data_loader()
            if isinstance(val, _data.DataLoader):
                self.validation_loader = _data.validation_loader(
                    val,
                    seed=self.seed,
                    rank=mpu.data_parallel_rank,
                    size=mpu.data_parallel_world_size,
                )
            else:
                self._require_unchecked("build_validation_data_loader", val)
                self.validation_loader = val
            micro_per_epoch = self._micro_batches_per_epoch()
            epoch_lens = [micro_per_epoch // micro]
            val_batches = loader_length(self.validation_loader, "validation")
            if self.context.use_pipeline_parallel:
                if val_batches < micro:
                    raise TrialEnvError(
                        "Number of train micro batches in validation data loader should not be "
                        "less than the number of gradient accumulation steps when using "
                        "pipeline parallelism."
                    )
                val_batches //= micro
            val_lens = [val_batches]
        else:
            epoch_lens, val_lens = [None], [None]
        # Every worker trains and validates the same number of batches: the fewest any has.
        gathered = self.dist.allgather((epoch_lens[0], val_lens[0]))
        epochs = [e for e, _ in gathered if e is not None]
        vals = [v for _, v in gathered if v is not None]
        if not epochs:
            raise TrialEnvError(
                "no worker built a training data loader (see the MPU's should_build_data_loader)"
            )
        if min(epochs) < max(epochs):
            log.warning(
                "Training data loader length inconsistent across ranks. "
                "Using the minimum for epoch length."
            )
        if vals and min(vals) < max(vals):
            log.warning(
                "Validation data loader length inconsistent across ranks. "
                "Using the minimum for validation length."
            )
        if min(epochs) < 1:
            raise TrialEnvError(
                "the training data loader has fewer micro-batches per worker than one batch "
                f"needs ({micro}, the gradient accumulation steps); use more data or smaller "
                "batches"
            )
        self.context._epoch_len = min(epochs)
        self.num_validation_batches = min(vals) if vals else 0

    def _require_unchecked(self, fn: str, value: Any) -> None:
        if not self.context._data_repro_checks_disabled:
            raise TrialEnvError(
                f"{fn}() returned an instance of {type(value).__name__}, which is not a "
                "subclass of det.pytorch.DataLoader.  For most non-Iterable DataSets, "
                "det.pytorch.DataLoader is a drop-in replacement for torch.utils.data.DataLoader "
                "but which offers easy and transparent reproducibility in Determined experiments. "
                "It is highly recommended that you use det.pytorch.DataLoader if possible.  If "
                "not, you can disable this check by calling "
                "context.disable_dataset_reproducibility_checks() at some point in your trial's "
                "__init__() method."
            )

    def _micro_batches_per_epoch(self) -> int:
        loader = self.training_loader
        if isinstance(loader, _data.DataLoader):
            mpu = self.context._mpu
            stream = _data.TrainingStream(
                loader,
                seed=self.seed,
                rank=mpu.data_parallel_rank,
                size=mpu.data_parallel_world_size,
                start=0,
            )
            assert stream.batches_per_epoch is not None
            return stream.batches_per_epoch
        return loader_length(loader, "training")

    def _training_batches(self) -> Iterator[Any] | None:
        """This worker's micro-batches from where training stands, forever (or None)."""
        loader = self.training_loader
        if loader is None:
            return None
        if isinstance(loader, _data.DataLoader):
            mpu = self.context._mpu
            start = self.state.batches_trained * self.context.get_num_micro_batches_per_slot()
            return iter(
                _data.TrainingStream(
                    loader,
                    seed=self.seed,
                    rank=mpu.data_parallel_rank,
                    size=mpu.data_parallel_world_size,
                    start=start,
                )
            )
        return repeat(loader)

    def _epoch_len(self) -> int:
        assert self.context._epoch_len, "Training dataloader uninitialized."
        return self.context._epoch_len

    # Training.

    def _train_batch(self) -> None:
        ctx = self.context
        batch_idx = self.state.batches_trained
        epoch_len = self._epoch_len()
        epoch_idx, in_epoch = divmod(batch_idx, epoch_len)
        ctx._current_batch_idx = batch_idx
        if in_epoch == 0:
            for cb in self.callbacks.values():
                _call(cb, "on_training_epoch_start", epoch_idx)
        calls = ctx.get_num_micro_batches_per_slot()
        if ctx.use_pipeline_parallel or ctx._manual_grad_accumulation:
            calls = 1
        for _ in range(calls):
            if ctx.profiler is not None:
                with ctx.profiler:
                    out = self.trial.train_batch(self._training_iterator, epoch_idx, batch_idx)
                ctx.profiler.step()
            else:
                out = self.trial.train_batch(self._training_iterator, epoch_idx, batch_idx)
            if ctx._mpu.should_report_metrics:
                self._window.add(_metrics_of(out, "train_batch"), what="training")
        engine = ctx.models[0]
        if not isinstance(engine, deepspeed.PipelineEngine):
            if engine.micro_steps % ctx.get_num_micro_batches_per_slot() != 0:
                raise TrialEnvError(
                    "did not train for gradient accumulation steps: after batch "
                    f"{batch_idx} the first engine took {engine.micro_steps} micro-steps, not a "
                    f"multiple of {ctx.get_num_micro_batches_per_slot()} (call the engine's "
                    "backward() and step() once per micro-batch)"
                )
        self.state.batches_trained += 1
        if in_epoch == epoch_len - 1:
            for cb in self.callbacks.values():
                _call(cb, "on_training_epoch_end", epoch_idx)
            self.state.epochs_trained += 1

    def _report_training(self, *, progress: bool) -> None:
        reducers = [r for r in self.context.reducers if r.for_training]
        mine = (self._window, [r.reducer.per_slot_reduce() for r in reducers])
        gathered = self.dist.allgather(mine)
        self._window = Partial()
        for r in reducers:
            r.reducer.reset()
        if not self.is_chief:
            return
        metrics: dict[str, Any] = combine([g[0] for g in gathered])
        for j, r in enumerate(reducers):
            metrics.update(r.result([g[1][j] for g in gathered]))
        steps = self.state.batches_trained
        if metrics:
            self.core.train.report_training_metrics(steps_completed=steps, metrics=metrics)
            self._tensorboard_scalars("train", metrics)
        if progress:
            assert isinstance(self.max_length.value, int)
            done = self.state.epochs_trained if isinstance(self.max_length, Epoch) else steps
            self.core.train.report_progress(min(1.0, done / max(1, self.max_length.value)))

    # Validation.

    def _validate(self) -> dict[str, Any]:
        if self.is_chief:
            self.core.train.set_status("validating")
        self.context.reset_reducers()
        self._set_train_mode(False)
        for cb in self.callbacks.values():
            _call(cb, "on_validation_start")
        partial = Partial()
        try:
            with torch.no_grad():
                it = iter(self.validation_loader) if self.validation_loader is not None else None
                for idx in range(self.num_validation_batches):
                    if self._evaluate_takes_index:
                        out = self.trial.evaluate_batch(it, idx)
                    else:
                        out = self.trial.evaluate_batch(it)  # type: ignore[call-arg]  # the one-argument form
                    if self.context._mpu.should_report_metrics:
                        partial.add(
                            _metrics_of(out, "evaluate_batch", loss=False), what="validation"
                        )
                    if self.test_mode:
                        break
            metrics: dict[str, Any] = combine(self.dist.allgather(partial), self.reducers)
            metrics.update(self.context.reduce_metrics(for_training=False))
        finally:
            self._set_train_mode(True)
        if not metrics:
            raise TrialEnvError(
                "validation produced no metrics: the validation data loader is empty or "
                "evaluate_batch() returned empty dicts"
            )
        for cb in self.callbacks.values():
            _call(cb, "on_validation_end", metrics)
        self.state.last_val = self.state.batches_trained
        should_checkpoint = False
        if self.is_chief:
            best_before = (
                self.core.train.get_experiment_best_validation()
                if self.checkpoint_policy == "best"
                else None
            )
            reported = dict(metrics)
            reported.setdefault("batches", self.state.batches_trained)
            reported.setdefault("epochs", self.state.epochs_trained)
            self.core.train.report_validation_metrics(
                steps_completed=self.state.batches_trained, metrics=reported
            )
            self._tensorboard_scalars("val", metrics)
            if self.checkpoint_policy == "all":
                should_checkpoint = True
            elif self.checkpoint_policy == "best" and self.searcher_metric_name:
                value = self._searcher_metric(metrics)
                should_checkpoint = best_before is None or (
                    value < best_before if self.smaller_is_better else value > best_before
                )
        if self.dist.broadcast(should_checkpoint) and not self._checkpoint_is_current():
            self._checkpoint()
        return metrics

    def _searcher_metric(self, metrics: Mapping[str, Any]) -> float:
        name = self.searcher_metric_name
        if name is None or name not in metrics:
            raise TrialEnvError(
                f"Search method is configured to use metric '{name}' but model definition "
                f"returned validation metrics {list(metrics)}. The metric used by the search "
                "method must be one of the validation metrics returned by the model definition."
            )
        return float(metrics[name])

    # Checkpoints.

    def _checkpoint_is_current(self) -> bool:
        return self.state.last_ckpt == self.state.batches_trained

    def _validation_is_current(self) -> bool:
        return self.state.last_val == self.state.batches_trained

    def _checkpoint(self) -> None:
        if self.is_chief:
            self.core.train.set_status("checkpointing")
        self.state.last_ckpt = self.state.batches_trained
        metadata = {
            "determined_version": det.__version__,
            "steps_completed": self.state.batches_trained,
            "framework": f"torch-{torch.__version__}",
            "format": "pickle",
        }
        with self.core.checkpoint.store_path(metadata, shard=True) as (path, storage_id):
            self._save(path)
        for cb in self.callbacks.values():
            _call(cb, "on_checkpoint_upload_end", uuid=storage_id)
        log.info("checkpoint %s saved at batch %d", storage_id, self.state.batches_trained)

    def _save(self, path: pathlib.Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if self.is_chief:
            with (path / STATE_FILE).open("wb") as f:
                pickle.dump(dict(vars(self.state)), f)
            load_data = {
                "trial_type": TRIAL_TYPE,
                "experiment_config": self.context._exp_conf,
                "hparams": self.context._hparams,
            }
            (path / LOAD_DATA_FILE).write_text(json.dumps(load_data))
        own = {
            "callbacks": {
                name: cb.state_dict()
                for name, cb in self.callbacks.items()
                if hasattr(cb, "state_dict")
            },
            "rng_state": _checkpoint.rng_state(),
        }
        torch.save(own, path / rank_file(self.dist.rank))
        self.trial.save(self.context, path)

    def _load(self, path: pathlib.Path, storage_id: str) -> None:
        load_data = path / LOAD_DATA_FILE
        if load_data.is_file():
            try:
                trial_type = json.loads(load_data.read_text()).get("trial_type")
            except (ValueError, AttributeError):
                trial_type = None
            if trial_type != TRIAL_TYPE:
                raise TrialEnvError(
                    f"checkpoint {storage_id} was saved by a {trial_type or 'different'} trial, "
                    f"not a {TRIAL_TYPE}: its {LOAD_DATA_FILE} says trial_type={trial_type!r}"
                )
        own = path / rank_file(self.dist.rank)
        if not (path / rank_file(0)).is_file():
            found = sorted(p.name for p in path.iterdir())[:8]
            raise TrialEnvError(
                f"checkpoint {storage_id} was not saved by a {TRIAL_TYPE}: it has no "
                f"{rank_file(0)} (it holds {', '.join(found) or 'nothing'})"
            )
        try:
            self.trial.load(self.context, path)
        except AssertionError as e:
            raise TrialEnvError(f"checkpoint {storage_id}: {e}") from None
        state: dict[str, Any] = {}
        if own.is_file():
            state = torch.load(own, map_location="cpu", weights_only=True)
        if "rng_state" in state:
            _checkpoint.set_rng_state(state["rng_state"])
        else:
            log.warning("checkpoint %s has no random state for rank %d", storage_id, self.dist.rank)
        saved_callbacks = state.get("callbacks", {})
        for name, cb in self.callbacks.items():
            if name in saved_callbacks and hasattr(cb, "load_state_dict"):
                cb.load_state_dict(saved_callbacks[name])
        state_file = path / STATE_FILE
        if state_file.is_file():
            with state_file.open("rb") as f:
                saved = _PlainUnpickler(f).load()
            if isinstance(saved, dict) and saved.get("trial_id") == self.trial_id:
                self.state = _TrialState(
                    **{k: int(v) for k, v in saved.items() if k in vars(self.state)}
                )
                log.info(
                    "resumed at batch %d from checkpoint %s", self.state.batches_trained, storage_id
                )
                return
        log.info(
            "loaded the weights of checkpoint %s (another trial's); training starts afresh",
            storage_id,
        )

    # TensorBoard and helpers.

    def _tensorboard_scalars(self, group: str, metrics: Mapping[str, Any]) -> None:
        if not self.context.get_enable_tensorboard_logging():
            return
        writer = self.context.get_tensorboard_writer()
        for name, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                writer.add_scalar(f"Determined/{group}_{name}", value, self.state.batches_trained)

    def _upload_tensorboard(self) -> None:
        if not self.context.get_enable_tensorboard_logging():
            return
        self.context._maybe_reset_tbd_writer()
        self.core.train.upload_tensorboard_files()

    def _set_train_mode(self, train: bool) -> None:
        for engine in self.context.models:
            engine.train(train)


def _metrics_of(out: Any, fn: str, *, loss: bool = True) -> Mapping[str, Any]:
    if loss and isinstance(out, torch.Tensor):
        return {"loss": out}
    if not isinstance(out, Mapping):
        raise TrialEnvError(
            f"{fn} must return a dictionary mapping string names to Tensor metrics, got "
            f"{type(out).__name__}"
        )
    return out


def _call(cb: Any, hook: str, *args: Any, **kwargs: Any) -> None:
    fn = getattr(cb, hook, None)
    if callable(fn):
        fn(*args, **kwargs)


def _parameters(fn: Any) -> Mapping[str, Any]:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
