"""Searcher settings: which trials to run and how long to train each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, TypedDict

from determined.common.expconf._hyperparameters import (
    RANGED_TYPES,
    ConstHP,
    DoubleHP,
    HParamTree,
    IntHP,
    LogHP,
    flatten_hparams,
)
from determined.common.expconf._lengths import Length, read_length
from determined.common.expconf._optuna import OptunaSearcher, parse_optuna
from determined.common.expconf._pbt import PBTSearcher, parse_pbt
from determined.common.expconf._reader import Problems, Section, as_int, index, join

SEARCHER_NAMES = (
    "single",
    "random",
    "grid",
    "adaptive_asha",
    "async_halving",
    "optuna",
    "pbt",
)
# Searchers Determined's schema still describes but whose masters no longer run (or pydet does
# not): a config naming one is valid, and the master refuses to create the experiment.
UNSUPPORTED_SEARCHERS = ("sync_halving", "adaptive", "adaptive_simple", "custom")
AshaMode = Literal["aggressive", "standard", "conservative"]
ASHA_MODES: tuple[AshaMode, ...] = ("aggressive", "standard", "conservative")


@dataclass(frozen=True, kw_only=True)
class _SearcherBase:
    smaller_is_better: bool = True
    source_trial_id: int | None = None
    source_checkpoint_uuid: str | None = None
    # A finished experiment whose trials seed this search (pydet's warm start).
    source_experiment_id: int | None = None

    def _common_dict(self, name: str, metric: str | None) -> dict[str, Any]:
        return {
            "name": name,
            "metric": metric,
            "smaller_is_better": self.smaller_is_better,
            "source_trial_id": self.source_trial_id,
            "source_checkpoint_uuid": self.source_checkpoint_uuid,
            "source_experiment_id": self.source_experiment_id,
        }


def _length_dict(length: Length | None) -> dict[str, int] | int | None:
    return None if length is None else length.to_dict()


@dataclass(frozen=True, kw_only=True)
class SingleSearcher(_SearcherBase):
    """One trial with the hyperparameters' constant (or first) values."""

    name: ClassVar[Literal["single"]] = "single"
    metric: str | None = None
    max_length: Length | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._common_dict(self.name, self.metric),
            "max_length": _length_dict(self.max_length),
        }


@dataclass(frozen=True, kw_only=True)
class RandomSearcher(_SearcherBase):
    """``max_trials`` trials with independently sampled hyperparameters."""

    name: ClassVar[Literal["random"]] = "random"
    metric: str
    max_trials: int
    max_concurrent_trials: int = 16
    max_length: Length | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._common_dict(self.name, self.metric),
            "max_trials": self.max_trials,
            "max_concurrent_trials": self.max_concurrent_trials,
            "max_length": _length_dict(self.max_length),
        }


@dataclass(frozen=True, kw_only=True)
class GridSearcher(_SearcherBase):
    """One trial per point of the grid spanned by every hyperparameter's ``count`` values."""

    name: ClassVar[Literal["grid"]] = "grid"
    metric: str
    max_concurrent_trials: int = 16
    max_length: Length | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._common_dict(self.name, self.metric),
            "max_concurrent_trials": self.max_concurrent_trials,
            "max_length": _length_dict(self.max_length),
        }


@dataclass(frozen=True, kw_only=True)
class AdaptiveASHASearcher(_SearcherBase):
    """Asynchronous successive halving over random trials.

    Exactly one of two forms is set: ``max_length`` (the searcher hands out ever longer
    operations) or ``time_metric`` with ``max_time`` (trials train to ``max_time`` and the
    searcher stops losers early, judging progress by the reported ``time_metric``).
    """

    name: ClassVar[Literal["adaptive_asha"]] = "adaptive_asha"
    metric: str
    max_trials: int
    max_length: Length | None = None
    time_metric: str | None = None
    max_time: int | None = None
    mode: AshaMode = "standard"
    divisor: float = 4.0
    max_rungs: int = 5
    bracket_rungs: tuple[int, ...] | None = None
    max_concurrent_trials: int = 16
    stop_once: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._common_dict(self.name, self.metric),
            "max_trials": self.max_trials,
            "max_length": _length_dict(self.max_length),
            "time_metric": self.time_metric,
            "max_time": self.max_time,
            "mode": self.mode,
            "divisor": self.divisor,
            "max_rungs": self.max_rungs,
            "bracket_rungs": list(self.bracket_rungs or ()),
            "max_concurrent_trials": self.max_concurrent_trials,
            "stop_once": self.stop_once,
        }


@dataclass(frozen=True, kw_only=True)
class AsyncHalvingSearcher(AdaptiveASHASearcher):
    """Asynchronous successive halving in one bracket of ``num_rungs`` rungs: adaptive_asha
    without the brackets, run by the same search method."""

    name: ClassVar[Literal["async_halving"]] = "async_halving"  # type: ignore[assignment]  # a kind of ASHA with its own name
    num_rungs: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._common_dict(self.name, self.metric),
            "num_rungs": self.num_rungs,
            "max_trials": self.max_trials,
            "max_length": _length_dict(self.max_length),
            "time_metric": self.time_metric,
            "max_time": self.max_time,
            "divisor": self.divisor,
            "max_concurrent_trials": self.max_concurrent_trials,
            "stop_once": self.stop_once,
        }


@dataclass(frozen=True)
class UnsupportedSearcher:
    """A searcher of ``UNSUPPORTED_SEARCHERS``, kept as written so that the master can name it
    when it refuses the experiment."""

    name: str
    settings: dict[str, Any]
    metric: str | None = None
    smaller_is_better: bool = True
    source_trial_id: int | None = None
    source_checkpoint_uuid: str | None = None
    source_experiment_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.settings, "name": self.name}


SearcherConfig: TypeAlias = (
    SingleSearcher
    | RandomSearcher
    | GridSearcher
    | AdaptiveASHASearcher
    | OptunaSearcher
    | PBTSearcher
    | UnsupportedSearcher
)


class _Common(TypedDict):
    smaller_is_better: bool
    source_trial_id: int | None
    source_checkpoint_uuid: str | None
    source_experiment_id: int | None


def parse_searcher(problems: Problems, path: str, value: Any) -> SearcherConfig | None:
    if value is None:
        problems.add(path, "required")
        return None
    sec = Section(problems, path, value)
    if sec.raw("name") in UNSUPPORTED_SEARCHERS:
        return _unsupported(sec)
    name = sec.required_choice("name", SEARCHER_NAMES)
    if name is None:
        # Which other keys are allowed depends on the name; reporting them would be noise.
        sec.skip_rest()
        return None
    if name in ("optuna", "pbt"):
        # Searchers with settings of their own, each read in its module.
        parse = parse_optuna if name == "optuna" else parse_pbt
        found = parse(
            sec,
            smaller_is_better=sec.boolean("smaller_is_better", True),
            source_trial_id=sec.integer("source_trial_id", None, minimum=1),
            source_checkpoint_uuid=sec.string("source_checkpoint_uuid", None, non_empty=True),
            source_experiment_id=sec.integer("source_experiment_id", None, minimum=1),
        )
        sec.finish()
        return found
    metric = sec.string("metric", None) if name == "single" else sec.required_string("metric")
    common = _Common(
        smaller_is_better=sec.boolean("smaller_is_better", True),
        source_trial_id=sec.integer("source_trial_id", None, minimum=1),
        source_checkpoint_uuid=sec.string("source_checkpoint_uuid", None, non_empty=True),
        source_experiment_id=sec.integer("source_experiment_id", None, minimum=1),
    )
    searcher: SearcherConfig | None = None
    if name == "single":
        max_length = read_length(sec, "max_length", None, allow_bare=True, positive=True)
        searcher = SingleSearcher(metric=metric, max_length=max_length, **common)
    elif name == "random":
        max_trials = sec.required_integer("max_trials", minimum=1)
        max_concurrent_trials = sec.integer("max_concurrent_trials", 16, minimum=0)
        max_length = read_length(sec, "max_length", None, allow_bare=True, positive=True)
        if metric is not None and max_trials is not None:
            searcher = RandomSearcher(
                metric=metric,
                max_trials=max_trials,
                max_concurrent_trials=max_concurrent_trials,
                max_length=max_length,
                **common,
            )
    elif name == "grid":
        max_concurrent_trials = sec.integer("max_concurrent_trials", 16, minimum=0)
        max_length = read_length(sec, "max_length", None, allow_bare=True, positive=True)
        if metric is not None:
            searcher = GridSearcher(
                metric=metric,
                max_concurrent_trials=max_concurrent_trials,
                max_length=max_length,
                **common,
            )
    else:
        searcher = _adaptive_asha(sec, metric, common, halving=name == "async_halving")
    sec.finish()
    return searcher


def _unsupported(sec: Section) -> UnsupportedSearcher:
    """Checks the fields every searcher shares and keeps the rest as written."""
    metric = sec.string("metric", None)
    smaller_is_better = sec.boolean("smaller_is_better", True)
    source_trial_id = sec.integer("source_trial_id", None, minimum=1)
    source_checkpoint_uuid = sec.string("source_checkpoint_uuid", None, non_empty=True)
    source_experiment_id = sec.integer("source_experiment_id", None, minimum=1)
    settings = sec.json_copy()
    return UnsupportedSearcher(
        name=str(settings.pop("name")),
        settings=settings,
        metric=metric,
        smaller_is_better=smaller_is_better,
        source_trial_id=source_trial_id,
        source_checkpoint_uuid=source_checkpoint_uuid,
        source_experiment_id=source_experiment_id,
    )


def _adaptive_asha(
    sec: Section, metric: str | None, common: _Common, *, halving: bool
) -> AdaptiveASHASearcher | None:
    max_trials = sec.required_integer("max_trials", minimum=1)
    max_length = read_length(sec, "max_length", None, allow_bare=True, positive=True)
    time_metric = sec.string("time_metric", None, non_empty=True)
    max_time = sec.integer("max_time", None, minimum=1)
    by_length = sec.has("max_length")
    by_time = sec.has("time_metric") or sec.has("max_time")
    if by_length and by_time:
        sec.problems.add(
            sec.path, "adaptive_asha takes either max_length or time_metric and max_time, not both"
        )
    elif not by_length and not by_time:
        sec.problems.add(
            sec.path, "adaptive_asha needs either max_length or both time_metric and max_time"
        )
    elif by_time and not sec.has("time_metric"):
        sec.problems.add(sec.at("time_metric"), "required when max_time is set")
    elif by_time and not sec.has("max_time"):
        sec.problems.add(sec.at("max_time"), "required when time_metric is set")
    if halving:
        return _async_halving(sec, metric, max_trials, max_length, time_metric, max_time, common)
    mode = sec.choice("mode", "standard", ASHA_MODES)
    divisor = sec.number("divisor", 4.0, above=1)
    max_rungs = sec.integer("max_rungs", 5, minimum=1)
    bracket_rungs = sec.list_of("bracket_rungs", lambda p, v: as_int(sec.problems, p, v, minimum=1))
    max_concurrent_trials = sec.integer("max_concurrent_trials", 16, minimum=0)
    stop_once = sec.boolean("stop_once", False)
    if metric is None or max_trials is None:
        return None
    return AdaptiveASHASearcher(
        metric=metric,
        max_trials=max_trials,
        max_length=max_length,
        time_metric=time_metric,
        max_time=max_time,
        mode=mode,
        divisor=divisor,
        max_rungs=max_rungs,
        bracket_rungs=bracket_rungs or None,
        max_concurrent_trials=max_concurrent_trials,
        stop_once=stop_once,
        **common,
    )


def _async_halving(
    sec: Section,
    metric: str | None,
    max_trials: int | None,
    max_length: Length | None,
    time_metric: str | None,
    max_time: int | None,
    common: _Common,
) -> AsyncHalvingSearcher | None:
    num_rungs = sec.required_integer("num_rungs", minimum=1)
    divisor = sec.number("divisor", 4.0, above=1)
    max_concurrent_trials = sec.integer("max_concurrent_trials", 16, minimum=0)
    stop_once = sec.boolean("stop_once", False)
    if metric is None or max_trials is None or num_rungs is None:
        return None
    return AsyncHalvingSearcher(
        metric=metric,
        max_trials=max_trials,
        max_length=max_length,
        time_metric=time_metric,
        max_time=max_time,
        num_rungs=num_rungs,
        divisor=divisor,
        max_rungs=num_rungs,
        bracket_rungs=(num_rungs,),
        max_concurrent_trials=max_concurrent_trials,
        stop_once=stop_once,
        **common,
    )


def check_grid_counts(problems: Problems, path: str, tree: HParamTree) -> None:
    """Grid search needs a finite number of points on every range, also on ranges written
    inside a list (which Determined checks too)."""
    for names, hp in flatten_hparams(tree).items():
        hp_path = path
        for name in names:
            hp_path = join(hp_path, name)
        if isinstance(hp, IntHP | DoubleHP | LogHP) and hp.count is None:
            problems.add(join(hp_path, "count"), "required by the grid searcher")
        elif isinstance(hp, ConstHP) and isinstance(hp.val, list):
            _check_listed_counts(problems, hp_path, hp.val)


def _check_listed_counts(problems: Problems, path: str, value: Any) -> None:
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_listed_counts(problems, index(path, i), item)
    elif isinstance(value, dict) and "type" not in value:
        for key, item in value.items():
            _check_listed_counts(problems, join(path, key), item)
    elif isinstance(value, dict) and value.get("type") in RANGED_TYPES:
        if value.get("count") is None:
            problems.add(join(path, "count"), "required by the grid searcher")
