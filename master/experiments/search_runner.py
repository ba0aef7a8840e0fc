"""Running an experiment's search: the searcher's operations carried out (trials created,
promoted, closed or stopped; the search shut down), the searcher's state saved with them,
and the experiment finished once nothing is left to run."""

from __future__ import annotations

import logging

from pydet.master.experiments import trial_lifecycle as lifecycle
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import Experiment, LiveExperiments, Trial
from pydet.master.experiments.trial_lifecycle import TrialEvent, TrialPhase
from pydet.master.experiments.trial_moves import TrialMoves
from pydet.master.search import searcher
from pydet.master.states import STOPPED, State

log = logging.getLogger(__name__)

E = TrialEvent
P = TrialPhase


class SearchRunner:
    def __init__(self, store: ExperimentStore, live: LiveExperiments, moves: TrialMoves) -> None:
        self._store = store
        self._live = live
        self._moves = moves

    async def apply(self, exp: Experiment, ops: list[searcher.Operation]) -> None:
        """Carry out ``ops`` and every operation they lead to, save the searcher's state,
        and finish the experiment if that was the last of it."""
        queue = list(ops)
        while queue:
            op = queue.pop(0)
            if isinstance(op, searcher.Create):
                if exp.state.stopping:
                    continue  # the experiment is ending: no new trials
                parent = None
                if op.checkpoint_of is not None:
                    parent = exp.by_request(op.checkpoint_of)
                    if parent is None or parent.latest_checkpoint is None:
                        # The experiment fails: nothing more trains or starts.
                        queue = [o for o in queue if isinstance(o, searcher.Close | searcher.Stop)]
                        queue += await self._no_checkpoint(exp, op, parent)
                        continue
                trial = await self._create_trial(exp, op, parent)
                queue += exp.search.on_trial_created(trial.request_id)
                continue
            if isinstance(op, searcher.Shutdown):
                exp.searcher_done = True
                continue
            found = exp.by_request(op.request_id)
            if found is None or found.phase.terminal:
                continue
            trial = found
            if isinstance(op, searcher.ValidateAfter):
                event, length = E.PROMOTED, op.length
            else:
                event = E.CLOSED if isinstance(op, searcher.Close) else E.STOPPED
                length = trial.searcher_length
            try:
                lifecycle.next_phase(trial.phase, event)
            except lifecycle.IllegalTransition as e:
                log.error("experiment %d: the searcher's %s was refused: %s", exp.id, op, e)
                continue
            trial.searcher_length = length
            queue += await self._moves.fire(exp, trial, event)
        await self._store.save_search(exp)
        await self.finish_if_done(exp)

    async def _no_checkpoint(
        self, exp: Experiment, op: searcher.Create, parent: Trial | None
    ) -> list[searcher.Operation]:
        """A trial to start from another's checkpoint (PBT) when that one has none: the
        code saves no checkpoints, so the search cannot go on. The experiment fails, and
        the reason is in the parent's log and the master's."""
        name = f"trial {parent.id}" if parent else f"the searcher's trial {op.checkpoint_of}"
        message = (
            f"experiment {exp.id}: {name} has no checkpoint for the {exp.config.searcher.name}"
            " searcher to start a new trial from; its code must save a checkpoint"
            " (core_context.checkpoint.store_path) before it reports each searcher operation"
            " completed"
        )
        log.error("%s", message)
        if parent is not None:
            await self._moves.note(parent, f"ERROR: {message}")
        await self.set_state(exp, State.STOPPING_ERROR)
        ops: list[searcher.Operation] = []
        for trial in list(exp.trials.values()):
            if not trial.phase.terminal:
                ops += await self._moves.fire(exp, trial, E.CANCELED)
        return ops

    async def _create_trial(
        self, exp: Experiment, op: searcher.Create, parent: Trial | None = None
    ) -> Trial:
        # A new trial waits for slots, or is paused with its experiment.
        phase = P.QUEUED
        follow = lifecycle.experiment_event(exp.state)
        if follow is not None:
            phase = lifecycle.next_phase(phase, follow)
        trial = await self._store.insert_trial(
            exp,
            request_id=op.request_id,
            phase=phase,
            hparams=op.hparams,
            seed=op.seed,
            parent=parent,
        )
        self._live.add_trial(exp, trial)
        if phase is P.QUEUED:
            self._moves.request(exp, trial)
        if parent is not None and trial.latest_checkpoint is not None:
            await self._moves.note(trial, await self._fork_note(parent, trial.latest_checkpoint))
        return trial

    async def _fork_note(self, parent: Trial, checkpoint: str) -> str:
        """Where a child starts, for its log; a checkpoint older than the round its parent
        just finished is pointed out (the code checkpoints after reporting)."""
        steps = await self._store.checkpoint_steps(checkpoint)
        note = f"starts from trial {parent.id}'s checkpoint {checkpoint} (step {steps})"
        if steps < parent.completed_length:
            note += (
                f", older than the step {parent.completed_length} that trial reported: save a"
                " checkpoint before op.report_completed() to fork from the end of each round"
            )
        return note

    async def set_state(self, exp: Experiment, state: State) -> None:
        exp.state = state
        await self._store.save_state(exp)

    async def finish_if_done(self, exp: Experiment) -> None:
        """End the experiment if none of its trials is left and it is stopping, or its
        searcher has shut down."""
        if exp.state.terminal or not (
            exp.state.stopping or (exp.state == State.ACTIVE and exp.searcher_done)
        ):
            return
        # Newest first: a trial still running is most likely among the latest.
        if any(not t.state.terminal for t in reversed(exp.trials.values())):
            return
        if exp.state.stopping:
            final = STOPPED[exp.state]
        elif exp.state == State.ACTIVE and exp.searcher_done:
            states = [t.state for t in exp.trials.values()]
            if State.COMPLETED in states:
                final = State.COMPLETED
            elif states and all(s == State.ERROR for s in states):
                final = State.ERROR
            else:
                final = State.CANCELED
        else:
            return
        await self.set_state(exp, final)
        progress = 1.0 if final == State.COMPLETED else exp.search.progress()
        await self._store.save_progress(exp, progress)
        self._live.remove(exp)
        log.info("experiment %d finished: %s", exp.id, final.value)
