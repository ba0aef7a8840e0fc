"""A trial's lifecycle: its phases, the events that move it, and one transition table.

The table is the only place a trial's phase changes (as in Determined's
``master/internal/trial.go``); :func:`next_phase` looks an event up in it and refuses what
it does not list. Everything a trial can be doing is a phase — waiting for slots, running,
waiting for the searcher's verdict with or without a process, being stopped for a reason —
so that no decision is derived from lengths, flags or allocation strings. The state users
and the API see (ACTIVE, PAUSED, COMPLETED, ...) is derived from the phase by
:func:`trial_state`.

What stays data, not phase: the searcher's lengths (``searcher_length``,
``completed_length``), the restart count, and the early-exit reason the trial's code
reported (:func:`exit_event` turns those facts of an exit into one event).
"""

from __future__ import annotations

import enum

from determined.common import errors
from pydet.master.states import State


class TrialPhase(enum.Enum):
    # No process.
    QUEUED = "QUEUED"  # waiting for slots
    AWAITING_VERDICT = "AWAITING_VERDICT"  # did its length; the searcher promotes or closes it
    PAUSED = "PAUSED"  # its experiment is paused; queued again when it is activated
    PAUSED_AWAITING_VERDICT = "PAUSED_AWAITING_VERDICT"  # both of the above
    # A process (an allocation) exists.
    STARTING = "STARTING"  # placed on slots; its containers are starting
    RUNNING = "RUNNING"  # training towards the searcher's length
    REPORTED = "REPORTED"  # reported that length; awaits the verdict while its process ends
    PROMOTED = "PROMOTED"  # promoted after REPORTED: trains on, or is queued when it exits
    CLOSING = "CLOSING"  # the searcher closed it; COMPLETED when its process exits
    STOPPING = "STOPPING"  # asked to checkpoint and exit (preempted, paused, canceled)
    EARLY_STOPPING = "EARLY_STOPPING"  # stopped by the searcher; COMPLETED when it exits
    KILLING = "KILLING"  # killed by a user; CANCELED when its processes have exited
    # Ended.
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERRORED = "ERRORED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def has_process(self) -> bool:
        return self in WITH_PROCESS


class TrialEvent(enum.Enum):
    # From the scheduler and the trial's containers.
    PLACED = "placed"  # the scheduler gave it slots
    STARTED = "started"  # every container started (again, after a master restart)
    PREEMPTED = "preempted"  # the scheduler wants its slots back
    # From the trial's code.
    REPORTED = "reported"  # it reported the length the searcher asked for
    # From the searcher.
    PROMOTED = "promoted"  # ValidateAfter: train to a (longer) length
    CLOSED = "closed"  # Close: done once its current length is done
    STOPPED = "stopped"  # Stop: stop now, as a finished trial
    # From users, through its experiment or directly.
    PAUSED = "paused"
    ACTIVATED = "activated"
    CANCELED = "canceled"
    KILLED = "killed"
    # How its processes exited (see exit_event).
    EXITED = "exited"  # exit 0 without acknowledging a preemption: it ran its course
    EXITED_PREEMPTED = "exited_preempted"  # stopped as asked (acknowledged, or killed late)
    FAILED = "failed"  # a process failed; restarts are left
    AGENT_LOST = "agent_lost"  # an agent holding it was lost; restarts are left
    OUT_OF_RESTARTS = "out_of_restarts"  # failed or lost with no restart left
    EXITED_INVALID_HP = "exited_invalid_hp"  # exited after reporting det.InvalidHP
    EXITED_USER_CANCELED = "exited_user_canceled"  # exited after reporting it was canceled
    EXITED_ERRORED = "exited_errored"  # exited after reporting it errored
    # From a user continuing its ended experiment (`det experiment continue`).
    CONTINUED = "continued"
    # From the master itself.
    MASTER_RESTORED = "master_restored"  # the master restarted and found no process for it
    # From an unmanaged trial's script, run again under the trial's external id.
    RESUMED = "resumed"


P = TrialPhase
E = TrialEvent

PARKED = frozenset({P.QUEUED, P.AWAITING_VERDICT, P.PAUSED, P.PAUSED_AWAITING_VERDICT})
WITH_PROCESS = frozenset(
    {
        P.STARTING,
        P.RUNNING,
        P.REPORTED,
        P.PROMOTED,
        P.CLOSING,
        P.STOPPING,
        P.EARLY_STOPPING,
        P.KILLING,
    }
)
TERMINAL = frozenset({P.COMPLETED, P.CANCELED, P.ERRORED})
# Phases whose process (present or future) should train to the searcher's length; in the
# others the searcher has nothing for it (current_operation answers "completed").
TRAINING = frozenset({P.QUEUED, P.PAUSED, P.STARTING, P.RUNNING, P.PROMOTED, P.STOPPING})
# Phases that wait with their experiment: when it is paused or stopped, so are they.
FOLLOWS_EXPERIMENT = frozenset({P.QUEUED, P.AWAITING_VERDICT})

_EXITS = (
    E.EXITED,
    E.EXITED_PREEMPTED,
    E.FAILED,
    E.AGENT_LOST,
    E.OUT_OF_RESTARTS,
    E.EXITED_INVALID_HP,
    E.EXITED_USER_CANCELED,
    E.EXITED_ERRORED,
)


def _exits(resumed: TrialPhase, *, ran_out: TrialPhase = P.ERRORED) -> dict[TrialEvent, TrialPhase]:
    """Where a process phase goes when its processes exit: ``resumed`` after a clean exit
    that did not finish the trial, a preemption or a failure with restarts left."""
    return {
        E.EXITED_PREEMPTED: resumed,
        E.FAILED: resumed,
        E.AGENT_LOST: resumed,
        E.OUT_OF_RESTARTS: ran_out,
        E.EXITED_INVALID_HP: P.COMPLETED,
        E.EXITED_USER_CANCELED: P.CANCELED,
        E.EXITED_ERRORED: P.ERRORED,
    }


def _rows(phase: TrialPhase, moves: dict[TrialEvent, TrialPhase]) -> dict[Key, TrialPhase]:
    return {(phase, event): target for event, target in moves.items()}


Key = tuple[TrialPhase, TrialEvent]

# The transition table. A (phase, event) pair that is not here is refused.
TRANSITIONS: dict[Key, TrialPhase] = {
    # -- no process ------------------------------------------------------------------------
    **_rows(
        P.QUEUED,
        {
            E.PLACED: P.STARTING,
            E.PROMOTED: P.QUEUED,
            E.CLOSED: P.COMPLETED,
            E.STOPPED: P.COMPLETED,
            E.PAUSED: P.PAUSED,
            E.CANCELED: P.CANCELED,
            E.KILLED: P.CANCELED,
            E.MASTER_RESTORED: P.QUEUED,
        },
    ),
    **_rows(
        P.AWAITING_VERDICT,
        {
            E.PROMOTED: P.QUEUED,
            E.CLOSED: P.COMPLETED,
            E.STOPPED: P.COMPLETED,
            E.PAUSED: P.PAUSED_AWAITING_VERDICT,
            E.CANCELED: P.CANCELED,
            E.KILLED: P.CANCELED,
            E.MASTER_RESTORED: P.AWAITING_VERDICT,
        },
    ),
    **_rows(
        P.PAUSED,
        {
            E.PROMOTED: P.PAUSED,
            E.CLOSED: P.COMPLETED,
            E.STOPPED: P.COMPLETED,
            E.PAUSED: P.PAUSED,
            E.ACTIVATED: P.QUEUED,
            E.CANCELED: P.CANCELED,
            E.KILLED: P.CANCELED,
            E.MASTER_RESTORED: P.PAUSED,
        },
    ),
    **_rows(
        P.PAUSED_AWAITING_VERDICT,
        {
            E.PROMOTED: P.PAUSED,
            E.CLOSED: P.COMPLETED,
            E.STOPPED: P.COMPLETED,
            E.PAUSED: P.PAUSED_AWAITING_VERDICT,
            E.ACTIVATED: P.AWAITING_VERDICT,
            E.CANCELED: P.CANCELED,
            E.KILLED: P.CANCELED,
            E.MASTER_RESTORED: P.PAUSED_AWAITING_VERDICT,
        },
    ),
    # -- a process runs ----------------------------------------------------------------------
    # Pausing, canceling or preempting a trial that trains asks it to checkpoint and exit.
    # A clean exit without acknowledging that means it ran its course (COMPLETED), as when
    # it was never asked.
    **_rows(
        P.STARTING,
        {
            E.STARTED: P.RUNNING,
            E.REPORTED: P.REPORTED,
            E.PROMOTED: P.STARTING,
            E.CLOSED: P.CLOSING,
            E.STOPPED: P.EARLY_STOPPING,
            E.PREEMPTED: P.STOPPING,
            E.PAUSED: P.STOPPING,
            E.CANCELED: P.STOPPING,
            E.KILLED: P.KILLING,
            E.EXITED: P.COMPLETED,
            **_exits(P.QUEUED),
            E.MASTER_RESTORED: P.QUEUED,
        },
    ),
    **_rows(
        P.RUNNING,
        {
            E.STARTED: P.RUNNING,
            E.REPORTED: P.REPORTED,
            E.PROMOTED: P.RUNNING,
            E.CLOSED: P.CLOSING,
            E.STOPPED: P.EARLY_STOPPING,
            E.PREEMPTED: P.STOPPING,
            E.PAUSED: P.STOPPING,
            E.CANCELED: P.STOPPING,
            E.KILLED: P.KILLING,
            E.EXITED: P.COMPLETED,
            **_exits(P.QUEUED),
            E.MASTER_RESTORED: P.QUEUED,
        },
    ),
    # It has nothing left to train: its process is ending on its own, so pausing, canceling
    # or preempting it changes nothing but hurries it. Whatever ends it (a failure included:
    # a restart would have nothing to do), it then waits for the verdict without a process.
    **_rows(
        P.REPORTED,
        {
            E.STARTED: P.REPORTED,
            E.REPORTED: P.REPORTED,
            E.PROMOTED: P.PROMOTED,
            E.CLOSED: P.CLOSING,
            E.STOPPED: P.EARLY_STOPPING,
            E.PREEMPTED: P.REPORTED,
            E.PAUSED: P.REPORTED,
            E.CANCELED: P.REPORTED,
            E.KILLED: P.KILLING,
            E.EXITED: P.AWAITING_VERDICT,
            **_exits(P.AWAITING_VERDICT),
            E.MASTER_RESTORED: P.AWAITING_VERDICT,
        },
    ),
    # Promoted while its process was ending: if the process asks, it trains on; when it
    # exits, however it exits, the trial is queued to train from its latest checkpoint.
    **_rows(
        P.PROMOTED,
        {
            E.STARTED: P.PROMOTED,
            E.REPORTED: P.REPORTED,
            E.PROMOTED: P.PROMOTED,
            E.CLOSED: P.CLOSING,
            E.STOPPED: P.EARLY_STOPPING,
            E.PREEMPTED: P.PROMOTED,
            E.PAUSED: P.PROMOTED,
            E.CANCELED: P.PROMOTED,
            E.KILLED: P.KILLING,
            E.EXITED: P.QUEUED,
            **_exits(P.QUEUED),
            E.MASTER_RESTORED: P.QUEUED,
        },
    ),
    # Closed: the searcher has its result, so any end short of running out of restarts
    # completes it.
    **_rows(
        P.CLOSING,
        {
            E.STARTED: P.CLOSING,
            E.REPORTED: P.CLOSING,
            E.CLOSED: P.CLOSING,
            E.STOPPED: P.EARLY_STOPPING,
            E.PREEMPTED: P.CLOSING,
            E.PAUSED: P.CLOSING,
            E.CANCELED: P.CLOSING,
            E.KILLED: P.KILLING,
            E.EXITED: P.COMPLETED,
            **_exits(P.COMPLETED),
            E.MASTER_RESTORED: P.COMPLETED,
        },
    ),
    **_rows(
        P.STOPPING,
        {
            E.STARTED: P.STOPPING,
            E.REPORTED: P.REPORTED,
            E.PROMOTED: P.STOPPING,
            E.CLOSED: P.CLOSING,
            E.STOPPED: P.EARLY_STOPPING,
            E.PREEMPTED: P.STOPPING,
            E.PAUSED: P.STOPPING,
            E.CANCELED: P.STOPPING,
            E.KILLED: P.KILLING,
            E.EXITED: P.COMPLETED,
            **_exits(P.QUEUED),
            E.MASTER_RESTORED: P.QUEUED,
        },
    ),
    # Stopped by the searcher: it ends COMPLETED however its process exits, unless its code
    # said otherwise first.
    **_rows(
        P.EARLY_STOPPING,
        {
            E.STARTED: P.EARLY_STOPPING,
            E.REPORTED: P.EARLY_STOPPING,
            E.CLOSED: P.EARLY_STOPPING,
            E.STOPPED: P.EARLY_STOPPING,
            E.PREEMPTED: P.EARLY_STOPPING,
            E.PAUSED: P.EARLY_STOPPING,
            E.CANCELED: P.EARLY_STOPPING,
            E.KILLED: P.KILLING,
            E.EXITED: P.COMPLETED,
            **_exits(P.COMPLETED, ran_out=P.COMPLETED),
            E.MASTER_RESTORED: P.COMPLETED,
        },
    ),
    # Killed: CANCELED however its processes exit. The searcher may still promote it (it
    # learns of the kill when the trial ends).
    **_rows(
        P.KILLING,
        {
            **{
                event: P.KILLING
                for event in (
                    E.STARTED,
                    E.REPORTED,
                    E.PROMOTED,
                    E.CLOSED,
                    E.STOPPED,
                    E.PREEMPTED,
                    E.PAUSED,
                    E.CANCELED,
                    E.KILLED,
                )
            },
            **{event: P.CANCELED for event in _EXITS},
            E.MASTER_RESTORED: P.CANCELED,
        },
    ),
    # -- ended -------------------------------------------------------------------------------
    # Only an unmanaged trial leaves an end: its script runs again to resume it (the master
    # runs no other trial again once it has ended).
    **{(phase, E.RESUMED): P.RUNNING for phase in (P.COMPLETED, P.CANCELED, P.ERRORED)},
    # A continued experiment runs its ended trial again, from its latest checkpoint.
    **{(phase, E.CONTINUED): P.QUEUED for phase in TERMINAL},
}


class IllegalTransition(errors.FailedPrecondition):
    """An event the transition table does not allow in the trial's phase."""

    def __init__(self, phase: TrialPhase, event: TrialEvent) -> None:
        super().__init__(f"a trial that is {phase.value} cannot be {event.value}")
        self.phase = phase
        self.event = event


def next_phase(phase: TrialPhase, event: TrialEvent) -> TrialPhase:
    """The phase after ``event``; raises :class:`IllegalTransition` if the table has no row."""
    try:
        return TRANSITIONS[(phase, event)]
    except KeyError:
        raise IllegalTransition(phase, event) from None


def trial_state(phase: TrialPhase) -> State:
    """The trial state users and the API know (Determined's), derived from the phase."""
    if phase in (P.PAUSED, P.PAUSED_AWAITING_VERDICT):
        return State.PAUSED
    if phase is P.COMPLETED:
        return State.COMPLETED
    if phase is P.CANCELED:
        return State.CANCELED
    if phase is P.ERRORED:
        return State.ERROR
    return State.ACTIVE


def exit_event(
    *,
    early_exit: str,
    failed: bool,
    lost: bool,
    preempted: bool,
    acknowledged: bool,
    restarts_left: bool,
) -> TrialEvent:
    """The event of a trial's processes exiting, from the facts of the exit.

    ``early_exit`` is what the code reported before exiting ("" if nothing); ``preempted``
    says the master had asked it to checkpoint and exit, ``acknowledged`` that it said it
    would; ``restarts_left`` whether one more failure may be retried.
    """
    if early_exit == "invalid_hp":
        return E.EXITED_INVALID_HP
    if early_exit == "user_canceled":
        return E.EXITED_USER_CANCELED
    if early_exit == "errored":
        return E.EXITED_ERRORED
    if not failed:
        return E.EXITED_PREEMPTED if acknowledged else E.EXITED
    if preempted:
        return E.EXITED_PREEMPTED  # killed after its preemption timeout: it resumes
    if not restarts_left:
        return E.OUT_OF_RESTARTS
    return E.AGENT_LOST if lost else E.FAILED


# Failures that may be retried, if the trial still has work and restarts left.
COUNTED_FAILURES = frozenset({E.FAILED, E.AGENT_LOST, E.OUT_OF_RESTARTS})


def is_restart(phase: TrialPhase, event: TrialEvent) -> bool:
    """Whether ``event`` in ``phase`` is a failure after which the trial runs again: what
    the trial's ``restarts`` counts, as Determined counts it. A trial that always fails with
    ``max_restarts: 2`` runs three times and shows 2 restarts; the last failure, a failure
    while being killed or stopped, or one after its work was done, is not a restart."""
    if event not in COUNTED_FAILURES:
        return False
    after = TRANSITIONS.get((phase, event))
    return after is not None and not after.terminal and not after.has_process


def experiment_event(state: State) -> TrialEvent | None:
    """The event a trial waiting with its experiment gets from the experiment's state."""
    if state is State.PAUSED:
        return E.PAUSED
    if state is State.STOPPING_KILLED:
        return E.KILLED
    if state.stopping:
        return E.CANCELED
    return None


CLOSED = "closed"


def searcher_report(event: TrialEvent, phase: TrialPhase) -> str | None:
    """What the searcher hears when ``event`` ends a trial in ``phase``: ``CLOSED`` (it ended
    normally), an exit reason of ``searcher.EXIT_REASONS``, or None (nothing: its experiment
    was canceled)."""
    if phase is P.COMPLETED:
        return "invalid_hp" if event is E.EXITED_INVALID_HP else CLOSED
    if phase is P.ERRORED:
        return "errored"
    if phase is P.CANCELED:
        return None if event is E.CANCELED else "user_canceled"
    return None
