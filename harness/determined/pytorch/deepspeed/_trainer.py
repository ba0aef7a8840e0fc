"""``init()`` and ``Trainer``: train a ``DeepSpeedTrial`` from a script of one's own.

.. code:: python

    with det_ds.init() as context:
        trial = MyTrial(context)
        det_ds.Trainer(trial, context).fit(
            max_length=pytorch.Batch(200), latest_checkpoint=info.latest_checkpoint
        )

On a cluster ``init()`` joins DeepSpeed's process group (``deepspeed.init_distributed``
under ``determined.launch.deepspeed``, or under torchrun's variables), seeds ``random``,
numpy and torch with the trial seed and opens the Core API. Off the cluster it joins a
one-process group of its own when no launcher set one up, so that the same script also
runs as ``python3 train.py``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import deepspeed
import torch

import determined as det
from determined import core
from determined.pytorch import _checkpoint
from determined.pytorch._schedule import parse_length
from determined.pytorch._units import Batch, Epoch, TrainUnit, length_of
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from determined.pytorch.deepspeed._controller import DeepSpeedTrialController
from determined.pytorch.deepspeed._trial import DeepSpeedTrial

log = logging.getLogger("determined.pytorch.deepspeed")


class Trainer:
    """Trains a ``DeepSpeedTrial``: checkpoints, validation, metrics, preemption.

    Build it inside ``det_ds.init()``, with the trial built from the same context.
    """

    def __init__(self, trial: DeepSpeedTrial, context: DeepSpeedTrialContext) -> None:
        self._trial = trial
        self._context = context
        self._info = det.get_cluster_info()
        self._local_training = self._info is None or self._info.task_type != "TRIAL"

    def fit(
        self,
        checkpoint_period: TrainUnit | None = None,
        validation_period: TrainUnit | None = None,
        max_length: TrainUnit | None = None,
        reporting_period: TrainUnit = Batch(100),  # noqa: B008  # Determined's default
        checkpoint_policy: str = "best",
        latest_checkpoint: str | None = None,
        step_zero_validation: bool = False,
        test_mode: bool = False,
        profiling_enabled: bool = False,
    ) -> None:
        """Train until ``max_length`` (a ``Batch(n)`` or ``Epoch(n)``).

        Arguments:
            checkpoint_period, validation_period: checkpoint or validate every so many
                batches or epochs (``Batch(100)``), or at the steps a container lists
                (``Batch([5, 30, 45])``); default never, except at the end.
            max_length: how long to train. On a cluster it defaults, with a
                ``FutureWarning``, to the config's ``searcher.max_length``.
            reporting_period: how often training metrics and progress are reported.
            checkpoint_policy: after a validation, checkpoint ``"best"`` (when the
                searcher's metric improved on the experiment's best; off-cluster it
                falls back to ``"all"``), ``"all"`` or ``"none"``.
            latest_checkpoint: the checkpoint to start from; on a cluster
                ``det.get_cluster_info().latest_checkpoint`` resumes a paused trial.
            step_zero_validation: validate once before training.
            test_mode: off-cluster only: train and validate one batch, checkpoint, stop.
            profiling_enabled: accepted for Determined's API; pydet collects no system
                metrics.
        """
        if checkpoint_period is None:
            checkpoint_period = Batch(sys.maxsize)
        if validation_period is None:
            validation_period = Batch(sys.maxsize)
        for name, unit in (
            ("checkpoint_period", checkpoint_period),
            ("validation_period", validation_period),
            ("reporting_period", reporting_period),
        ):
            if not isinstance(unit, TrainUnit):
                raise TypeError(
                    f"{name} must be a det.pytorch.Batch or det.pytorch.Epoch, not {unit!r}"
                )
        if self._local_training:
            if checkpoint_policy == "best":
                log.warning(
                    "checkpoint_policy='best' is not supported in local training mode. "
                    "Falling back to 'all'."
                )
                checkpoint_policy = "all"
            if max_length is None:
                raise ValueError("max_length must be defined in local training mode.")
            max_length = length_of(max_length, "max_length")
            smaller_is_better = True
            searcher_metric_name = None
            steps_completed = 0
            global_batch_size = None
        else:
            if test_mode:
                raise ValueError("test_mode is only supported in local training mode.")
            assert self._info is not None and self._info.trial is not None
            config = self._info.trial.config
            searcher = config.get("searcher") or {}
            if latest_checkpoint is None and self._info.latest_checkpoint is not None:
                log.warning(
                    "latest_checkpoint has not been configured. Pause/resume training will not "
                    "be able to continue from latest checkpoint. Did you mean to set "
                    "`fit(latest_checkpoint=info.latest_checkpoint)'?"
                )
            smaller_is_better = bool(searcher.get("smaller_is_better", True))
            searcher_metric_name = searcher.get("metric")
            steps_completed = self._info.trial.steps_completed
            raw_gbs = self._info.trial.hparams.get("global_batch_size")
            global_batch_size = int(raw_gbs) if raw_gbs else None
            if max_length is None:
                max_length = _searcher_max_length(config, global_batch_size)
            if max_length is None:
                raise ValueError(
                    "`fit(max_length=X)` must be set with your desired training length."
                )
            max_length = length_of(max_length, "max_length")
            _check_searcher_length(searcher, max_length)
        controller = DeepSpeedTrialController(
            trial_inst=self._trial,
            context=self._context,
            checkpoint_period=checkpoint_period,
            validation_period=validation_period,
            reporting_period=reporting_period,
            smaller_is_better=smaller_is_better,
            steps_completed=steps_completed,
            latest_checkpoint=latest_checkpoint,
            local_training=self._local_training,
            test_mode=test_mode,
            searcher_metric_name=searcher_metric_name,
            checkpoint_policy=checkpoint_policy,
            step_zero_validation=step_zero_validation,
            max_length=max_length,
            global_batch_size=global_batch_size,
            profiling_enabled=profiling_enabled,
        )
        controller.run()


def _searcher_max_length(config: dict[str, Any], global_batch_size: int | None) -> TrainUnit | None:
    """The legacy ``searcher.max_length`` as a length (with Determined's deprecation warning)."""
    raw = (config.get("searcher") or {}).get("max_length")
    if raw is None:
        return None
    warnings.warn(
        "Configuring `max_length` from the `searcher.max_length` experiment "
        "config, which was deprecated in 0.38.0 and will be removed in a future "
        "release. Please set `fit(max_length=X)` with your desired training length "
        "directly.",
        FutureWarning,
        stacklevel=3,
    )
    length = parse_length(raw, "searcher.max_length")
    return TrainUnit._from_values(
        **{length.unit or "batches": length.value}, global_batch_size=global_batch_size
    )


def _check_searcher_length(searcher: dict[str, Any], max_length: TrainUnit) -> None:
    """A warning when ``fit(max_length=...)`` disagrees with a stop-driven searcher's
    ``max_time``/``time_metric``."""
    time_metric = searcher.get("time_metric")
    if time_metric is None:
        return
    max_time = int(searcher.get("max_time") or 0)
    expected: TrainUnit | None = None
    if time_metric == "batches":
        expected = Batch(max_time)
    elif time_metric == "epochs":
        expected = Epoch(max_time)
    else:
        log.warning(
            "`searcher.time_metric` must be either 'batches' or 'epochs' for training with "
            "PyTorchTrials, but got %s. Training will proceed with %s but may result in "
            "unexpected behavior.",
            time_metric,
            max_length,
        )
        return
    if expected != max_length:
        log.warning(
            "`max_length` passed into `fit()` method (%s) does not match `searcher.max_time` and "
            "`searcher.time_metric` from the experiment config (%s). This may result in "
            "unexpected hyperparameter search behavior.",
            max_length,
            expected,
        )


def _initialize_distributed_backend(info: det.ClusterInfo) -> core.DistributedContext | None:
    """Join DeepSpeed's process group as the launcher set it up; the Core API's view of it."""
    manual = bool(os.environ.get("DET_MANUAL_INIT_DISTRIBUTED"))
    if os.environ.get("USE_DEEPSPEED"):
        if not manual:
            deepspeed.init_distributed(auto_mpi_discovery=False)
        return core.DistributedContext.from_deepspeed()
    if int(os.environ.get("WORLD_SIZE") or "1") > 1:
        # torchrun's workers (the legacy `model_def:Trial` entrypoint's launcher).
        if not manual:
            deepspeed.init_distributed(auto_mpi_discovery=False)
        return core.DistributedContext.from_torch_distributed()
    if len(info.container_addrs) > 1 or len(info.slot_ids) > 1:
        raise ValueError(
            "In multi-slot managed cluster training, you must wrap your training script with a "
            "distributed launch layer such as determined.launch.deepspeed."
        )
    _join_alone()
    return None


def _join_alone() -> None:
    """A process group of one, on loopback, when nothing set one up: DeepSpeed needs one."""
    if torch.distributed.is_initialized():
        return
    if "RANK" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        for key, value in (
            ("RANK", "0"),
            ("LOCAL_RANK", "0"),
            ("WORLD_SIZE", "1"),
            ("LOCAL_SIZE", "1"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", str(port)),
        ):
            os.environ.setdefault(key, value)
    deepspeed.init_distributed(auto_mpi_discovery=False)


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    distributed: core.DistributedContext | None = None,
    enable_tensorboard_logging: bool = True,
) -> Iterator[DeepSpeedTrialContext]:
    """A ``DeepSpeedTrialContext`` for a ``DeepSpeedTrial``; every ``Trainer`` call must be
    inside it (it closes the Core API on exit).

    Arguments:
        hparams: the trial's hyperparameters (on a cluster usually
            ``det.get_cluster_info().trial.hparams``); needed for ``context.get_hparam``
            and the batch-size getters.
        exp_conf: the experiment config off the cluster (on a cluster the trial's own).
        distributed: off the cluster, a ``DistributedContext`` of one's own; on a cluster
            it comes from the launcher.
        enable_tensorboard_logging: write and upload TensorBoard files of the metrics.
    """
    info = det.get_cluster_info()
    local = info is None or info.task_type != "TRIAL"
    trial_seed: int | None = None
    steps_completed = 0
    num_gpus = torch.cuda.device_count()
    if local:
        if distributed is None:
            _join_alone()
    else:
        assert info is not None and info.trial is not None
        distributed = _initialize_distributed_backend(info)
        trial_seed = info.trial.trial_seed
        exp_conf = info.trial.config
        steps_completed = info.trial.steps_completed
        num_gpus = len(info.gpu_uuids)
        _checkpoint.seed_everything(trial_seed)
    with core.init(
        distributed=distributed,
        preempt_mode=core.PreemptMode.WorkersAskChief,
        tensorboard_mode=core.TensorboardMode.MANUAL,
    ) as core_context:
        yield DeepSpeedTrialContext(
            core_context=core_context,
            trial_seed=trial_seed,
            hparams=hparams,
            slots_per_trial=core_context.distributed.get_size(),
            num_gpus=num_gpus,
            exp_conf=exp_conf,
            steps_completed=steps_completed,
            enable_tensorboard_logging=enable_tensorboard_logging,
        )
