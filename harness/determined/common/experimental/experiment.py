"""``Experiment``: an experiment on the master, and what a script can do with it."""

from __future__ import annotations

import datetime
import sys
import time
from typing import TYPE_CHECKING, Any

from determined.common import errors
from determined.common.experimental import checkpoint as ckpt
from determined.common.experimental._state import ExperimentState as ExperimentState
from determined.common.experimental.trial import OrderBy, Trial, TrialSortBy

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession


TERMINAL_STATES = frozenset(
    {
        ExperimentState.COMPLETED,
        ExperimentState.CANCELED,
        ExperimentState.ERROR,
        ExperimentState.DELETED,
    }
)


class Experiment:
    """An experiment: ``id``, ``name``, ``state``, ``config`` (filled), ``progress``,
    ``archived``, ``labels``, ``description``; ``reload()`` refreshes them.

    Get one from ``client.create_experiment``, ``client.get_experiment`` or
    ``client.list_experiments``.
    """

    def __init__(self, experiment_id: int, session: MasterSession) -> None:
        self.id = experiment_id
        self._session = session
        self.name = ""
        self.description = ""
        self.labels: list[str] = []
        self.state: ExperimentState = ExperimentState.UNSPECIFIED
        self.config: dict[str, Any] = {}
        self.progress = 0.0
        self.archived = False
        self.username = ""
        self.num_trials = 0
        self.resource_pool = ""
        self.start_time: datetime.datetime | None = None
        self.end_time: datetime.datetime | None = None

    def __repr__(self) -> str:
        return f"Experiment(id={self.id})"

    def reload(self) -> None:
        """Fetch the experiment's attributes again."""
        from determined.api.gen import v1
        from determined.common import structs

        request = v1.GetExperimentRequest(experiment_id=self.id)
        resp = self._session.call(lambda stub: stub.get_experiment(request))
        if resp.experiment is None:
            raise errors.NotFound(f"experiment {self.id} not found")
        self._hydrate(resp.experiment)
        self.config = structs.python(resp.config)

    def _hydrate(self, e: v1.Experiment) -> None:
        self.name = e.name
        self.description = e.description
        self.labels = list(e.labels)
        self.state = ExperimentState(int(e.state))
        self.progress = e.progress or 0.0
        self.archived = e.archived
        self.username = e.username
        self.num_trials = e.num_trials
        self.resource_pool = e.resource_pool
        self.start_time = e.start_time
        self.end_time = e.end_time

    def get_config(self) -> dict[str, Any]:
        """The experiment's filled config, fetched now."""
        self.reload()
        return self.config

    # Actions.

    def _act(self, method: str) -> None:
        from determined.api.gen import v1

        request = v1.ExperimentActionRequest(experiment_id=self.id)
        self._session.call(lambda stub: getattr(stub, method)(request))

    def activate(self) -> None:
        """Activate a paused experiment (or one created paused)."""
        self._act("activate_experiment")

    def pause(self) -> None:
        """Pause the experiment: its trials checkpoint and stop until ``activate()``."""
        self._act("pause_experiment")

    def cancel(self) -> None:
        """Stop the experiment for good, letting its trials checkpoint first."""
        self._act("cancel_experiment")

    def kill(self) -> None:
        """Stop the experiment for good, ending its trials' processes at once."""
        self._act("kill_experiment")

    def archive(self) -> None:
        """Hide the ended experiment from default listings."""
        self._act("archive_experiment")

    def unarchive(self) -> None:
        """Undo ``archive()``."""
        self._act("unarchive_experiment")

    def delete(self) -> None:
        """Delete the ended experiment with its checkpoints, metrics and logs."""
        self._act("delete_experiment")

    # Waiting.

    def wait(self, interval: float = 5.0, *, timeout: float | None = None) -> ExperimentState:
        """Poll every ``interval`` seconds until the experiment has ended; returns its
        state (``COMPLETED``, ``CANCELED``, ``ERROR`` or ``DELETED``).

        Raises:
            ValueError: the experiment is paused, so it would never end.
            TimeoutError: ``timeout`` seconds passed first.
        """
        start = time.monotonic()
        reported = 0
        while True:
            self.reload()
            if self.state in TERMINAL_STATES:
                return self.state
            if self.state is ExperimentState.PAUSED:
                raise ValueError(
                    f"experiment {self.id} is paused, so it will not end: activate it first"
                )
            elapsed = time.monotonic() - start
            if timeout is not None and elapsed >= timeout:
                raise TimeoutError(f"experiment {self.id} is still {self.state.name}")
            if elapsed // 60 > reported:
                reported = int(elapsed // 60)
                print(
                    f"Waiting for experiment {self.id} to end: {reported} min so far",
                    file=sys.stderr,
                )
            time.sleep(interval)

    def await_first_trial(self, interval: float = 0.1, *, timeout: float | None = None) -> Trial:
        """Wait until the experiment has a trial and return the first one.

        Raises:
            errors.FailedPrecondition: the experiment ended without any trial.
            TimeoutError: ``timeout`` seconds passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(interval, 2.0)
        while True:
            trials = self._trials()
            if trials:
                return Trial._from_proto(self._session, min(trials, key=lambda t: t.id))
            self.reload()
            if self.state in TERMINAL_STATES:
                raise errors.FailedPrecondition(
                    f"experiment {self.id} ended ({self.state.name}) without any trial"
                )
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"experiment {self.id} has no trial yet")
            time.sleep(delay)
            delay = min(delay * 2, max(interval, 2.0))

    # Trials and checkpoints.

    def _trials(self) -> list[v1.Trial]:
        from determined.api.gen import v1

        request = v1.GetExperimentTrialsRequest(experiment_id=self.id)
        return list(self._session.call(lambda stub: stub.get_experiment_trials(request)).trials)

    def list_trials(
        self,
        sort_by: TrialSortBy = TrialSortBy.ID,
        order_by: OrderBy = OrderBy.ASC,
        limit: int | None = None,
    ) -> list[Trial]:
        """The experiment's trials, sorted by ``sort_by`` (trials without a value last)."""
        trials = [Trial._from_proto(self._session, t) for t in self._trials()]
        key = _TRIAL_KEYS.get(sort_by, _TRIAL_KEYS[TrialSortBy.ID])
        have = [t for t in trials if key(t) is not None]
        lack = [t for t in trials if key(t) is None]
        have.sort(key=lambda t: (key(t), t.id), reverse=order_by is OrderBy.DESC)
        ordered = have + lack
        return ordered if limit is None else ordered[:limit]

    def get_trials(
        self, sort_by: TrialSortBy = TrialSortBy.ID, order_by: OrderBy = OrderBy.ASC
    ) -> list[Trial]:
        """Determined's older name for ``list_trials``."""
        return self.list_trials(sort_by, order_by)

    def list_checkpoints(
        self,
        sort_by: str | ckpt.CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
        max_results: int | None = None,
    ) -> list[ckpt.Checkpoint]:
        """The experiment's completed checkpoints: by default by the searcher metric, best
        first; ``sort_by`` a ``CheckpointSortBy`` field or a validation metric's name."""
        from determined.common.experimental import _ranking

        return _ranking.list_checkpoints(
            self._session,
            experiment_id=self.id,
            sort_by=sort_by,
            order_by=order_by,
            max_results=max_results,
        )

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> ckpt.Checkpoint:
        """The checkpoint with the best validation in the experiment: by metric ``sort_by``,
        else the searcher's metric; the direction is the searcher's unless
        ``smaller_is_better`` is given.

        Raises:
            errors.NotFound: no completed checkpoint has a validation of that metric.
        """
        best = self.top_n_checkpoints(1, sort_by=sort_by, smaller_is_better=smaller_is_better)
        return best[0]

    def top_n_checkpoints(
        self, limit: int, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> list[ckpt.Checkpoint]:
        """The best checkpoint of each of the ``limit`` best trials, best first."""
        from determined.common.experimental import _ranking

        best = _ranking.best_checkpoints(
            self._session,
            experiment_id=self.id,
            sort_by=sort_by,
            smaller_is_better=smaller_is_better,
            limit=limit,
        )
        if not best:
            raise errors.NotFound(f"experiment {self.id} has no checkpoint with a validation")
        return best


ExperimentReference = Experiment


def _time(t: Trial, which: str) -> float | None:
    value = getattr(t, which)
    return None if value is None else float(value.timestamp())


_TRIAL_KEYS: dict[TrialSortBy, Any] = {
    TrialSortBy.ID: lambda t: t.id,
    TrialSortBy.START_TIME: lambda t: _time(t, "start_time"),
    TrialSortBy.END_TIME: lambda t: _time(t, "end_time"),
    TrialSortBy.STATE: lambda t: t.state.value,
    TrialSortBy.BEST_VALIDATION_METRIC: lambda t: t.best_validation_metric,
    TrialSortBy.BATCHES_PROCESSED: lambda t: t.steps_completed,
    TrialSortBy.RESTARTS: lambda t: t.restarts,
    TrialSortBy.DURATION: lambda t: (
        None if t.end_time is None or t.start_time is None else (t.end_time - t.start_time)
    ),
}
