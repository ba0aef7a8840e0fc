"""The state users see, as Determined reports it.

The master keeps an experiment ACTIVE while it runs, and a trial's phase says what it is
doing. Determined does not show ACTIVE for either: an active trial is QUEUED, PULLING,
STARTING or RUNNING by what its allocation is doing, and an active experiment takes the
most progressed of those over its trials (QUEUED when none has a process). Its e2e tests
wait for RUNNING. This module derives that shown state, in one table per kind, and the
stored states stay what the state machines need.
"""

from __future__ import annotations

from collections.abc import Iterable

from determined.api.gen import v1
from determined.common import errors
from pydet.master.experiments.trial_lifecycle import TrialPhase
from pydet.master.states import State, parse

P = TrialPhase

# What each trial phase is shown as. Phases without a process wait (QUEUED, or PAUSED with
# their experiment); a placed trial whose containers have not all started is STARTING; one
# being killed is STOPPING_KILLED until its processes exit, as Determined shows it.
TRIAL: dict[TrialPhase, v1.State] = {
    P.QUEUED: v1.State.QUEUED,
    P.AWAITING_VERDICT: v1.State.QUEUED,
    P.PAUSED: v1.State.PAUSED,
    P.PAUSED_AWAITING_VERDICT: v1.State.PAUSED,
    P.STARTING: v1.State.STARTING,
    P.RUNNING: v1.State.RUNNING,
    P.REPORTED: v1.State.RUNNING,
    P.PROMOTED: v1.State.RUNNING,
    P.CLOSING: v1.State.RUNNING,
    P.STOPPING: v1.State.RUNNING,
    P.EARLY_STOPPING: v1.State.RUNNING,
    P.KILLING: v1.State.STOPPING_KILLED,
    P.COMPLETED: v1.State.COMPLETED,
    P.CANCELED: v1.State.CANCELED,
    P.ERRORED: v1.State.ERROR,
}

# The shown states an ACTIVE stored state becomes, least progressed first.
PROGRESS = (v1.State.QUEUED, v1.State.PULLING, v1.State.STARTING, v1.State.RUNNING)


def trial(phase: TrialPhase, *, pulling: bool = False) -> v1.State:
    """The state a trial in ``phase`` is shown in; ``pulling``: an agent reported that it
    pulls the image of the trial's allocation, which has not started yet (PULLING, as
    Determined shows it, instead of STARTING)."""
    if pulling and phase is P.STARTING:
        return v1.State.PULLING
    return TRIAL[phase]


def experiment(state: State, trial_phases: Iterable[TrialPhase], *, pulling: int = 0) -> v1.State:
    """An experiment's shown state: its stored state, except that ACTIVE becomes the most
    progressed of its trials' (a trial being killed counts as running), QUEUED if none has
    begun. ``pulling`` of its starting trials wait for an image to be pulled."""
    if state is not State.ACTIVE:
        return state.to_proto()
    best = 0
    for phase in trial_phases:
        shown = v1.State.RUNNING if phase is P.KILLING else TRIAL[phase]
        if shown is v1.State.STARTING and pulling > 0:
            pulling -= 1
            shown = v1.State.PULLING
        if shown in PROGRESS:
            best = max(best, PROGRESS.index(shown))
    return PROGRESS[best]


def stored(state: v1.State) -> State:
    """The stored state a state a user asks for (``det e list --state``) selects: one of the
    shown ACTIVE states selects the ACTIVE ones."""
    if state in PROGRESS:
        return State.ACTIVE
    try:
        return parse(state.name)
    except ValueError:
        raise errors.InvalidArgument(
            f"no experiment is ever in state {state.name}; ask for one of "
            f"{', '.join(s.name for s in (*PROGRESS, *State))}"
        ) from None
