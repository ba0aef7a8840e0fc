"""The experiment config: one parser and validator shared by the CLI and the master.

``load_yaml`` reads a file's text, ``parse_experiment_config`` layers the master's defaults
under it and validates everything at once, and ``ExperimentConfig.to_dict`` gives the filled
JSON form that tasks receive as ``DET_EXPERIMENT_CONFIG``.
"""

from __future__ import annotations

from determined.common.expconf._command import (
    NOTEBOOK_IDLE_TYPES,
    CommandConfig,
    parse_command_config,
    parse_duration,
)
from determined.common.expconf._config import (
    CheckpointPolicy,
    ExperimentConfig,
    Reproducibility,
    parse_experiment_config,
    unused_settings,
)
from determined.common.expconf._environment import (
    DeviceType,
    EnvironmentConfig,
    EnvironmentImage,
    EnvironmentVariables,
    ProxyPort,
    RegistryAuth,
)
from determined.common.expconf._errors import InvalidConfig
from determined.common.expconf._hyperparameters import (
    CategoricalHP,
    ConstHP,
    DoubleHP,
    HParamTree,
    Hyperparameter,
    IntHP,
    LogHP,
    flatten_hparams,
    unflatten_hparams,
)
from determined.common.expconf._lengths import Length, Unit
from determined.common.expconf._log_policies import LogPolicy, Signal
from determined.common.expconf._merge import merge_defaults
from determined.common.expconf._mounts import BindMount, Propagation
from determined.common.expconf._optuna import Objective, OptunaSearcher, Pruner
from determined.common.expconf._pbt import PBTSearcher
from determined.common.expconf._resources import Device, ResourcesConfig
from determined.common.expconf._searcher import (
    AdaptiveASHASearcher,
    AshaMode,
    AsyncHalvingSearcher,
    GridSearcher,
    RandomSearcher,
    SearcherConfig,
    SingleSearcher,
    UnsupportedSearcher,
)
from determined.common.expconf._storage import (
    AzureStorage,
    CheckpointStorageConfig,
    DirectoryStorage,
    GCSStorage,
    S3Storage,
    SharedFSStorage,
    check_checkpoint_storage,
)
from determined.common.expconf._yaml import load_yaml
from determined.common.expconf._yaml import safe_load as safe_load_yaml

__all__ = [
    "NOTEBOOK_IDLE_TYPES",
    "AdaptiveASHASearcher",
    "AshaMode",
    "AsyncHalvingSearcher",
    "AzureStorage",
    "BindMount",
    "CategoricalHP",
    "CheckpointPolicy",
    "CheckpointStorageConfig",
    "CommandConfig",
    "ConstHP",
    "Device",
    "DeviceType",
    "DirectoryStorage",
    "DoubleHP",
    "EnvironmentConfig",
    "EnvironmentImage",
    "EnvironmentVariables",
    "ExperimentConfig",
    "GCSStorage",
    "GridSearcher",
    "HParamTree",
    "Hyperparameter",
    "IntHP",
    "InvalidConfig",
    "Length",
    "LogHP",
    "LogPolicy",
    "Objective",
    "OptunaSearcher",
    "PBTSearcher",
    "Propagation",
    "ProxyPort",
    "Pruner",
    "RandomSearcher",
    "RegistryAuth",
    "Reproducibility",
    "ResourcesConfig",
    "S3Storage",
    "SearcherConfig",
    "SharedFSStorage",
    "Signal",
    "SingleSearcher",
    "Unit",
    "UnsupportedSearcher",
    "check_checkpoint_storage",
    "flatten_hparams",
    "load_yaml",
    "merge_defaults",
    "parse_command_config",
    "parse_duration",
    "parse_experiment_config",
    "safe_load_yaml",
    "unflatten_hparams",
    "unused_settings",
]
