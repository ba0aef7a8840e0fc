"""Continuing an experiment, as ``det experiment continue`` does: an ended single-trial,
random or grid experiment runs again with an override merged over its config (``resume``),
and a random, ASHA or optuna search goes on with a larger budget (``grow``).

The experiment manager runs both as transitions (one transaction each, under the master's
lock) and hands them here."""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable
from typing import Any

from determined.common import errors, expconf
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import LiveExperiments
from pydet.master.experiments.restore import Restore
from pydet.master.experiments.search_runner import SearchRunner
from pydet.master.experiments.trial_lifecycle import TrialEvent, TrialPhase
from pydet.master.experiments.trial_moves import TrialMoves
from pydet.master.search import searcher
from pydet.master.states import State

log = logging.getLogger(__name__)

E = TrialEvent
P = TrialPhase


class Continuation:
    def __init__(
        self,
        *,
        store: ExperimentStore,
        live: LiveExperiments,
        moves: TrialMoves,
        runner: SearchRunner,
        restore: Restore,
        checked: Callable[[expconf.ExperimentConfig], expconf.ExperimentConfig],
    ) -> None:
        self._store = store
        self._live = live
        self._moves = moves
        self._runner = runner
        self._restore = restore
        self._checked = checked

    async def grow(self, experiment_id: int, max_trials: int) -> None:
        """``det experiment continue --max-trials``: a larger budget for a random, adaptive
        ASHA or optuna search, which goes on from its saved state. A running (or paused)
        experiment keeps its state; a completed one is brought back and activated."""
        exp = self._live.get(experiment_id)
        revived = exp is None
        if exp is None:
            stored = await self._store.ended_experiment(experiment_id)
            if stored.state != State.COMPLETED:
                raise errors.FailedPrecondition(
                    f"experiment {experiment_id} ended {stored.state.value}; only a completed "
                    "or running search can continue"
                )
            exp = await self._restore.experiment(stored)
        elif exp.state.stopping:
            raise errors.FailedPrecondition(f"experiment {experiment_id} is stopping")
        if exp.unmanaged:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is unmanaged: its script makes its trials, not a "
                "search the master could grow"
            )
        current = exp.config.searcher
        if not isinstance(
            current, expconf.RandomSearcher | expconf.AdaptiveASHASearcher | expconf.OptunaSearcher
        ):
            raise errors.InvalidArgument(
                f"searcher.max_trials: a {current.name} search has no max_trials to raise; "
                "random, adaptive_asha, async_halving and optuna searches can grow"
            )
        if max_trials <= current.max_trials:
            raise errors.InvalidArgument(
                f"searcher.max_trials: {max_trials} must be more than the experiment's "
                f"{current.max_trials}"
            )
        try:
            ops = exp.search.grow(max_trials)
        except ValueError as e:
            raise errors.InvalidArgument(f"searcher.max_trials: {e}") from None
        exp.config = dataclasses.replace(
            exp.config, searcher=dataclasses.replace(current, max_trials=max_trials)
        )
        exp.searcher_done = False
        await self._store.save_job(exp)  # the config, with the new budget
        if revived:
            self._live.add(exp)
            await self._runner.set_state(exp, State.ACTIVE)
        await self._runner.apply(exp, ops)
        log.info("experiment %d: its search grows to %d trials", exp.id, max_trials)

    async def resume(self, experiment_id: int, override: dict[str, Any]) -> None:
        """``det experiment continue`` as Determined does it: an ended experiment runs again
        with ``override`` merged over its config. A single-trial experiment's trial trains on
        from its latest checkpoint (to a new ``searcher.max_length``, say) whatever it ended
        as; a random or grid search runs its trials that did not complete, unchanged."""
        live = self._live.get(experiment_id)
        if live is not None:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is {live.state.value}; only an ended experiment "
                "can be continued (wait for it to end, or kill it)"
            )
        stored = await self._store.ended_experiment(experiment_id)
        if stored.unmanaged:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is unmanaged: its script runs off the cluster; "
                "run the script again with the same external_experiment_id to resume it"
            )
        name = stored.config.searcher.name
        single = name == "single"
        if name not in ("single", "random", "grid"):
            raise errors.InvalidArgument(
                f"searcher.name: a {name} experiment cannot be continued (single, random and "
                "grid ones can); raise a search's budget with --max-trials"
            )
        for key in ("project", "workspace"):
            if key in override:
                raise errors.InvalidArgument(
                    f"{key}: cannot be changed by a continue; move the experiment instead"
                )
        if override and not single:
            raise errors.InvalidArgument(
                f"override config: only a single-trial experiment takes one; experiment "
                f"{experiment_id} is a {name} search (continue it without --config)"
            )
        cfg = stored.config
        asked = override.get("searcher")
        if single and isinstance(asked, dict) and asked.get("name", "single") != "single":
            raise errors.InvalidArgument(
                f"searcher.name: experiment {experiment_id} is a single-trial experiment and "
                f"stays one; the override asks for {asked['name']}"
            )
        if override:
            try:
                cfg = self._checked(expconf.parse_experiment_config(override, cfg.to_dict()))
            except expconf.InvalidConfig as e:
                raise errors.InvalidArgument("; ".join(e.errors)) from None
            if cfg.searcher.name != "single":
                raise errors.InvalidArgument(
                    f"searcher.name: experiment {experiment_id} is a single-trial experiment "
                    f"and stays one; the override asks for {cfg.searcher.name}"
                )
        exp = await self._restore.experiment(dataclasses.replace(stored, config=cfg))
        again = [t for t in exp.trials.values() if single or t.phase is not P.COMPLETED]
        # The searcher first (in memory): the trials it runs again, then the trials a
        # search that ended early (canceled, killed) had still to create.
        ops = [op for t in again for op in exp.search.reopen(t.request_id)]
        existing = {t.request_id for t in exp.trials.values()}
        fill = [] if single else exp.search.refill(existing)
        if not again and not any(isinstance(op, searcher.Create) for op in fill):
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} has completed with all its trials; nothing is "
                "left to continue"
            )
        exp.searcher_done = False
        self._live.add(exp)
        await self._runner.set_state(exp, State.ACTIVE)
        await self._store.save_job(exp)  # the merged config
        await self._store.save_progress(exp, 0.0)
        hp_override = override.get("hyperparameters")
        for trial in again:
            trial.restarts = 0
            if isinstance(hp_override, dict):
                fresh = searcher.sample_hparams(cfg.hyperparameters, random.Random(trial.seed))
                trial.hparams = continued_hparams(trial.hparams, fresh, hp_override)
            trial.early_exit = ""
            self._live.add_trial(exp, trial)
            await self._store.reopen_trial(trial)
            await self._moves.fire(exp, trial, E.CONTINUED)
        await self._runner.apply(exp, ops + fill)
        log.info("experiment %d continues %d trial(s)", exp.id, len(again))


def continued_hparams(
    old: dict[str, Any], fresh: dict[str, Any], override: dict[str, Any]
) -> dict[str, Any]:
    """A continued trial's hyperparameters: those the override names take their new value
    (``fresh``, sampled from the merged config), the others keep the value the trial had."""
    out = dict(old)
    for key, spec in override.items():
        if key not in fresh:
            continue
        nested = isinstance(spec, dict) and "type" not in spec
        if nested and isinstance(old.get(key), dict) and isinstance(fresh[key], dict):
            out[key] = continued_hparams(old[key], fresh[key], spec)
        else:
            out[key] = fresh[key]
    return out


def parse_override(text: str) -> dict[str, Any]:
    """ContinueExperiment's override config (YAML; empty is no override)."""
    try:
        return expconf.load_yaml(text)
    except expconf.InvalidConfig as e:
        raise errors.InvalidArgument("override config: " + "; ".join(e.errors)) from None


def max_trials_override(raw: dict[str, Any]) -> int | None:
    """The new budget when the override is pydet's ``searcher.max_trials`` alone (``det
    experiment continue --max-trials``: a search grows from where it is); None for any other
    override, which continues the experiment as Determined does."""
    searcher_raw = raw.get("searcher")
    if (
        set(raw) != {"searcher"}
        or not isinstance(searcher_raw, dict)
        or set(searcher_raw) != {"max_trials"}
    ):
        return None
    value = searcher_raw["max_trials"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidArgument(
            f"searcher.max_trials: expected an integer >= 1, got {value!r}"
        )
    return value
