"""Restore after a master restart: every live experiment and its trials are loaded from the
store and moved on by what the restart means for each (one transaction per experiment). A
trial whose process still runs keeps it and is given again the orders it had been given in
memory; one whose process is gone is queued again or handed back to the searcher."""

from __future__ import annotations

import logging

from determined.common import errors
from pydet.master.experiments import trial_lifecycle as lifecycle
from pydet.master.experiments.experiment_store import ExperimentStore, StoredExperiment
from pydet.master.experiments.live import Experiment, LiveExperiments, Trial
from pydet.master.experiments.search_runner import SearchRunner
from pydet.master.experiments.trial_lifecycle import TrialEvent, TrialPhase
from pydet.master.experiments.trial_moves import TrialMoves
from pydet.master.search import searcher
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.task_list import TaskList

log = logging.getLogger(__name__)

E = TrialEvent
P = TrialPhase


class Restore:
    def __init__(
        self,
        db: Database,
        store: ExperimentStore,
        live: LiveExperiments,
        tasks: TaskList,
        moves: TrialMoves,
        runner: SearchRunner,
    ) -> None:
        self._db = db
        self._store = store
        self._live = live
        self._tasks = tasks
        self._moves = moves
        self._runner = runner

    async def load(self) -> None:
        """Every live experiment with its trials, from the store into the registry; nothing
        moves yet (the task manager restores its allocations with their jobs in between)."""
        for stored in await self._store.live_experiments():
            self._live.add(await self.experiment(stored))

    async def run(self, allocations: list[Allocation]) -> None:
        """Move each loaded experiment's trials on, one transaction per experiment;
        ``allocations`` are those the task manager found still running."""
        running = {a.trial_id: a for a in allocations}
        live_trials = {trial_id for exp in self._live for trial_id in exp.trials}
        for alloc in allocations:
            if alloc.trial_id is not None and alloc.trial_id not in live_trials:
                # Its trial has ended meanwhile (its experiment could not be restored).
                log.warning(
                    "trial %d: killing allocation %s of no live trial", alloc.trial_id, alloc.id
                )
                self._tasks.kill(alloc, reason="orphaned", grace=3.0)
        for exp in self._live:
            if exp.unmanaged:
                continue  # its script reports on (or ends it) whether the master restarted
            async with self._db.atomic():
                # Every trial is loaded before any moves: a move may end a trial, and the
                # searcher's answer may name any other.
                for trial in list(exp.trials.values()):
                    if not trial.phase.terminal:
                        await self._trial(exp, trial, running.get(trial.id))
                await self._runner.finish_if_done(exp)
        log.info("restored %d live experiments", len(self._live))

    async def experiment(self, stored: StoredExperiment) -> Experiment:
        """A stored experiment in memory, its searcher where it was and its trials loaded."""
        cfg = stored.config
        search = searcher.new_search(cfg, cfg.reproducibility.experiment_seed or 0)
        search.load_state_dict(stored.searcher_state)
        exp = Experiment(
            id=stored.id,
            config=cfg,
            state=stored.state,
            search=search,
            job_id=stored.job_id,
            username=stored.username,
            start_time=stored.start_time,
            queue_order=stored.queue_order,
            searcher_done=stored.searcher_done,
            unmanaged=stored.unmanaged,
        )
        try:
            exp.source_checkpoint = await self._store.source_checkpoint(cfg)
        except errors.DetError:
            exp.source_checkpoint = None
        exp.trials = {t.id: t for t in await self._store.trials(exp.id)}
        search.load_trial_records(await self._store.searcher_records(exp.id))
        return exp

    async def _trial(self, exp: Experiment, trial: Trial, alloc: Allocation | None) -> None:
        if trial.phase.terminal:
            return  # the searcher's answer to an earlier move ended it
        if alloc is None or not trial.phase.has_process:
            if alloc is not None:
                # Its process belongs to no run the store knows of: stop it.
                log.warning("trial %d: killing allocation %s of no run", trial.id, alloc.id)
                self._tasks.kill(alloc, reason="orphaned", grace=3.0)
            await self._runner.apply(exp, await self._moves.fire(exp, trial, E.MASTER_RESTORED))
            return
        # Its process runs on. The orders given to it before the restart were in memory only:
        # give them again.
        follow = lifecycle.experiment_event(exp.state)
        if follow is not None:
            await self._runner.apply(exp, await self._moves.fire(exp, trial, follow))
        if trial.phase is P.KILLING:
            await self._moves.kill(alloc)
        elif trial.phase is P.EARLY_STOPPING:
            await self._moves.preempt(exp, alloc, reason="stopped")
        elif trial.phase is P.STOPPING:
            await self._moves.preempt(exp, alloc, reason="preempted")
