"""Model-based search through an Optuna study (``searcher.name: optuna``).

Optuna does the modelling (TPE, GP, CMA-ES, NSGA-II, QMC or random sampling, and the median,
successive-halving or hyperband pruner); this module only translates. Each trial is one
``study.ask()`` over the hyperparameter space (nested groups flattened to dotted names,
categorical values by their index so that any JSON value can be one, constants passed through),
trains once to ``max_length``, and its ``op.report_completed`` metric is told to the study
(for several objectives, the latest validation report's values of each metric). With a
pruner, every validation report is an intermediate value (``trial.report`` at its
``steps_completed``) and a trial the pruner gives up on is stopped through the preemption
signal, as stop-driven ASHA does, and told as pruned.

Durability: the study lives in memory, so the state is the ordered list of what the study
was told (asks, reports, tells). Loading it builds a fresh study with the same seeded sampler
and replays that list call by call, which leaves the sampler's random state, the pruner's
bookkeeping and the trial history exactly as they were, and the search continues as if the
master had never stopped.
"""

from __future__ import annotations

import logging
import math
import sys
import warnings
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState

from determined.common import expconf
from pydet.master.search.base import ImportedTrial, Operation, Stop
from pydet.master.search.request_ids import rid_sorted
from pydet.master.search.simple import BudgetedSearch

log = logging.getLogger(__name__)

# Optuna logs every trial at INFO through a handler of its own; its records go through the
# master's logging instead, where the entry point's configuration decides what is shown.
optuna.logging.disable_default_handler()
optuna.logging.enable_propagation()
logging.getLogger("optuna").setLevel(logging.WARNING)

_STUDY_NAME = "pydet"  # fixed: the hyperband pruner hashes it to place trials in brackets


class SearchSpace:
    """pydet's hyperparameter tree as Optuna distributions, and Optuna's values back."""

    def __init__(self, tree: expconf.HParamTree) -> None:
        self.paths: dict[str, tuple[str, ...]] = {}
        self.distributions: dict[str, BaseDistribution] = {}
        self.categories: dict[str, list[Any]] = {}
        self.consts: dict[tuple[str, ...], Any] = {}
        for path, hp in expconf.flatten_hparams(tree).items():
            if isinstance(hp, expconf.ConstHP):
                self.consts[path] = hp.val
                continue
            name = ".".join(path)
            if name in self.paths:  # a dotted key that spells the same as a nested group
                name = f"{name}#{len(self.paths)}"
            self.paths[name] = path
            self.distributions[name] = _distribution(hp)
            if isinstance(hp, expconf.CategoricalHP):
                self.categories[name] = list(hp.vals)

    def hparams(self, params: dict[str, Any]) -> dict[str, Any]:
        """An Optuna trial's parameters as the nested hyperparameters a trial gets."""
        values = dict(self.consts)
        for name, value in params.items():
            if name in self.categories:
                value = self.categories[name][int(value)]
            values[self.paths[name]] = value
        return expconf.unflatten_hparams(values)

    def params(self, hparams: dict[str, Any]) -> dict[str, Any]:
        """Nested hyperparameters (an old trial's) as an Optuna trial's parameters; raises
        ValueError, naming the hyperparameter, for values this space cannot hold."""
        flat = _flatten(hparams)
        params: dict[str, Any] = {}
        for name, path in self.paths.items():
            if path not in flat:
                raise ValueError(f"it has no value for {name}")
            value = flat[path]
            if name in self.categories:
                matches = [i for i, v in enumerate(self.categories[name]) if v == value]
                if not matches:
                    raise ValueError(f"{name}={value!r} is not one of this search's values")
                value = matches[0]
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name}={value!r} is not a number")
            dist = self.distributions[name]
            if isinstance(dist, IntDistribution):
                if value != int(value):
                    raise ValueError(f"{name}={value!r} is not an integer")
                value = int(value)
            if isinstance(dist, IntDistribution | FloatDistribution) and not (
                dist.low <= value <= dist.high
            ):
                raise ValueError(f"{name}={value!r} is outside [{dist.low}, {dist.high}]")
            params[name] = value
        return params


def _flatten(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    flat: dict[tuple[str, ...], Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, (*prefix, key)))
        flat[(*prefix, key)] = value
    return flat


def _distribution(hp: expconf.Hyperparameter) -> BaseDistribution:
    if isinstance(hp, expconf.IntHP):
        return IntDistribution(hp.minval, hp.maxval)
    if isinstance(hp, expconf.DoubleHP):
        return FloatDistribution(hp.minval, hp.maxval)
    if isinstance(hp, expconf.LogHP):
        # base**u with u uniform is log-uniform between base**minval and base**maxval.
        return FloatDistribution(hp.base**hp.minval, hp.base**hp.maxval, log=True)
    assert isinstance(hp, expconf.CategoricalHP)
    return CategoricalDistribution(list(range(len(hp.vals))))


def new_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    with warnings.catch_warnings():
        # GP and QMC are marked experimental; the config chose them knowingly.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed)
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed)
        if name == "cmaes":
            return optuna.samplers.CmaEsSampler(seed=seed)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "qmc":
            return optuna.samplers.QMCSampler(seed=seed, scramble=True)
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed)
    raise ValueError(f"no Optuna sampler named {name!r}")


def new_pruner(pruner: expconf.Pruner | None) -> optuna.pruners.BasePruner:
    if pruner is None:
        return optuna.pruners.NopPruner()
    if pruner.type == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=pruner.n_startup_trials,
            n_warmup_steps=pruner.n_warmup_steps,
            interval_steps=pruner.interval_steps,
            n_min_trials=pruner.n_min_trials,
        )
    if pruner.type == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource="auto" if pruner.min_resource is None else pruner.min_resource,
            reduction_factor=pruner.reduction_factor or 4,
            min_early_stopping_rate=pruner.min_early_stopping_rate,
        )
    return optuna.pruners.HyperbandPruner(
        min_resource=pruner.min_resource or 1,
        max_resource="auto" if pruner.max_resource is None else pruner.max_resource,
        reduction_factor=pruner.reduction_factor or 3,
    )


class OptunaSearch(BudgetedSearch):
    """``max_trials`` trials asked of an Optuna study, ``max_concurrent_trials`` at a time
    (0: no limit), each trained once to ``max_length`` unless the pruner stops it; a trial
    whose hyperparameters the user code rejected is replaced."""

    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        assert isinstance(config.searcher, expconf.OptunaSearcher)
        self.searcher = config.searcher
        self.seed = seed
        self.space = SearchSpace(config.hyperparameters)
        self.objectives = self.searcher.objectives
        # What the study has been told, in order: ["ask", rid, params],
        # ["report", rid, step, value], ["tell", rid, state, values], and before them the
        # warm start's ["import", source_trial_id, params, values].
        self.events: list[list[Any]] = []
        self.latest: dict[str, dict[str, float]] = {}  # latest objective values per trial
        self._new_study()

    def _new_study(self) -> None:
        self.study = optuna.create_study(
            storage=optuna.storages.InMemoryStorage(),
            sampler=new_sampler(self.searcher.sampler, self.seed),
            pruner=new_pruner(self.searcher.pruner),
            study_name=_STUDY_NAME,
            directions=["minimize" if o.smaller_is_better else "maximize" for o in self.objectives],
        )
        self.trials: dict[str, optuna.Trial] = {}
        self.steps: dict[str, set[int]] = {}
        self.told: set[str] = set()

    # -- the study -----------------------------------------------------------------------------

    def _do(self, event: list[Any]) -> bool:
        """Tells the study one event (live or replayed); for a report, whether to prune."""
        kind, rid = event[0], event[1]
        if kind == "import":
            params = dict(event[2])
            self.study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions={n: self.space.distributions[n] for n in params},
                    values=[float(v) for v in event[3]],
                )
            )
            return False
        if kind == "ask":
            trial = self.study.ask(self.space.distributions)
            self.trials[rid] = trial
            self.steps[rid] = set()
            if len(event) > 2 and trial.params != event[2]:
                log.warning("the replayed study proposed other values for %s", rid)
            return False
        if kind == "report":
            trial = self.trials[rid]
            trial.report(float(event[3]), int(event[2]))
            self.steps[rid].add(int(event[2]))
            # Always asked, also in replay: some pruners keep records when asked.
            return bool(trial.should_prune())
        state = TrialState[str(event[2])]
        values = event[3] if state == TrialState.COMPLETE else None
        self.study.tell(self.trials[rid], values=values, state=state)
        self.told.add(rid)
        return False

    def _record(self, event: list[Any]) -> bool:
        self.events.append(event)
        return self._do(event)

    def _tell(self, rid: str, state: str, values: list[float] | None = None) -> None:
        if rid in self.trials and rid not in self.told:
            self._record(["tell", rid, state, values])

    # -- warm start ----------------------------------------------------------------------------

    def import_trials(self, trials: list[ImportedTrial]) -> dict[int, str]:
        """Each old trial whose values fit this space and that reported every objective
        becomes a completed trial of the study, so that the sampler models it as if it had
        run here; the others are skipped with the reason."""
        skipped: dict[int, str] = {}
        for old in trials:
            try:
                params = self.space.params(old.hparams)
            except ValueError as e:
                skipped[old.trial_id] = f"skipped: {e}"
                continue
            values = [old.metrics.get(o.name) for o in self.objectives]
            missing = [o.name for o, v in zip(self.objectives, values, strict=True) if v is None]
            if missing:
                skipped[old.trial_id] = f"skipped: it reported no {', '.join(missing)}"
                continue
            self._record(
                ["import", old.trial_id, params, [_finite(float(v or 0.0)) for v in values]]
            )
        return skipped

    # -- trials --------------------------------------------------------------------------------

    def _hparams(self, index: int) -> dict[str, Any]:
        rid = f"r{self.created + 1}"  # the id the trial is about to get
        self._record(["ask", rid])
        params = dict(self.trials[rid].params)
        self.events[-1].append(params)
        return self.space.hparams(params)

    def _open(self, request_id: str) -> bool:
        return (
            self._known(request_id)
            and request_id not in self.finished
            and request_id not in self.closing
            and request_id not in self.told
        )

    def on_validation_reported(
        self, request_id: str, metrics: dict[str, Any], steps_completed: int
    ) -> list[Operation]:
        if not self._open(request_id):
            return []
        values = _values(metrics, [o.name for o in self.objectives])
        if values:
            self.latest[request_id] = {**self.latest.get(request_id, {}), **values}
        value = values.get(self.searcher.metric)
        if (
            self.searcher.pruner is None
            or self.searcher.metrics
            or value is None
            or steps_completed >= self.length
            or steps_completed in self.steps[request_id]
        ):
            return []
        if not self._record(["report", request_id, int(steps_completed), value]):
            return []
        self._close(request_id)
        self._tell(request_id, "PRUNED")
        return [Stop(request_id)]

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        if self._open(request_id) and length >= self.length:
            if self.searcher.metrics:
                latest = self.latest.get(request_id, {})
                values = [latest.get(o.name) for o in self.objectives]
            else:
                values = [None if math.isnan(metric) else _finite(float(metric))]
            if any(v is None for v in values):
                self._tell(request_id, "FAIL")
            else:
                self._tell(request_id, "COMPLETE", [float(v) for v in values if v is not None])
        return super().on_validation_completed(request_id, metric, length)

    def _trial_exited(self, request_id: str, reason: str) -> list[Operation]:
        self._tell(request_id, "FAIL")
        return super()._trial_exited(request_id, reason)

    def _trial_ended(self, request_id: str) -> list[Operation]:
        # Ended without reporting its full length: what it reported so far is all there is.
        self._tell(request_id, "PRUNED" if self.steps.get(request_id) else "FAIL")
        return super()._trial_ended(request_id)

    # -- results -------------------------------------------------------------------------------

    def best_trials(self) -> list[str]:
        """The request ids of the best trials: the best one, or for several objectives the
        Pareto front (no other trial is at least as good in every metric and better in one)."""
        numbers = {t.number: rid for rid, t in self.trials.items()}
        if not any(t.state == TrialState.COMPLETE for t in self.study.get_trials(deepcopy=False)):
            return []
        best = self.study.best_trials
        return rid_sorted([numbers[t.number] for t in best if t.number in numbers])

    # -- persistence ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "seed": self.seed,
            "events": [list(e) for e in self.events],
            "latest": {rid: self.latest[rid] for rid in rid_sorted(list(self.latest))},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        super().load_state_dict(state)
        self.seed = int(state["seed"])  # the sampler's seed: the replay must draw the same
        self._new_study()
        self.events = [list(e) for e in state["events"]]
        for event in self.events:
            self._do(event)
        self.latest = {k: {m: float(v) for m, v in d.items()} for k, d in state["latest"].items()}


def _values(metrics: dict[str, Any], names: list[str]) -> dict[str, float]:
    """The objectives present in a validation report as numbers (NaN counts as missing)."""
    found: dict[str, float] = {}
    for name in names:
        try:
            value = float(metrics[name])
        except (KeyError, TypeError, ValueError):
            continue
        if not math.isnan(value):
            found[name] = _finite(value)
    return found


def _finite(value: float) -> float:
    """Infinity as the largest float, so that the state stays strict JSON."""
    return max(-sys.float_info.max, min(sys.float_info.max, value))
