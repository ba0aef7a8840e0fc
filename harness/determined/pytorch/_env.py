"""``TrialEnv``: what the PyTorch harness knows about the trial it runs.

On a cluster it comes from ``det.get_cluster_info()``. Off the cluster (no
``DET_ALLOCATION_ID``) it is read from the same variables a task gets, set by hand:

- ``DET_HPARAMS`` (required): the hyperparameters as a JSON object,
  e.g. ``'{"global_batch_size": 32, "lr": 0.1}'``;
- ``DET_EXPERIMENT_CONFIG`` (optional): the experiment config as a JSON object, or the path
  of a YAML/JSON config file (``const.yaml``); its ``searcher.max_length`` is the length
  trained off-cluster;
- ``DET_TRIAL_SEED`` (optional, default 0), ``DET_LATEST_CHECKPOINT`` (optional: a
  checkpoint id in the local checkpoint storage to resume from).

``DET_TEST_MODE=1`` selects test mode in both places (see ``determined.pytorch``).
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from determined._info import ClusterInfo
from determined.common import errors
from determined.common.expconf import InvalidConfig, load_yaml


class TrialEnvError(errors.InvalidArgument):
    """The trial's environment is missing something or malformed; the message says how to fix it."""


@dataclass(frozen=True)
class TrialEnv:
    """The trial's hyperparameters, experiment config, seed and checkpoint to resume from."""

    hparams: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    trial_seed: int = 0
    trial_id: int = 0
    experiment_id: int = 0
    latest_checkpoint: str | None = None
    test_mode: bool = False
    on_cluster: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TrialEnv:
        """Read the environment (``os.environ`` by default).

        Raises:
            TrialEnvError: off-cluster without ``DET_HPARAMS``, or a malformed variable.
        """
        env = os.environ if env is None else env
        test_mode = _flag(env, "DET_TEST_MODE")
        info = ClusterInfo.from_env(env)
        if info is not None:
            if info.trial is None:
                raise TrialEnvError(
                    "this task is not a trial (DET_TRIAL_ID is not set), so it has no "
                    "hyperparameters to train a PyTorchTrial with"
                )
            return cls(
                hparams=dict(info.trial.hparams),
                config=dict(info.trial.config),
                trial_seed=info.trial.trial_seed,
                trial_id=info.trial.trial_id,
                experiment_id=info.trial.experiment_id,
                latest_checkpoint=info.latest_checkpoint,
                test_mode=test_mode,
                on_cluster=True,
            )
        raw_hparams = env.get("DET_HPARAMS")
        if not raw_hparams:
            raise TrialEnvError(
                "not running on a cluster (DET_ALLOCATION_ID is not set), so the trial's "
                "hyperparameters must come from DET_HPARAMS: set it to a JSON object, e.g. "
                'DET_HPARAMS=\'{"global_batch_size": 32, "lr": 0.1}\' (and optionally '
                "DET_EXPERIMENT_CONFIG=const.yaml for searcher.max_length)"
            )
        hparams = _json_object(raw_hparams, "DET_HPARAMS")
        config: dict[str, Any] = {}
        raw_config = env.get("DET_EXPERIMENT_CONFIG", "").strip()
        if raw_config:
            config = (
                _json_object(raw_config, "DET_EXPERIMENT_CONFIG")
                if raw_config.startswith("{")
                else _config_file(raw_config)
            )
        seed_text = env.get("DET_TRIAL_SEED", "0").strip() or "0"
        try:
            seed = int(seed_text)
        except ValueError:
            raise TrialEnvError(f"DET_TRIAL_SEED={seed_text!r} is not an integer") from None
        return cls(
            hparams=hparams,
            config=config,
            trial_seed=seed,
            latest_checkpoint=env.get("DET_LATEST_CHECKPOINT") or None,
            test_mode=test_mode,
        )


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _json_object(text: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise TrialEnvError(f"{name} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise TrialEnvError(f"{name} must be a JSON object, not {type(value).__name__}")
    return value


def _config_file(path: str) -> dict[str, Any]:
    try:
        text = pathlib.Path(path).read_text()
    except OSError as e:
        raise TrialEnvError(
            f"DET_EXPERIMENT_CONFIG={path!r} is neither a JSON object nor a readable config "
            f"file: {e.strerror or e}"
        ) from None
    try:
        return load_yaml(text)
    except InvalidConfig as e:
        raise TrialEnvError(f"DET_EXPERIMENT_CONFIG file {path}: {e}") from None
