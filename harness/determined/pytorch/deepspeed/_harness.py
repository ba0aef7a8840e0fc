"""Training a ``DeepSpeedTrial`` class named on a command line (``--trial model_def:MyTrial``).

What ``python3 -m determined.exec.harness`` does for a ``DeepSpeedTrial`` in every worker:
``init()`` with the trial's hyperparameters and config, then ``Trainer.fit`` with the
config's schedule: ``searcher.max_length``, ``min_validation_period``,
``min_checkpoint_period``, ``scheduling_unit`` as the reporting period,
``checkpoint_policy`` and ``perform_initial_validation``. Off the cluster the
hyperparameters and config come from ``DET_HPARAMS`` and ``DET_EXPERIMENT_CONFIG`` as for
a ``PyTorchTrial`` (``determined.pytorch._env``), and ``DET_TEST_MODE=1`` trains one batch.
"""

from __future__ import annotations

import logging
from typing import Any

from determined.pytorch._env import TrialEnv, TrialEnvError
from determined.pytorch._schedule import parse_length
from determined.pytorch._units import Batch, TrainUnit
from determined.pytorch.deepspeed._trainer import Trainer, init
from determined.pytorch.deepspeed._trial import DeepSpeedTrial

log = logging.getLogger("determined.pytorch.deepspeed")


def run_trial(trial_class: type[DeepSpeedTrial], *, trial_env: TrialEnv | None = None) -> None:
    """Build ``trial_class`` in this worker and train it as the config says."""
    env = TrialEnv.from_env() if trial_env is None else trial_env
    config = env.config
    hparams = env.hparams
    raw_gbs = hparams.get("global_batch_size")
    gbs = raw_gbs if isinstance(raw_gbs, int) and not isinstance(raw_gbs, bool) else None
    with init(hparams=hparams, exp_conf=config) as context:
        if not env.on_cluster and context._trial_seed is None:
            context._trial_seed = env.trial_seed
        trial = trial_class(context)
        max_length = _length(config, ("searcher", "max_length"), gbs)
        if max_length is None and not env.test_mode:
            raise TrialEnvError(
                "a DeepSpeedTrial named on the command line trains to the config's "
                "searcher.max_length, which is not set (e.g. searcher: {max_length: "
                "{batches: 100}})"
            )
        Trainer(trial, context).fit(
            checkpoint_period=_length(config, ("min_checkpoint_period",), gbs, never=True),
            validation_period=_length(config, ("min_validation_period",), gbs, never=True),
            max_length=max_length or Batch(1),
            reporting_period=Batch(int(config.get("scheduling_unit") or 100)),
            checkpoint_policy=str(config.get("checkpoint_policy") or "best"),
            latest_checkpoint=env.latest_checkpoint,
            step_zero_validation=bool(config.get("perform_initial_validation")),
            test_mode=env.test_mode and not env.on_cluster,
        )


def _length(
    config: dict[str, Any], keys: tuple[str, ...], gbs: int | None, *, never: bool = False
) -> TrainUnit | None:
    value: Any = config
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    path = ".".join(keys)
    if value is None:
        return TrainUnit._from_values(batches=0) if never else None
    length = parse_length(value, path)
    try:
        return TrainUnit._from_values(
            **{length.unit or "batches": length.value}, global_batch_size=gbs
        )
    except ValueError as e:
        raise TrialEnvError(f"{path}: {e}") from None
