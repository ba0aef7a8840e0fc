"""The experiment config as a whole: parsing, defaults and the JSON form tasks receive."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from determined.common.expconf._environment import EnvironmentConfig, parse_environment
from determined.common.expconf._errors import InvalidConfig
from determined.common.expconf._hyperparameters import (
    HParamTree,
    hyperparameters_to_dict,
    parse_hyperparameters,
)
from determined.common.expconf._kept import IGNORED_SECTIONS, default_kept, parse_kept
from determined.common.expconf._lengths import Length, read_length
from determined.common.expconf._log_policies import (
    DEFAULT_POLICIES,
    LogPolicy,
    parse_log_policies,
)
from determined.common.expconf._merge import merge_defaults
from determined.common.expconf._mounts import BindMount, parse_bind_mounts
from determined.common.expconf._optuna import OptunaSearcher, check_optuna_space
from determined.common.expconf._profiling import (
    OPTIMIZATIONS_DEFAULTS,
    PROFILING_DEFAULTS,
    parse_optimizations,
    parse_profiling,
)
from determined.common.expconf._reader import Problems, Section, as_str, describe, index
from determined.common.expconf._resources import ResourcesConfig, parse_resources
from determined.common.expconf._searcher import (
    GridSearcher,
    SearcherConfig,
    check_grid_counts,
    parse_searcher,
)
from determined.common.expconf._storage import CheckpointStorageConfig, parse_checkpoint_storage

CheckpointPolicy = Literal["best", "all", "none"]
CHECKPOINT_POLICIES: tuple[CheckpointPolicy, ...] = ("best", "all", "none")

# `model_def:Trial`, `pkg.module:MyTrial`: no spaces, so never a shell command.
_TRIAL_CLASS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_MAX_SEED = 2**31 - 1
_ZERO_BATCHES = Length("batches", 0)


@dataclass(frozen=True)
class Reproducibility:
    """``experiment_seed=None`` means "not chosen yet": the master picks one when it creates
    the experiment (see ``ExperimentConfig.with_seed``), so a config stays a pure function of
    its text."""

    experiment_seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"experiment_seed": self.experiment_seed}


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """A validated experiment config with every default filled in."""

    entrypoint: str | tuple[str, ...]
    searcher: SearcherConfig
    name: str | None = None
    description: str | None = None
    labels: tuple[str, ...] = ()
    hyperparameters: HParamTree = field(default_factory=dict)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    max_restarts: int = 5
    checkpoint_storage: CheckpointStorageConfig | None = None
    checkpoint_policy: CheckpointPolicy = "best"
    min_validation_period: Length = _ZERO_BATCHES
    min_checkpoint_period: Length = _ZERO_BATCHES
    records_per_epoch: int = 0
    scheduling_unit: int = 100
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    bind_mounts: tuple[BindMount, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)
    debug: bool = False
    reproducibility: Reproducibility = field(default_factory=Reproducibility)
    perform_initial_validation: bool = False
    preemption_timeout: int = 30
    project: str | None = None
    workspace: str | None = None
    profiling: dict[str, Any] = field(default_factory=lambda: dict(PROFILING_DEFAULTS))
    optimizations: dict[str, Any] = field(default_factory=lambda: dict(OPTIMIZATIONS_DEFAULTS))
    log_policies: tuple[LogPolicy, ...] = DEFAULT_POLICIES
    tensorboard_storage: CheckpointStorageConfig | None = None
    # slurm, pbs, security, data_layer, internal, integrations, retention_policy: checked and
    # kept as written (see _kept.py); None where the config leaves one out.
    kept: dict[str, Any] = field(default_factory=default_kept)

    @property
    def entrypoint_is_trial_class(self) -> bool:
        """Whether the entrypoint names a legacy Trial class (``module:Class``) rather than a
        command to run."""
        return isinstance(self.entrypoint, str) and bool(_TRIAL_CLASS.match(self.entrypoint))

    def with_seed(self, seed: int) -> ExperimentConfig:
        """The same config with its experiment seed fixed, as the master stores it."""
        return dataclasses.replace(self, reproducibility=Reproducibility(experiment_seed=seed))

    @functools.cached_property
    def json_text(self) -> str:
        """``to_dict()`` as JSON text, made once per config (it is frozen): the master puts
        it in the start order of every trial of the experiment."""
        return json.dumps(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form with every default explicit, which tasks get as DET_EXPERIMENT_CONFIG
        and which parses back to an equal config."""
        storage = self.checkpoint_storage
        entrypoint = self.entrypoint
        return {
            "name": self.name,
            "description": self.description,
            "labels": list(self.labels),
            "entrypoint": entrypoint if isinstance(entrypoint, str) else list(entrypoint),
            "hyperparameters": hyperparameters_to_dict(self.hyperparameters),
            "searcher": self.searcher.to_dict(),
            "resources": self.resources.to_dict(),
            "max_restarts": self.max_restarts,
            "checkpoint_storage": None if storage is None else storage.to_dict(),
            "checkpoint_policy": self.checkpoint_policy,
            "min_validation_period": self.min_validation_period.to_dict(),
            "min_checkpoint_period": self.min_checkpoint_period.to_dict(),
            "records_per_epoch": self.records_per_epoch,
            "scheduling_unit": self.scheduling_unit,
            "environment": self.environment.to_dict(),
            "bind_mounts": [m.to_dict() for m in self.bind_mounts],
            "data": copy.deepcopy(self.data),
            "debug": self.debug,
            "reproducibility": self.reproducibility.to_dict(),
            "perform_initial_validation": self.perform_initial_validation,
            "preemption_timeout": self.preemption_timeout,
            # Determined writes "" for "the default"; it reads back as None.
            "project": self.project or "",
            "workspace": self.workspace or "",
            "profiling": copy.deepcopy(self.profiling),
            "optimizations": copy.deepcopy(self.optimizations),
            "log_policies": [p.to_dict() for p in self.log_policies],
            "tensorboard_storage": (
                None if self.tensorboard_storage is None else self.tensorboard_storage.to_dict()
            ),
            **copy.deepcopy(self.kept),
        }


def unused_settings(config: ExperimentConfig) -> list[str]:
    """The sections a config sets that pydet accepts for Determined's sake but does not act on,
    for the master to note when it creates the experiment."""
    unused = [key for key in IGNORED_SECTIONS if config.kept.get(key) is not None]
    if config.kept.get("data_layer") == default_kept()["data_layer"]:
        unused.remove("data_layer")
    integrations = config.kept.get("integrations")
    if isinstance(integrations, dict) and set(integrations) <= {"webhooks"}:
        unused.remove("integrations")  # webhooks act (master/webhooks/dispatch.py)
    if config.tensorboard_storage is not None:
        unused.append("tensorboard_storage")
    if config.environment.slurm or config.environment.pbs:
        unused.append("environment.slurm/pbs")
    return unused


def top_section(raw: Any, defaults: Mapping[str, Any] | None) -> Section:
    """A whole config, read over ``defaults``; its problems are collected in its section."""
    if not isinstance(raw, Mapping):
        raise InvalidConfig([f"the config must be a mapping, got {describe(raw)}"])
    merged = merge_defaults(raw, defaults) if defaults else raw
    return Section(Problems(), "", merged)


def parse_experiment_config(
    raw: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> ExperimentConfig:
    """Validates a user's config over the master's ``defaults``, reporting every problem.

    Raises ``InvalidConfig`` listing all problems, each as ``"<path>: <problem>"``.
    """
    sec = top_section(raw, defaults)
    problems = sec.problems
    name = sec.string("name", None)
    description = sec.string("description", None)
    labels = sec.strings("labels")
    entrypoint = _entrypoint(sec)
    hyperparameters = parse_hyperparameters(problems, "hyperparameters", sec.raw("hyperparameters"))
    searcher = parse_searcher(problems, "searcher", sec.raw("searcher"))
    if isinstance(searcher, GridSearcher):
        check_grid_counts(problems, "hyperparameters", hyperparameters)
    elif isinstance(searcher, OptunaSearcher):
        check_optuna_space(problems, "hyperparameters", hyperparameters, searcher.sampler)
    resources = parse_resources(sec.child("resources"))
    max_restarts = sec.integer("max_restarts", 5, minimum=0)
    storage = parse_checkpoint_storage(
        problems, "checkpoint_storage", sec.raw("checkpoint_storage")
    )
    checkpoint_policy = sec.choice("checkpoint_policy", "best", CHECKPOINT_POLICIES)
    min_validation_period = read_length(sec, "min_validation_period", _ZERO_BATCHES)
    min_checkpoint_period = read_length(sec, "min_checkpoint_period", _ZERO_BATCHES)
    records_per_epoch = sec.integer("records_per_epoch", 0, minimum=0)
    scheduling_unit = sec.integer("scheduling_unit", 100, minimum=1)
    environment = parse_environment(sec.child("environment"))
    bind_mounts = parse_bind_mounts(sec, "bind_mounts")
    data = sec.json_mapping("data")
    debug = sec.boolean("debug", False)
    seed = _seed(sec.child("reproducibility"))
    perform_initial_validation = sec.boolean("perform_initial_validation", False)
    preemption_timeout = sec.integer("preemption_timeout", 30, minimum=0)
    project = sec.string("project", None) or None
    workspace = sec.string("workspace", None) or None
    profiling = parse_profiling(sec.child("profiling"))
    optimizations = parse_optimizations(sec.child("optimizations"))
    log_policies = parse_log_policies(problems, "log_policies", sec.raw("log_policies"))
    tensorboard_storage = parse_checkpoint_storage(
        problems, "tensorboard_storage", sec.raw("tensorboard_storage")
    )
    kept = parse_kept(sec)
    sec.finish()
    if problems or entrypoint is None or searcher is None:
        raise InvalidConfig(problems.errors or ["the config is invalid"])
    return ExperimentConfig(
        name=name,
        description=description,
        labels=labels,
        entrypoint=entrypoint,
        hyperparameters=hyperparameters,
        searcher=searcher,
        resources=resources,
        max_restarts=max_restarts,
        checkpoint_storage=storage,
        checkpoint_policy=checkpoint_policy,
        min_validation_period=min_validation_period,
        min_checkpoint_period=min_checkpoint_period,
        records_per_epoch=records_per_epoch,
        scheduling_unit=scheduling_unit,
        environment=environment,
        bind_mounts=bind_mounts,
        data=data,
        debug=debug,
        reproducibility=Reproducibility(seed),
        perform_initial_validation=perform_initial_validation,
        preemption_timeout=preemption_timeout,
        project=project,
        workspace=workspace,
        profiling=profiling,
        optimizations=optimizations,
        log_policies=log_policies,
        tensorboard_storage=tensorboard_storage,
        kept=kept,
    )


def _entrypoint(sec: Section) -> str | tuple[str, ...] | None:
    value = sec.raw("entrypoint")
    path = sec.at("entrypoint")
    if value is None:
        sec.problems.add(path, "required")
        return None
    if isinstance(value, str):
        return as_str(sec.problems, path, value, non_empty=True)
    if not isinstance(value, list | tuple):
        sec.problems.add(path, f"expected a string or a list of strings, got {describe(value)}")
        return None
    if not value:
        sec.problems.add(path, "must not be empty")
        return None
    argv = [as_str(sec.problems, index(path, i), arg) for i, arg in enumerate(value)]
    if argv[0] == "":
        sec.problems.add(index(path, 0), "must not be empty")
    strings = [arg for arg in argv if arg is not None]
    return tuple(strings) if len(strings) == len(argv) and argv[0] else None


def _seed(sec: Section) -> int | None:
    seed = sec.integer("experiment_seed", None, minimum=0, maximum=_MAX_SEED)
    sec.finish()
    return seed
