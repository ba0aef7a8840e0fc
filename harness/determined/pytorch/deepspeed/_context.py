"""``DeepSpeedTrialContext``: what a ``DeepSpeedTrial`` uses to set itself up and train.

Also ``overwrite_deepspeed_config``, which merges experiment values (hyperparameters) into a
DeepSpeed config.
"""

from __future__ import annotations

import copy
import json
import logging
import pathlib
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import deepspeed
import torch

from determined import core
from determined.pytorch import _data
from determined.pytorch._env import TrialEnvError
from determined.pytorch._reducer import MetricReducer, WrappedReducer, wrap
from determined.pytorch.deepspeed._mpu import (
    ModelParallelUnit,
    make_data_parallel_mpu,
    make_deepspeed_mpu,
)

log = logging.getLogger("determined.pytorch")


def overwrite_deepspeed_config(
    base_ds_config: str | dict[str, Any], source_ds_dict: dict[str, Any]
) -> dict[str, Any]:
    """``base_ds_config`` (a DeepSpeed config file's path, or a dict) with the values of
    ``source_ds_dict`` merged in: nested dicts are merged key by key, anything else in
    ``source_ds_dict`` replaces what the base has. Neither argument is changed."""
    if isinstance(base_ds_config, str):
        try:
            with open(base_ds_config) as f:
                base = json.load(f, object_pairs_hook=_no_duplicate_keys)
        except OSError as e:
            raise TrialEnvError(
                f"cannot read the DeepSpeed config {base_ds_config!r}: {e.strerror or e}"
            ) from None
        except json.JSONDecodeError as e:
            raise TrialEnvError(f"the DeepSpeed config {base_ds_config} is not JSON: {e}") from None
    elif isinstance(base_ds_config, dict):
        base = base_ds_config
    else:
        raise TypeError("Expected string or dict for base_ds_config argument.")
    return _merge(base, source_ds_dict)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise TrialEnvError(f"the DeepSpeed config has the key {key!r} twice")
        out[key] = value
    return out


def _merge(base: Mapping[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in source.items():
        if key in base and isinstance(value, dict) and isinstance(base[key], Mapping):
            merged[key] = _merge(base[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class DeepSpeedTrialContext:
    """Hyperparameters, config, the distributed setup, and the model engines of a trial.

    In the trial's ``__init__``, build each model engine with ``deepspeed.initialize`` (the
    optimizer and LR scheduler go into the engine, not into the context) and register it
    with ``wrap_model_engine``: registered engines are saved in and restored from every
    checkpoint, and the first one sets the micro-batch size and the number of micro-batches
    (gradient accumulation steps) of a training batch. ``set_mpu`` declares custom model
    parallelism; ``disable_dataset_reproducibility_checks`` allows plain torch data loaders;
    ``disable_auto_grad_accumulation`` makes ``train_batch`` consume every micro-batch
    itself.

    Without a GPU (pydet runs DeepSpeed on CPUs too) the device is the CPU, and DeepSpeed
    uses its CPU accelerator with gloo.

    Attributes:
        distributed: the Core API's ``DistributedContext``.
        device: the ``torch.device`` of this worker.
        models: the wrapped model engines, in order.
    """

    def __init__(
        self,
        core_context: core.Context,
        trial_seed: int | None,
        hparams: dict[str, Any] | None,
        slots_per_trial: int,
        num_gpus: int,
        exp_conf: dict[str, Any] | None,
        steps_completed: int,
        enable_tensorboard_logging: bool = True,
    ) -> None:
        self._core = core_context
        self.distributed = core_context.distributed
        self._hparams = hparams
        self._exp_conf = exp_conf
        self._trial_seed = trial_seed
        self._steps_completed = steps_completed
        self._num_gpus = num_gpus
        self._per_slot_batch_size: int | None = None
        self._global_batch_size: int | None = None
        if hparams and hparams.get("global_batch_size"):
            self._per_slot_batch_size, self._global_batch_size = _batch_sizes(
                hparams["global_batch_size"], max(slots_per_trial, 1)
            )
        self.device = self._init_device()
        self.models: list[Any] = []
        self.reducers: list[WrappedReducer] = []
        self.profiler: Any = None
        self._mpu = make_data_parallel_mpu(self.distributed)
        self._called_set_mpu = False
        self._train_micro_batch_size_per_gpu: int | None = None
        self._num_micro_batches_per_slot: int | None = None
        self._use_pipeline_parallel = False
        self._data_repro_checks_disabled = False
        self._manual_grad_accumulation = False
        self._stop_requested = False
        self._epoch_len: int | None = None
        self._current_batch_idx: int | None = None
        self._tbd_writer: Any = None
        self._enable_tensorboard_logging = enable_tensorboard_logging
        self._last_tb_reset: float | None = None

    def _init_device(self) -> torch.device:
        if torch.cuda.is_available() and self._num_gpus:
            device = torch.device("cuda", self.distributed.get_local_rank())
            torch.cuda.set_device(device)
            return device
        if self._num_gpus:
            log.warning(
                "the task has %d GPU(s) but torch sees none: training on the CPU", self._num_gpus
            )
        return torch.device("cpu")

    # Model engines and how they train.

    def wrap_model_engine(self, model: Any) -> Any:
        """Register a DeepSpeed model engine (what ``deepspeed.initialize`` returned first);
        returns it, moved to ``device``."""
        if not isinstance(model, deepspeed.DeepSpeedEngine):
            raise TypeError(
                "wrap_model_engine() takes the DeepSpeedEngine that deepspeed.initialize() "
                f"returns, not {type(model).__name__}"
            )
        model = model.to(self.device)
        if isinstance(model, deepspeed.PipelineEngine):
            self._use_pipeline_parallel = True
            if not self.models:
                self._mpu = make_deepspeed_mpu(model.mpu)
            else:
                log.warning("Using the MPU corresponding to the first wrapped model engine.")
        if not self.models:
            self._train_micro_batch_size_per_gpu = int(model.train_micro_batch_size_per_gpu())
            self._num_micro_batches_per_slot = int(model.gradient_accumulation_steps())
        elif model.train_micro_batch_size_per_gpu() != self._train_micro_batch_size_per_gpu:
            log.warning(
                "Train micro batch size for wrapped model engine %d does not match that for the "
                "first wrapped engine.  Num sample reporting will only apply to wrapped model "
                "engine 1.",
                len(self.models) + 1,
            )
        self.models.append(model)
        return model

    def set_mpu(self, mpu: ModelParallelUnit) -> None:
        """Use a custom model-parallel unit (call after ``wrap_model_engine``, once)."""
        if not self.models:
            raise TrialEnvError("Please call `wrap_model` before setting the mpu.")
        if self._called_set_mpu:
            raise TrialEnvError(
                "Only one MPU can be passed to DeepSpeedTrialContext. "
                "Please make sure wrap_mpu is only called once in the trial definition."
            )
        if not isinstance(mpu, ModelParallelUnit):
            raise TypeError(
                "set_mpu() takes a determined.pytorch.deepspeed.ModelParallelUnit, not "
                f"{type(mpu).__name__}"
            )
        self._called_set_mpu = True
        self._mpu = mpu

    def disable_auto_grad_accumulation(self) -> None:
        """Call ``train_batch`` once per batch instead of once per micro-batch: it then
        trains on every micro-batch of the slot (``get_num_micro_batches_per_slot()``)."""
        self._manual_grad_accumulation = True

    def disable_dataset_reproducibility_checks(self) -> None:
        """Allow the data loader methods to return any data loader, not only a
        ``det.pytorch.DataLoader``. Such a loader is iterated as it is: sharding it between
        workers, and starting where a resumed trial left off, are then up to you."""
        self._data_repro_checks_disabled = True

    @property
    def use_pipeline_parallel(self) -> bool:
        """Whether the first wrapped engine is a DeepSpeed ``PipelineEngine``."""
        return self._use_pipeline_parallel

    def get_train_micro_batch_size_per_gpu(self) -> int:
        """The first engine's ``train_micro_batch_size_per_gpu``: a data loader's batch size."""
        if self._train_micro_batch_size_per_gpu is None:
            raise TrialEnvError(
                "Please call wrap_model_engine before accessing train_micro_batch_size."
            )
        return self._train_micro_batch_size_per_gpu

    @property
    def train_micro_batch_size_per_gpu(self) -> int:
        """Deprecated in 0.38.0: ``get_train_micro_batch_size_per_gpu()``."""
        warnings.warn(
            "DeepSpeedTrialContext.train_micro_batch_size_per_gpu has been deprecated in "
            "Determined 0.38.0; please use the context.get_train_micro_batch_size_per_gpu() getter "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.get_train_micro_batch_size_per_gpu()

    def get_num_micro_batches_per_slot(self) -> int:
        """The first engine's ``gradient_accumulation_steps``: micro-batches per batch."""
        if self._num_micro_batches_per_slot is None:
            raise TrialEnvError(
                "Please call wrap_model_engine before accessing num_micro_batches_per_slot."
            )
        return self._num_micro_batches_per_slot

    @property
    def num_micro_batches_per_slot(self) -> int:
        """Deprecated in 0.38.0: ``get_num_micro_batches_per_slot()``."""
        warnings.warn(
            "DeepSpeedTrialContext.num_micro_batches_per_slot has been deprecated in "
            "Determined 0.38.0; please use the context.get_num_micro_batches_per_slot() getter "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.get_num_micro_batches_per_slot()

    def to_device(self, data: _data.TorchData) -> _data.TorchData:
        """``data`` with every tensor moved to ``device``: batches taken from the iterators
        that ``train_batch`` and ``evaluate_batch`` get are not moved for you."""
        return _data.to_device(data, self.device)

    # Metrics.

    def wrap_reducer(
        self,
        reducer: MetricReducer | Callable[[list[Any]], Any],
        name: str | None = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> Any:
        """Register a custom metric reduction (see ``PyTorchTrialContext.wrap_reducer``)."""
        wrapped = wrap(reducer, name=name, for_training=for_training, for_validation=for_validation)
        self.reducers.append(wrapped)
        return wrapped.reducer

    def reset_reducers(self) -> None:
        """Forget what the wrapped reducers have seen."""
        for r in self.reducers:
            r.reducer.reset()

    def reduce_metrics(self, for_training: bool) -> dict[str, Any]:
        """The wrapped reducers' metrics over every worker (a collective: all call it)."""
        mine = [r for r in self.reducers if (r.for_training if for_training else r.for_validation)]
        gathered = self.distributed.allgather([r.reducer.per_slot_reduce() for r in mine])
        out: dict[str, Any] = {}
        for j, r in enumerate(mine):
            out.update(r.result([g[j] for g in gathered]))
        return out

    # Where training is.

    def _require_training(self) -> tuple[int, int]:
        if self._current_batch_idx is None:
            raise RuntimeError("Training hasn't started.")
        if not self._epoch_len:
            raise RuntimeError("Training DataLoader uninitialized.")
        return self._current_batch_idx, self._epoch_len

    def is_epoch_start(self) -> bool:
        """Whether the current batch is the first of an epoch."""
        batch, epoch_len = self._require_training()
        return batch % epoch_len == 0

    def is_epoch_end(self) -> bool:
        """Whether the current batch is the last of an epoch."""
        batch, epoch_len = self._require_training()
        return batch % epoch_len == epoch_len - 1

    def current_train_epoch(self) -> int:
        """The index of the current training epoch."""
        batch, epoch_len = self._require_training()
        return batch // epoch_len

    def current_train_batch(self) -> int:
        """The index of the current training batch among all of the trial's."""
        if self._current_batch_idx is None:
            raise RuntimeError("Training hasn't started.")
        return self._current_batch_idx

    def get_initial_batch(self) -> int:
        """The batches the trial had trained when this run started."""
        return self._steps_completed

    # The trial's parameters.

    def get_hparams(self) -> dict[str, Any]:
        """All hyperparameters of the trial."""
        if self._hparams is None:
            raise ValueError(
                "hparams is undefined in this Trial because hparams was not "
                "configured. Please check the init() call to Trainer API."
            )
        return self._hparams

    def get_hparam(self, name: str) -> Any:
        """The hyperparameter ``name``."""
        hparams = self.get_hparams()
        if name not in hparams:
            raise ValueError(
                f"Could not find name '{name}' in experiment hyperparameters. Please check your "
                "experiment configuration 'hyperparameters' section."
            )
        if name == "global_batch_size":
            log.warning(
                "Please use `context.get_per_slot_batch_size()` and "
                "`context.get_global_batch_size()` instead of accessing "
                "`global_batch_size` directly."
            )
        return hparams[name]

    def get_experiment_config(self) -> dict[str, Any]:
        """The experiment config."""
        if self._exp_conf is None:
            raise ValueError(
                "exp_conf is undefined in this Trial. Please check the init() call to Trainer API."
            )
        return self._exp_conf

    def get_data_config(self) -> dict[str, Any]:
        """The experiment config's ``data`` section."""
        return dict(self.get_experiment_config().get("data") or {})

    def get_experiment_id(self) -> int:
        """The trial's experiment id (0 off-cluster)."""
        return int(getattr(self._core.train, "_experiment_id", 0) or 0)

    def get_trial_id(self) -> int:
        """The trial's id (0 off-cluster)."""
        return int(getattr(self._core.train, "_trial_id", 0) or 0)

    def get_trial_seed(self) -> int:
        """The trial's seed."""
        if self._trial_seed is None:
            raise RuntimeError("Trial seed not set.")
        return self._trial_seed

    def get_global_batch_size(self) -> int:
        """The ``global_batch_size`` hyperparameter (rounded to a multiple of the workers)."""
        if self._global_batch_size is None:
            raise ValueError(
                "global_batch_size is undefined in this Trial because hparams was not "
                "configured. Please check the init() call to Trainer API."
            )
        return self._global_batch_size

    def get_per_slot_batch_size(self) -> int:
        """``global_batch_size`` divided by the number of workers."""
        if self._per_slot_batch_size is None:
            raise ValueError(
                "per_slot_batch_size is undefined in this Trial because hparams was not "
                "configured. Please check the init() call to Trainer API."
            )
        return self._per_slot_batch_size

    def get_stop_requested(self) -> bool:
        """Whether ``set_stop_requested(True)`` was called."""
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask the trainer to stop: it finishes the batch, checkpoints and returns."""
        if not isinstance(stop_requested, bool):
            raise TypeError("stop_requested must be a boolean")
        log.info(
            "A trial stoppage has requested. The trial will be stopped "
            "at the end of the current step."
        )
        self._stop_requested = stop_requested

    # TensorBoard.

    def get_tensorboard_path(self) -> pathlib.Path:
        """Where files for TensorBoard go; they are uploaded as training goes on."""
        return self._core.train.get_tensorboard_path()

    def get_tensorboard_writer(self) -> Any:
        """A ``torch.utils.tensorboard.SummaryWriter`` writing to ``get_tensorboard_path()``."""
        if self._tbd_writer is None:
            from torch.utils import tensorboard

            self._tbd_writer = tensorboard.SummaryWriter(str(self.get_tensorboard_path()))
        return self._tbd_writer

    def set_enable_tensorboard_logging(self, enable_tensorboard_logging: bool) -> None:
        """Whether the trainer writes metrics for TensorBoard and uploads its files."""
        if not isinstance(enable_tensorboard_logging, bool):
            raise TypeError("enable_tensorboard_logging must be a boolean")
        self._enable_tensorboard_logging = enable_tensorboard_logging

    def get_enable_tensorboard_logging(self) -> bool:
        """Whether TensorBoard logging and uploads are on."""
        return self._enable_tensorboard_logging

    def set_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Profile training with ``torch.profiler.profile(*args, **kwargs)``, its traces
        written for TensorBoard; the trainer steps it after every batch."""
        self.profiler = torch.profiler.profile(
            *args,
            on_trace_ready=torch.profiler.tensorboard_trace_handler(
                str(self.get_tensorboard_path())
            ),
            **kwargs,
        )

    def _maybe_reset_tbd_writer(self) -> None:
        """Start a new event file at most once a second, so uploaded files never change."""
        if self._tbd_writer is None:
            return
        now = time.time()
        if self._last_tb_reset is None:
            self._last_tb_reset = now
        if int(now) > int(self._last_tb_reset):
            self._tbd_writer.close()
            self._last_tb_reset = now
        else:
            self._tbd_writer.flush()


def _batch_sizes(raw: Any, slots: int) -> tuple[int, int]:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise TrialEnvError(
            "The `global_batch_size` hyperparameter must be an integer value, not "
            f"{type(raw).__name__}"
        )
    if raw < slots:
        raise TrialEnvError(
            "Please set the `global_batch_size` hyperparameter to be greater or equal to the "
            f"number of slots. Current batch_size: {raw}, slots_per_trial: {slots}."
        )
    per_slot = raw // slots
    if per_slot * slots != raw:
        log.warning(
            "`global_batch_size` changed from %d to %d to divide equally across %d slots.",
            raw,
            per_slot * slots,
            slots,
        )
    return per_slot, per_slot * slots
