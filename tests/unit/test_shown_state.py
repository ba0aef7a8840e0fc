"""The states users see: Determined's QUEUED / STARTING / RUNNING for what is stored ACTIVE."""

from __future__ import annotations

import pytest

from determined.api.gen import v1
from determined.common import errors
from pydet.master.experiments import shown_state
from pydet.master.experiments.trial_lifecycle import TrialPhase as P
from pydet.master.states import State


def test_every_trial_phase_has_a_shown_state() -> None:
    assert set(shown_state.TRIAL) == set(P)


@pytest.mark.parametrize(
    ("phase", "shown"),
    [
        (P.QUEUED, v1.State.QUEUED),
        (P.AWAITING_VERDICT, v1.State.QUEUED),
        (P.STARTING, v1.State.STARTING),
        (P.RUNNING, v1.State.RUNNING),
        (P.STOPPING, v1.State.RUNNING),
        (P.KILLING, v1.State.STOPPING_KILLED),
        (P.PAUSED, v1.State.PAUSED),
        (P.COMPLETED, v1.State.COMPLETED),
        (P.ERRORED, v1.State.ERROR),
    ],
)
def test_a_trial_is_shown_by_what_it_is_doing(phase: P, shown: v1.State) -> None:
    assert shown_state.trial(phase) is shown


def test_an_active_experiment_without_trials_is_queued() -> None:
    assert shown_state.experiment(State.ACTIVE, []) is v1.State.QUEUED


def test_an_active_experiment_shows_its_most_progressed_trial() -> None:
    phases = [P.QUEUED, P.STARTING, P.COMPLETED]
    assert shown_state.experiment(State.ACTIVE, phases) is v1.State.STARTING
    assert shown_state.experiment(State.ACTIVE, [*phases, P.RUNNING]) is v1.State.RUNNING
    assert shown_state.experiment(State.ACTIVE, [P.KILLING]) is v1.State.RUNNING


@pytest.mark.parametrize("state", [s for s in State if s is not State.ACTIVE])
def test_other_experiment_states_are_shown_as_stored(state: State) -> None:
    assert shown_state.experiment(state, [P.RUNNING]) is state.to_proto()


def test_a_starting_trial_whose_image_is_pulled_is_pulling() -> None:
    assert shown_state.trial(P.STARTING, pulling=True) is v1.State.PULLING
    # Pulling comes before the containers start: a trial past that is shown as it is.
    assert shown_state.trial(P.RUNNING, pulling=True) is v1.State.RUNNING
    assert shown_state.trial(P.QUEUED, pulling=True) is v1.State.QUEUED


def test_an_experiment_is_pulling_until_a_trial_is_further() -> None:
    starting = [P.QUEUED, P.STARTING]
    assert shown_state.experiment(State.ACTIVE, starting, pulling=1) is v1.State.PULLING
    # Of two starting trials only one pulls: the other is further.
    both = [P.STARTING, P.STARTING]
    assert shown_state.experiment(State.ACTIVE, both, pulling=1) is v1.State.STARTING
    assert shown_state.experiment(State.ACTIVE, both, pulling=2) is v1.State.PULLING
    assert shown_state.experiment(State.ACTIVE, [P.STARTING, P.RUNNING], pulling=1) is (
        v1.State.RUNNING
    )
    assert shown_state.experiment(State.PAUSED, [P.STARTING], pulling=1) is v1.State.PAUSED
    assert shown_state.stored(v1.State.PULLING) is State.ACTIVE


def test_asking_for_a_running_state_selects_the_active_experiments() -> None:
    assert shown_state.stored(v1.State.RUNNING) is State.ACTIVE
    assert shown_state.stored(v1.State.QUEUED) is State.ACTIVE
    assert shown_state.stored(v1.State.PAUSED) is State.PAUSED


def test_asking_for_a_state_no_experiment_is_in_is_a_clear_error() -> None:
    with pytest.raises(errors.InvalidArgument, match="no experiment is ever in state DELETED"):
        shown_state.stored(v1.State.DELETED)
