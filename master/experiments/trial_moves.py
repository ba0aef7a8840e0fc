"""Moving one trial by one event: the lifecycle's table says where it goes, and this module
carries out what the move orders — its request for slots queued or withdrawn, its
allocation killed or asked to stop, its row saved, the retention policy applied when it
ends — and hands the searcher's answer back when the move ended it."""

from __future__ import annotations

import logging
from typing import Protocol

from determined.api.gen import v1
from pydet.master.experiments import trial_lifecycle as lifecycle
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import Experiment, LiveExperiments, Trial
from pydet.master.experiments.trial_lifecycle import TrialEvent, TrialPhase
from pydet.master.search import searcher
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.task_list import TaskList, TaskRequest

log = logging.getLogger(__name__)

E = TrialEvent
P = TrialPhase


class CheckpointRecords(Protocol):
    """Where trials' checkpoints are recorded, and pruned by the retention policy."""

    async def record(self, checkpoint: v1.Checkpoint) -> None: ...

    async def apply_retention(self, exp: Experiment) -> None:
        """Delete the checkpoints the experiment's retention policy no longer keeps."""


class TrialMoves:
    def __init__(
        self,
        db: Database,
        store: ExperimentStore,
        live: LiveExperiments,
        tasks: TaskList,
        checkpoints: CheckpointRecords,
    ) -> None:
        self._db = db
        self._store = store
        self._live = live
        self._tasks = tasks
        self._checkpoints = checkpoints

    async def fire(
        self, exp: Experiment, trial: Trial, event: TrialEvent
    ) -> list[searcher.Operation]:
        """Move the trial by ``event`` (through the lifecycle's table; a trial left waiting
        for slots or for the verdict then follows its paused or stopping experiment), carry
        out the orders that go with it, and persist it. Returns the searcher's operations
        when the move ended the trial."""
        before = trial.phase
        after = lifecycle.next_phase(before, event)
        cause = event
        follow = lifecycle.experiment_event(exp.state)
        if after in lifecycle.FOLLOWS_EXPERIMENT and follow is not None:
            cause = follow
            after = lifecycle.next_phase(after, follow)
        trial.phase = after
        if after is not P.QUEUED:
            self._tasks.withdraw(trial.task_id)
        elif before is not P.QUEUED or event is E.MASTER_RESTORED:
            self.request(exp, trial)
        alloc = self._tasks.allocation_of(trial.task_id)
        if alloc is not None and after.has_process:
            if event is E.KILLED:
                await self.kill(alloc)
            elif event in (E.PAUSED, E.CANCELED, E.STOPPED) and after is not P.KILLING:
                await self.preempt(exp, alloc, reason=event.value)
        if not after.terminal:
            await self._store.save_trial(trial)
            return []
        await self._store.save_trial(trial, ended=True)
        self._live.trial_ended(trial)
        try:
            await self._checkpoints.apply_retention(exp)
        except Exception:
            # Retention is housekeeping: the trial has ended whatever happens to its files.
            log.exception("experiment %d: checkpoint retention failed", exp.id)
        if exp.unmanaged:
            return []  # its script, not a searcher, decides what comes next
        report = lifecycle.searcher_report(cause, after)
        if report == lifecycle.CLOSED:
            return exp.search.on_trial_closed(trial.request_id)
        if report is not None:
            return exp.search.on_trial_exited_early(trial.request_id, report)
        return []

    async def note(self, trial: Trial, text: str) -> None:
        """A line from the master in the trial's log, whether or not it has a process."""
        await self._tasks.trial_log(trial.id, trial.task_id, text)

    def request(self, exp: Experiment, trial: Trial) -> None:
        """Queue the trial's request for slots."""
        res = exp.config.resources
        self._tasks.request(
            TaskRequest(
                task_id=trial.task_id,
                trial_id=trial.id,
                slots=res.slots_per_trial,
                job=exp,
                single_node=bool(res.is_single_node),
                excluded_agents=trial.excluded_agents,
            )
        )

    async def kill(self, alloc: Allocation) -> None:
        """Order the allocation's containers killed once the transition has committed (a
        master restarted before that gives the order again, from the trial's phase)."""
        alloc.stop_reason = "killed"

        async def order() -> None:
            self._tasks.kill(alloc, reason="killed", grace=3.0)

        await self._db.after_commit(order)

    async def preempt(self, exp: Experiment, alloc: Allocation, *, reason: str) -> None:
        """Ask the allocation to checkpoint and exit once the transition has committed."""

        async def order() -> None:
            self._tasks.preempt(alloc, reason=reason, timeout=exp.config.preemption_timeout)

        await self._db.after_commit(order)
