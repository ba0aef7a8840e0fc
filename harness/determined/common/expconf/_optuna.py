"""The ``optuna`` searcher: model-based search through an Optuna study.

``sampler`` picks Optuna's sampler, ``pruner`` an optional pruner that stops trials early from
their intermediate validation results, and ``metrics`` (instead of ``metric``) makes the study
multi-objective. Combinations Optuna cannot run are refused here, with the field named:
CMA-ES samples neither categorical values nor several objectives, and Optuna prunes only
single-objective studies (``Trial.report`` refuses multi-objective trials).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from determined.common.expconf._hyperparameters import CategoricalHP, HParamTree, flatten_hparams
from determined.common.expconf._lengths import Length, read_length
from determined.common.expconf._reader import Problems, Section, as_str, describe, index, join

Sampler = Literal["tpe", "gp", "cmaes", "random", "qmc", "nsga2"]
SAMPLERS: tuple[Sampler, ...] = ("tpe", "gp", "cmaes", "random", "qmc", "nsga2")
PrunerType = Literal["median", "successive_halving", "hyperband"]
PRUNER_TYPES: tuple[PrunerType, ...] = ("median", "successive_halving", "hyperband")
# Samplers that model a single objective only (Optuna raises on a multi-objective study).
SINGLE_OBJECTIVE_SAMPLERS: tuple[Sampler, ...] = ("cmaes",)
# Samplers that hand categorical parameters to a random fallback instead of modelling them.
NO_CATEGORICAL_SAMPLERS: tuple[Sampler, ...] = ("cmaes",)


@dataclass(frozen=True)
class Objective:
    """One metric of a multi-objective study and its direction."""

    name: str
    smaller_is_better: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "smaller_is_better": self.smaller_is_better}


@dataclass(frozen=True, kw_only=True)
class Pruner:
    """Optuna's pruner and its main parameters; each type reads only its own.

    - ``median``: ``n_startup_trials`` (5), ``n_warmup_steps`` (0), ``interval_steps`` (1),
      ``n_min_trials`` (1).
    - ``successive_halving``: ``min_resource`` ("auto" or an int), ``reduction_factor`` (4),
      ``min_early_stopping_rate`` (0).
    - ``hyperband``: ``min_resource`` (1), ``max_resource`` ("auto" or an int),
      ``reduction_factor`` (3).

    Steps and resources are the ``steps_completed`` of validation reports.
    """

    type: PrunerType
    n_startup_trials: int = 5
    n_warmup_steps: int = 0
    interval_steps: int = 1
    n_min_trials: int = 1
    min_resource: int | None = None  # None: "auto" (successive halving); 1 for hyperband
    max_resource: int | None = None  # None: "auto"
    reduction_factor: int | None = None  # None: Optuna's default for the type
    min_early_stopping_rate: int = 0

    def to_dict(self) -> dict[str, Any]:
        if self.type == "median":
            return {
                "type": self.type,
                "n_startup_trials": self.n_startup_trials,
                "n_warmup_steps": self.n_warmup_steps,
                "interval_steps": self.interval_steps,
                "n_min_trials": self.n_min_trials,
            }
        if self.type == "successive_halving":
            return {
                "type": self.type,
                "min_resource": "auto" if self.min_resource is None else self.min_resource,
                "reduction_factor": self.reduction_factor or 4,
                "min_early_stopping_rate": self.min_early_stopping_rate,
            }
        return {
            "type": self.type,
            "min_resource": self.min_resource or 1,
            "max_resource": "auto" if self.max_resource is None else self.max_resource,
            "reduction_factor": self.reduction_factor or 3,
        }


@dataclass(frozen=True, kw_only=True)
class OptunaSearcher:
    """``max_trials`` trials whose hyperparameters an Optuna sampler proposes from the results
    so far; ``metric`` is the first objective when ``metrics`` lists several."""

    name: ClassVar[Literal["optuna"]] = "optuna"
    metric: str
    smaller_is_better: bool = True
    source_trial_id: int | None = None
    source_checkpoint_uuid: str | None = None
    source_experiment_id: int | None = None
    sampler: Sampler = "tpe"
    max_trials: int
    max_concurrent_trials: int = 16
    max_length: Length | None = None
    pruner: Pruner | None = None
    metrics: tuple[Objective, ...] = ()

    @property
    def objectives(self) -> tuple[Objective, ...]:
        """Every objective, one for a single-objective study."""
        return self.metrics or (Objective(self.metric, self.smaller_is_better),)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": None if self.metrics else self.metric,
            "smaller_is_better": self.smaller_is_better,
            "source_trial_id": self.source_trial_id,
            "source_checkpoint_uuid": self.source_checkpoint_uuid,
            "source_experiment_id": self.source_experiment_id,
            "sampler": self.sampler,
            "max_trials": self.max_trials,
            "max_concurrent_trials": self.max_concurrent_trials,
            "max_length": None if self.max_length is None else self.max_length.to_dict(),
            "pruner": None if self.pruner is None else self.pruner.to_dict(),
            "metrics": [m.to_dict() for m in self.metrics] or None,
        }


def parse_optuna(
    sec: Section,
    *,
    smaller_is_better: bool,
    source_trial_id: int | None,
    source_checkpoint_uuid: str | None,
    source_experiment_id: int | None = None,
) -> OptunaSearcher | None:
    """Reads the optuna-specific keys of ``searcher`` (the shared ones are read already)."""
    metric = sec.string("metric", None, non_empty=True)
    metrics = _objectives(sec)
    sampler = sec.choice("sampler", "tpe", SAMPLERS)
    max_trials = sec.required_integer("max_trials", minimum=1)
    max_concurrent_trials = sec.integer("max_concurrent_trials", 16, minimum=0)
    max_length = read_length(sec, "max_length", None, allow_bare=True, positive=True)
    pruner = _pruner(sec.child("pruner")) if sec.raw("pruner") is not None else None
    if metric is not None and metrics:
        sec.problems.add(sec.at("metrics"), "set either metric or metrics, not both")
    elif metric is None and not metrics and not sec.has("metric") and not sec.has("metrics"):
        sec.problems.add(sec.at("metric"), "required (or metrics, for several objectives)")
    if len(metrics) > 1 and sampler in SINGLE_OBJECTIVE_SAMPLERS:
        sec.problems.add(
            sec.at("sampler"),
            f"the {sampler} sampler optimizes one objective; with several metrics use "
            "nsga2, tpe, gp, random or qmc",
        )
    if len(metrics) > 1 and pruner is not None:
        sec.problems.add(sec.at("pruner"), "Optuna prunes only single-objective searches")
    if max_trials is None or (metric is None and not metrics):
        return None
    return OptunaSearcher(
        metric=metric if metric is not None else metrics[0].name,
        smaller_is_better=smaller_is_better if not metrics else metrics[0].smaller_is_better,
        source_trial_id=source_trial_id,
        source_checkpoint_uuid=source_checkpoint_uuid,
        source_experiment_id=source_experiment_id,
        sampler=sampler,
        max_trials=max_trials,
        max_concurrent_trials=max_concurrent_trials,
        max_length=max_length,
        pruner=pruner,
        metrics=metrics if len(metrics) > 1 else (),
    )


def _objectives(sec: Section) -> tuple[Objective, ...]:
    found = sec.list_of("metrics", lambda p, v: _objective(sec.problems, p, v))
    if found is None:
        return ()
    if not found:
        sec.problems.add(sec.at("metrics"), "must list at least one metric")
    names = [m.name for m in found]
    for i, name in enumerate(names):
        if name in names[:i]:
            sec.problems.add(index(sec.at("metrics"), i), f"metric {name!r} is listed twice")
    return found


def _objective(problems: Problems, path: str, value: Any) -> Objective | None:
    if isinstance(value, str):
        name = as_str(problems, path, value, non_empty=True)
        return None if name is None else Objective(name)
    if not isinstance(value, dict):
        problems.add(path, f"expected a mapping {{name, smaller_is_better}}, got {describe(value)}")
        return None
    sec = Section(problems, path, value)
    name = sec.required_string("name")
    smaller_is_better = sec.boolean("smaller_is_better", True)
    sec.finish()
    return None if name is None else Objective(name, smaller_is_better)


def _pruner(sec: Section) -> Pruner | None:
    kind = sec.required_choice("type", PRUNER_TYPES)
    if kind is None:
        sec.skip_rest()
        return None
    pruner: Pruner | None = None
    if kind == "median":
        pruner = Pruner(
            type=kind,
            n_startup_trials=sec.integer("n_startup_trials", 5, minimum=0),
            n_warmup_steps=sec.integer("n_warmup_steps", 0, minimum=0),
            interval_steps=sec.integer("interval_steps", 1, minimum=1),
            n_min_trials=sec.integer("n_min_trials", 1, minimum=1),
        )
    elif kind == "successive_halving":
        pruner = Pruner(
            type=kind,
            min_resource=_resource(sec, "min_resource"),
            reduction_factor=sec.integer("reduction_factor", 4, minimum=2),
            min_early_stopping_rate=sec.integer("min_early_stopping_rate", 0, minimum=0),
        )
    else:
        min_resource = sec.integer("min_resource", 1, minimum=1)
        max_resource = _resource(sec, "max_resource")
        if max_resource is not None and max_resource < min_resource:
            sec.problems.add(sec.at("max_resource"), "must be >= min_resource")
        pruner = Pruner(
            type=kind,
            min_resource=min_resource,
            max_resource=max_resource,
            reduction_factor=sec.integer("reduction_factor", 3, minimum=2),
        )
    sec.finish()
    return pruner


def _resource(sec: Section, key: str) -> int | None:
    """A positive int, or "auto" (None): Optuna's estimate from the first finished trial."""
    if sec.raw(key) == "auto":
        return None
    return sec.integer(key, None, minimum=1)


def check_optuna_space(problems: Problems, path: str, tree: HParamTree, sampler: str) -> None:
    """A sampler that cannot model categorical values would silently sample them at random:
    refuse the combination, naming the hyperparameter."""
    if sampler not in NO_CATEGORICAL_SAMPLERS:
        return
    for names, hp in flatten_hparams(tree).items():
        if isinstance(hp, CategoricalHP):
            hp_path = path
            for name in names:
                hp_path = join(hp_path, name)
            problems.add(
                hp_path,
                f"the {sampler} sampler (searcher.sampler) cannot sample categorical values; "
                "use tpe, gp, random, qmc or nsga2, or make it an int or double",
            )
