"""The trial lifecycle's transition table, row by row, against the specification below.

The table in ``master/experiments/trial_lifecycle.py`` is the only place a trial's phase
changes; this file spells out, independently, what each (phase, event) pair must do, and
that every pair it does not list is refused.
"""

from __future__ import annotations

import itertools

import pytest

from determined.common import errors
from pydet.master.experiments import trial_lifecycle as lifecycle
from pydet.master.experiments.trial_lifecycle import (
    IllegalTransition,
    TrialEvent,
    TrialPhase,
    next_phase,
)
from pydet.master.states import State

E = TrialEvent
P = TrialPhase

# phase, event, the phase after it. Read down a block: everything that can happen to a trial
# in that phase.
SPEC = """
    QUEUED                  placed                STARTING
    QUEUED                  promoted              QUEUED
    QUEUED                  closed                COMPLETED
    QUEUED                  stopped               COMPLETED
    QUEUED                  paused                PAUSED
    QUEUED                  canceled              CANCELED
    QUEUED                  killed                CANCELED
    QUEUED                  master_restored       QUEUED
    AWAITING_VERDICT        promoted              QUEUED
    AWAITING_VERDICT        closed                COMPLETED
    AWAITING_VERDICT        stopped               COMPLETED
    AWAITING_VERDICT        paused                PAUSED_AWAITING_VERDICT
    AWAITING_VERDICT        canceled              CANCELED
    AWAITING_VERDICT        killed                CANCELED
    AWAITING_VERDICT        master_restored       AWAITING_VERDICT
    PAUSED                  promoted              PAUSED
    PAUSED                  closed                COMPLETED
    PAUSED                  stopped               COMPLETED
    PAUSED                  paused                PAUSED
    PAUSED                  activated             QUEUED
    PAUSED                  canceled              CANCELED
    PAUSED                  killed                CANCELED
    PAUSED                  master_restored       PAUSED
    PAUSED_AWAITING_VERDICT promoted              PAUSED
    PAUSED_AWAITING_VERDICT closed                COMPLETED
    PAUSED_AWAITING_VERDICT stopped               COMPLETED
    PAUSED_AWAITING_VERDICT paused                PAUSED_AWAITING_VERDICT
    PAUSED_AWAITING_VERDICT activated             AWAITING_VERDICT
    PAUSED_AWAITING_VERDICT canceled              CANCELED
    PAUSED_AWAITING_VERDICT killed                CANCELED
    PAUSED_AWAITING_VERDICT master_restored       PAUSED_AWAITING_VERDICT
    STARTING                started               RUNNING
    STARTING                reported              REPORTED
    STARTING                promoted              STARTING
    STARTING                closed                CLOSING
    STARTING                stopped               EARLY_STOPPING
    STARTING                preempted             STOPPING
    STARTING                paused                STOPPING
    STARTING                canceled              STOPPING
    STARTING                killed                KILLING
    STARTING                exited                COMPLETED
    STARTING                exited_preempted      QUEUED
    STARTING                failed                QUEUED
    STARTING                agent_lost            QUEUED
    STARTING                out_of_restarts       ERRORED
    STARTING                exited_invalid_hp     COMPLETED
    STARTING                exited_user_canceled  CANCELED
    STARTING                exited_errored        ERRORED
    STARTING                master_restored       QUEUED
    RUNNING                 started               RUNNING
    RUNNING                 reported              REPORTED
    RUNNING                 promoted              RUNNING
    RUNNING                 closed                CLOSING
    RUNNING                 stopped               EARLY_STOPPING
    RUNNING                 preempted             STOPPING
    RUNNING                 paused                STOPPING
    RUNNING                 canceled              STOPPING
    RUNNING                 killed                KILLING
    RUNNING                 exited                COMPLETED
    RUNNING                 exited_preempted      QUEUED
    RUNNING                 failed                QUEUED
    RUNNING                 agent_lost            QUEUED
    RUNNING                 out_of_restarts       ERRORED
    RUNNING                 exited_invalid_hp     COMPLETED
    RUNNING                 exited_user_canceled  CANCELED
    RUNNING                 exited_errored        ERRORED
    RUNNING                 master_restored       QUEUED
    REPORTED                started               REPORTED
    REPORTED                reported              REPORTED
    REPORTED                promoted              PROMOTED
    REPORTED                closed                CLOSING
    REPORTED                stopped               EARLY_STOPPING
    REPORTED                preempted             REPORTED
    REPORTED                paused                REPORTED
    REPORTED                canceled              REPORTED
    REPORTED                killed                KILLING
    REPORTED                exited                AWAITING_VERDICT
    REPORTED                exited_preempted      AWAITING_VERDICT
    REPORTED                failed                AWAITING_VERDICT
    REPORTED                agent_lost            AWAITING_VERDICT
    REPORTED                out_of_restarts       ERRORED
    REPORTED                exited_invalid_hp     COMPLETED
    REPORTED                exited_user_canceled  CANCELED
    REPORTED                exited_errored        ERRORED
    REPORTED                master_restored       AWAITING_VERDICT
    PROMOTED                started               PROMOTED
    PROMOTED                reported              REPORTED
    PROMOTED                promoted              PROMOTED
    PROMOTED                closed                CLOSING
    PROMOTED                stopped               EARLY_STOPPING
    PROMOTED                preempted             PROMOTED
    PROMOTED                paused                PROMOTED
    PROMOTED                canceled              PROMOTED
    PROMOTED                killed                KILLING
    PROMOTED                exited                QUEUED
    PROMOTED                exited_preempted      QUEUED
    PROMOTED                failed                QUEUED
    PROMOTED                agent_lost            QUEUED
    PROMOTED                out_of_restarts       ERRORED
    PROMOTED                exited_invalid_hp     COMPLETED
    PROMOTED                exited_user_canceled  CANCELED
    PROMOTED                exited_errored        ERRORED
    PROMOTED                master_restored       QUEUED
    CLOSING                 started               CLOSING
    CLOSING                 reported              CLOSING
    CLOSING                 closed                CLOSING
    CLOSING                 stopped               EARLY_STOPPING
    CLOSING                 preempted             CLOSING
    CLOSING                 paused                CLOSING
    CLOSING                 canceled              CLOSING
    CLOSING                 killed                KILLING
    CLOSING                 exited                COMPLETED
    CLOSING                 exited_preempted      COMPLETED
    CLOSING                 failed                COMPLETED
    CLOSING                 agent_lost            COMPLETED
    CLOSING                 out_of_restarts       ERRORED
    CLOSING                 exited_invalid_hp     COMPLETED
    CLOSING                 exited_user_canceled  CANCELED
    CLOSING                 exited_errored        ERRORED
    CLOSING                 master_restored       COMPLETED
    STOPPING                started               STOPPING
    STOPPING                reported              REPORTED
    STOPPING                promoted              STOPPING
    STOPPING                closed                CLOSING
    STOPPING                stopped               EARLY_STOPPING
    STOPPING                preempted             STOPPING
    STOPPING                paused                STOPPING
    STOPPING                canceled              STOPPING
    STOPPING                killed                KILLING
    STOPPING                exited                COMPLETED
    STOPPING                exited_preempted      QUEUED
    STOPPING                failed                QUEUED
    STOPPING                agent_lost            QUEUED
    STOPPING                out_of_restarts       ERRORED
    STOPPING                exited_invalid_hp     COMPLETED
    STOPPING                exited_user_canceled  CANCELED
    STOPPING                exited_errored        ERRORED
    STOPPING                master_restored       QUEUED
    EARLY_STOPPING          started               EARLY_STOPPING
    EARLY_STOPPING          reported              EARLY_STOPPING
    EARLY_STOPPING          closed                EARLY_STOPPING
    EARLY_STOPPING          stopped               EARLY_STOPPING
    EARLY_STOPPING          preempted             EARLY_STOPPING
    EARLY_STOPPING          paused                EARLY_STOPPING
    EARLY_STOPPING          canceled              EARLY_STOPPING
    EARLY_STOPPING          killed                KILLING
    EARLY_STOPPING          exited                COMPLETED
    EARLY_STOPPING          exited_preempted      COMPLETED
    EARLY_STOPPING          failed                COMPLETED
    EARLY_STOPPING          agent_lost            COMPLETED
    EARLY_STOPPING          out_of_restarts       COMPLETED
    EARLY_STOPPING          exited_invalid_hp     COMPLETED
    EARLY_STOPPING          exited_user_canceled  CANCELED
    EARLY_STOPPING          exited_errored        ERRORED
    EARLY_STOPPING          master_restored       COMPLETED
    KILLING                 started               KILLING
    KILLING                 reported              KILLING
    KILLING                 promoted              KILLING
    KILLING                 closed                KILLING
    KILLING                 stopped               KILLING
    KILLING                 preempted             KILLING
    KILLING                 paused                KILLING
    KILLING                 canceled              KILLING
    KILLING                 killed                KILLING
    KILLING                 exited                CANCELED
    KILLING                 exited_preempted      CANCELED
    KILLING                 failed                CANCELED
    KILLING                 agent_lost            CANCELED
    KILLING                 out_of_restarts       CANCELED
    KILLING                 exited_invalid_hp     CANCELED
    KILLING                 exited_user_canceled  CANCELED
    KILLING                 exited_errored        CANCELED
    KILLING                 master_restored       CANCELED
    COMPLETED               resumed               RUNNING
    CANCELED                resumed               RUNNING
    ERRORED                 resumed               RUNNING
    COMPLETED               continued             QUEUED
    CANCELED                continued             QUEUED
    ERRORED                 continued             QUEUED
"""


def _spec() -> dict[tuple[TrialPhase, TrialEvent], TrialPhase]:
    rows = {}
    for line in SPEC.strip().splitlines():
        phase, event, after = line.split()
        rows[(P(phase), E(event))] = P(after)
    return rows


ROWS = _spec()


@pytest.mark.parametrize(
    ("phase", "event", "after"),
    [(p, e, a) for (p, e), a in ROWS.items()],
    ids=[f"{p.value}-{e.value}" for p, e in ROWS],
)
def test_row(phase: TrialPhase, event: TrialEvent, after: TrialPhase) -> None:
    assert next_phase(phase, event) is after


def test_the_table_has_no_row_beyond_the_specification() -> None:
    assert lifecycle.TRANSITIONS == ROWS


@pytest.mark.parametrize(
    ("phase", "event"),
    [pair for pair in itertools.product(P, E) if pair not in ROWS],
    ids=lambda v: str(v.value),
)
def test_every_other_pair_is_refused(phase: TrialPhase, event: TrialEvent) -> None:
    with pytest.raises(IllegalTransition) as info:
        next_phase(phase, event)
    assert info.value.phase is phase and info.value.event is event
    # A refusal is an expected error: callers of the API get FAILED_PRECONDITION.
    assert isinstance(info.value, errors.FailedPrecondition)
    assert phase.value in str(info.value) and event.value in str(info.value)


def test_ended_trials_take_only_a_continue_or_an_unmanaged_scripts_resume() -> None:
    for phase in (P.COMPLETED, P.CANCELED, P.ERRORED):
        assert {e for p, e in ROWS if p is phase} == {E.CONTINUED, E.RESUMED}


def test_phases_with_a_process_are_exactly_those_its_exits_move() -> None:
    exits = {p for p, e in ROWS if e is E.EXITED}
    assert exits == lifecycle.WITH_PROCESS
    assert all(p.has_process for p in exits)
    assert not any(p.has_process for p in lifecycle.PARKED | lifecycle.TERMINAL)


@pytest.mark.parametrize(
    ("phase", "state"),
    [
        (P.QUEUED, State.ACTIVE),
        (P.STARTING, State.ACTIVE),
        (P.RUNNING, State.ACTIVE),
        (P.REPORTED, State.ACTIVE),
        (P.PROMOTED, State.ACTIVE),
        (P.CLOSING, State.ACTIVE),
        (P.STOPPING, State.ACTIVE),
        (P.EARLY_STOPPING, State.ACTIVE),
        (P.KILLING, State.ACTIVE),
        (P.AWAITING_VERDICT, State.ACTIVE),
        (P.PAUSED, State.PAUSED),
        (P.PAUSED_AWAITING_VERDICT, State.PAUSED),
        (P.COMPLETED, State.COMPLETED),
        (P.CANCELED, State.CANCELED),
        (P.ERRORED, State.ERROR),
    ],
)
def test_the_state_users_see_follows_from_the_phase(phase: TrialPhase, state: State) -> None:
    assert lifecycle.trial_state(phase) is state
    assert phase.terminal == state.terminal


def _exit(
    *,
    early_exit: str = "",
    failed: bool = False,
    lost: bool = False,
    preempted: bool = False,
    acknowledged: bool = False,
    restarts_left: bool = True,
) -> TrialEvent:
    return lifecycle.exit_event(
        early_exit=early_exit,
        failed=failed,
        lost=lost,
        preempted=preempted,
        acknowledged=acknowledged,
        restarts_left=restarts_left,
    )


def test_exit_events_from_the_facts_of_an_exit() -> None:
    assert _exit() is E.EXITED
    assert _exit(preempted=True) is E.EXITED  # asked, but it ran its course without saying so
    assert _exit(preempted=True, acknowledged=True) is E.EXITED_PREEMPTED
    assert _exit(failed=True, preempted=True) is E.EXITED_PREEMPTED  # killed after its timeout
    assert _exit(failed=True) is E.FAILED
    assert _exit(failed=True, lost=True) is E.AGENT_LOST
    assert _exit(failed=True, restarts_left=False) is E.OUT_OF_RESTARTS
    assert _exit(failed=True, lost=True, restarts_left=False) is E.OUT_OF_RESTARTS


def test_what_the_code_reported_wins_over_how_it_exited() -> None:
    for failed, preempted in ((False, False), (True, False), (True, True)):
        facts = {"failed": failed, "preempted": preempted}
        assert _exit(early_exit="invalid_hp", **facts) is E.EXITED_INVALID_HP
        assert _exit(early_exit="user_canceled", **facts) is E.EXITED_USER_CANCELED
        assert _exit(early_exit="errored", **facts) is E.EXITED_ERRORED


def test_waiting_trials_follow_their_experiment() -> None:
    assert lifecycle.experiment_event(State.ACTIVE) is None
    assert lifecycle.experiment_event(State.PAUSED) is E.PAUSED
    assert lifecycle.experiment_event(State.STOPPING_CANCELED) is E.CANCELED
    assert lifecycle.experiment_event(State.STOPPING_KILLED) is E.KILLED
    assert next_phase(P.QUEUED, E.PAUSED) is P.PAUSED
    assert next_phase(P.AWAITING_VERDICT, E.PAUSED) is P.PAUSED_AWAITING_VERDICT
    assert lifecycle.FOLLOWS_EXPERIMENT == {P.QUEUED, P.AWAITING_VERDICT}


def test_the_searcher_hears_how_each_trial_ended() -> None:
    closed = lifecycle.CLOSED
    assert lifecycle.searcher_report(E.EXITED, P.COMPLETED) == closed
    assert lifecycle.searcher_report(E.CLOSED, P.COMPLETED) == closed
    assert lifecycle.searcher_report(E.STOPPED, P.COMPLETED) == closed
    assert lifecycle.searcher_report(E.EXITED_INVALID_HP, P.COMPLETED) == "invalid_hp"
    assert lifecycle.searcher_report(E.OUT_OF_RESTARTS, P.ERRORED) == "errored"
    assert lifecycle.searcher_report(E.EXITED_ERRORED, P.ERRORED) == "errored"
    assert lifecycle.searcher_report(E.KILLED, P.CANCELED) == "user_canceled"
    assert lifecycle.searcher_report(E.EXITED, P.CANCELED) == "user_canceled"  # from KILLING
    assert lifecycle.searcher_report(E.EXITED_USER_CANCELED, P.CANCELED) == "user_canceled"
    # A canceled experiment's trials end without telling its searcher anything.
    assert lifecycle.searcher_report(E.CANCELED, P.CANCELED) is None


def test_only_trials_with_work_left_are_given_a_length() -> None:
    assert lifecycle.TRAINING == {
        P.QUEUED,
        P.PAUSED,
        P.STARTING,
        P.RUNNING,
        P.PROMOTED,
        P.STOPPING,
    }
    # A trial that reported its length keeps that fact through a pause.
    assert next_phase(next_phase(P.REPORTED, E.EXITED), E.PAUSED) not in lifecycle.TRAINING
    assert next_phase(P.PAUSED_AWAITING_VERDICT, E.ACTIVATED) not in lifecycle.TRAINING


def test_a_failure_is_a_restart_only_when_the_trial_runs_again() -> None:
    assert lifecycle.is_restart(P.RUNNING, E.FAILED)
    assert lifecycle.is_restart(P.STARTING, E.AGENT_LOST)
    # The last failure ends the trial: Determined shows max_restarts, not one more.
    assert not lifecycle.is_restart(P.RUNNING, E.OUT_OF_RESTARTS)
    # Killed or stopped by the searcher: it does not run again.
    assert not lifecycle.is_restart(P.KILLING, E.FAILED)
    assert not lifecycle.is_restart(P.EARLY_STOPPING, E.FAILED)
    # Not a failure at all.
    assert not lifecycle.is_restart(P.RUNNING, E.EXITED_PREEMPTED)
