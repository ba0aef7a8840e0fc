"""An experiment and its trials as the master holds them while they run, the registry of
live experiments, and what the master tells new experiments about itself."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from determined.common import expconf
from pydet.master.experiments import trial_lifecycle as lifecycle
from pydet.master.experiments.trial_lifecycle import TrialPhase
from pydet.master.search import searcher
from pydet.master.states import State

# The priority of a job whose config sets none (the priority scheduler's middle).
DEFAULT_PRIORITY = 42


@dataclass
class Trial:
    id: int
    experiment_id: int
    request_id: str
    # Changed only by TrialMoves.fire, through the lifecycle's transition table.
    phase: TrialPhase
    hparams: dict[str, Any]
    seed: int
    restarts: int = 0
    run_id: int = 0
    steps_completed: int = 0
    latest_checkpoint: str | None = None
    searcher_length: int = 0
    completed_length: int = 0
    # Why its code said it exits early ("invalid_hp", "errored", "user_canceled"), or "".
    early_exit: str = ""
    # The label a matching log policy gave it (Determined's log_signal), or None.
    log_signal: str | None = None
    # Agents it is not placed on again (log policies with exclude_node matched there).
    excluded_agents: frozenset[str] = frozenset()
    # The run whose lines matched a log policy with cancel_retries (0: none): its failure
    # is final.
    cancel_retries_run: int = 0
    # The highest step the current run stored in each metric group, while this master has
    # seen all of them (the run started under it; None after a restore or for an unmanaged
    # trial): a report past them can have nothing stored to fold into (Reports.metrics).
    stored_steps: dict[str, int] | None = field(default=None, repr=False, compare=False)

    @property
    def retries_canceled(self) -> bool:
        return self.cancel_retries_run == self.run_id != 0

    @property
    def state(self) -> State:
        return lifecycle.trial_state(self.phase)

    @property
    def task_id(self) -> str:
        return f"{self.experiment_id}.{self.id}"


@dataclass
class Experiment:
    id: int
    config: expconf.ExperimentConfig
    state: State
    search: searcher.SearchMethod
    job_id: str = ""
    username: str = ""
    start_time: float = 0.0
    # A position set by `det job update --ahead-of/--behind-of`; 0 keeps submission order.
    queue_order: float = 0.0
    # Where new trials start from (searcher.source_trial_id / source_checkpoint_uuid).
    source_checkpoint: str | None = None
    searcher_done: bool = False
    # Reported into by a script off the cluster: its trials are made, started and ended
    # by that script (CreateTrial, StartTrial, PatchTrial), never scheduled or searched.
    unmanaged: bool = False
    # The SHA-256 of its context, hex: its trials' launchers find a copy their agent keeps
    # by it (determined.launch.context_cache). Known from its creation, or from the first
    # trial this master placed (the context is read once then).
    context_sha256: str = ""
    # False only while no checkpoint can have been recorded for it (a new experiment): its
    # trials' ends then skip the retention policy's reads of the store.
    may_have_checkpoints: bool = True
    trials: dict[int, Trial] = field(default_factory=dict)
    # Trial ids by request id, caught up from ``trials`` when it misses: the searcher names
    # trials by request id at every event, and an experiment may have thousands.
    _by_request: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def by_request(self, request_id: str) -> Trial | None:
        trial = self._indexed(request_id)
        if trial is not None:
            return trial
        # New trials are added last: index them, newest first, up to one already indexed.
        for t in reversed(self.trials.values()):
            if self._by_request.get(t.request_id) == t.id:
                break
            self._by_request[t.request_id] = t.id
        trial = self._indexed(request_id)
        if trial is None:  # unknown, or ``trials`` was replaced: index it all again
            self._by_request = {t.request_id: t.id for t in self.trials.values()}
            trial = self._indexed(request_id)
        return trial

    def _indexed(self, request_id: str) -> Trial | None:
        trial = self.trials.get(self._by_request.get(request_id, -1))
        return trial if trial is not None and trial.request_id == request_id else None

    # -- the experiment as a job (task_list.Job) --------------------------------------------
    # Its config is the one place its priority, weight, pool and max slots are kept: the
    # scheduler, `det job list` and `det experiment describe` all read them from there.

    @property
    def resource_pool(self) -> str:
        return self.config.resources.resource_pool

    @property
    def priority(self) -> int:
        priority = self.config.resources.priority
        return DEFAULT_PRIORITY if priority is None else priority

    @property
    def weight(self) -> float:
        return self.config.resources.weight

    @property
    def max_slots(self) -> int | None:
        return self.config.resources.max_slots

    @property
    def order(self) -> float:
        return self.queue_order or float(self.id)

    @property
    def preemption_timeout(self) -> float:
        return float(self.config.preemption_timeout)


class LiveExperiments:
    """The experiments not yet ended, and their unfinished trials by id. Ended ones live
    only in the store."""

    def __init__(self) -> None:
        self._experiments: dict[int, Experiment] = {}
        self._trials: dict[int, Trial] = {}

    def __iter__(self) -> Iterator[Experiment]:
        return iter(list(self._experiments.values()))

    def __len__(self) -> int:
        return len(self._experiments)

    def get(self, experiment_id: int) -> Experiment | None:
        return self._experiments.get(experiment_id)

    def trial(self, trial_id: int) -> tuple[Experiment, Trial] | None:
        """A trial that has not ended, with its experiment."""
        trial = self._trials.get(trial_id)
        if trial is None:
            return None
        return self._experiments[trial.experiment_id], trial

    def experiment_of(self, trial_id: int) -> Experiment | None:
        """The experiment of a trial that has not ended."""
        found = self.trial(trial_id)
        return None if found is None else found[0]

    def add(self, exp: Experiment) -> None:
        """An experiment, with those of its trials that have not ended."""
        self._experiments[exp.id] = exp
        for trial in exp.trials.values():
            if not trial.phase.terminal:
                self._trials[trial.id] = trial

    def add_trial(self, exp: Experiment, trial: Trial) -> None:
        exp.trials[trial.id] = trial
        self._trials[trial.id] = trial

    def trial_ended(self, trial: Trial) -> None:
        self._trials.pop(trial.id, None)

    def remove(self, exp: Experiment) -> None:
        del self._experiments[exp.id]
