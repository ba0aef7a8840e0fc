"""``Experiment``: an experiment on the master, and what a script can do with it."""

from __future__ import annotations

import datetime
import enum
import pathlib
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from determined.common import errors
from determined.common.experimental import _util
from determined.common.experimental import checkpoint as ckpt
from determined.common.experimental._util import DeprecatedEnum, InvalidValue, OrderBy
from determined.common.experimental.trial import (
    Trial,
    TrialSortBy,
    TrialState,
    _check_sort,
    _order,
)

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession


class ExperimentState(enum.Enum):
    """An experiment's state (Determined's names and values)."""

    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    COMPLETED = "STATE_COMPLETED"
    CANCELED = "STATE_CANCELED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    DELETING = "STATE_DELETING"
    DELETE_FAILED = "STATE_DELETE_FAILED"
    STOPPING_KILLED = "STATE_STOPPING_KILLED"
    QUEUED = "STATE_QUEUED"
    PULLING = "STATE_PULLING"
    STARTING = "STATE_STARTING"
    RUNNING = "STATE_RUNNING"


TERMINAL_STATES = frozenset(
    {
        ExperimentState.COMPLETED,
        ExperimentState.CANCELED,
        ExperimentState.DELETED,
        ExperimentState.ERROR,
    }
)


def experiment_state(number: int) -> ExperimentState | None:
    """The SDK's state of an experiment the master shows in state ``number`` (``v1.State``)."""
    return _util.state_named(ExperimentState, number)


class ExperimentSortBy(enum.Enum):
    """Fields ``list_experiments`` sorts by."""

    ID = "SORT_BY_ID"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    NUM_TRIALS = "SORT_BY_NUM_TRIALS"
    PROGRESS = "SORT_BY_PROGRESS"
    USER = "SORT_BY_USER"
    NAME = "SORT_BY_NAME"
    FORKED_FROM = "SORT_BY_FORKED_FROM"
    RESOURCE_POOL = "SORT_BY_RESOURCE_POOL"
    PROJECT_ID = "SORT_BY_PROJECT_ID"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    CHECKPOINT_COUNT = "SORT_BY_CHECKPOINT_COUNT"
    SEARCHER_METRIC_VAL = "SORT_BY_SEARCHER_METRIC_VAL"


class ExperimentOrderBy(DeprecatedEnum):
    """Deprecated: ``OrderBy``."""

    ASCENDING = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"


class Experiment:
    """An experiment: ``id``, ``name``, ``description``, ``notes``, ``labels`` (a set),
    ``state``, ``config`` (filled), ``progress``, ``archived``, ``project_id`` and
    ``workspace_id`` (None until pydet has projects); also ``username``, ``num_trials``,
    ``resource_pool``, ``start_time`` and ``end_time``.

    Get one from ``client.create_experiment``, ``get_experiment`` or
    ``list_experiments``. The attributes are as last read; ``reload()`` reads them again.
    """

    def __init__(self, experiment_id: int, session: MasterSession) -> None:
        self._id = experiment_id
        self._session = session
        self._config: dict[str, Any] | None = None
        self.state: ExperimentState | None = None
        self.labels: set[str] | None = None
        self.archived: bool | None = None
        self.name: str | None = None
        self.progress: float | None = None
        self.description: str | None = None
        self.notes: str | None = None
        self.project_id: int | None = None
        self.workspace_id: int | None = None
        self.username = ""
        self.num_trials = 0
        self.resource_pool = ""
        self.start_time: datetime.datetime | None = None
        self.end_time: datetime.datetime | None = None

    @property
    def id(self) -> int:
        return self._id

    @property
    def config(self) -> dict[str, Any] | None:
        """The experiment's filled config (read from the master the first time it is
        needed)."""
        if self._config is None:
            self.reload()
        return self._config

    @config.setter
    def config(self, value: dict[str, Any] | None) -> None:
        self._config = value

    def __repr__(self) -> str:
        return f"Experiment(id={self.id})"

    def reload(self) -> None:
        """Read the experiment again.

        Raises:
            errors.NotFoundException: there is no experiment with this id.
        """
        from determined.api.gen import v1
        from determined.common import structs

        request = v1.GetExperimentRequest(experiment_id=self.id)
        resp = self._session.call(lambda stub: stub.get_experiment(request))
        if resp.experiment is None:
            raise errors.NotFound(f"experiment {self.id} not found")
        self._hydrate(resp.experiment)
        self._config = structs.python(resp.config)

    def _hydrate(self, e: v1.Experiment) -> None:
        self.name = e.name
        self.description = e.description
        self.notes = e.notes
        self.labels = set(e.labels) if e.labels else None
        self.state = experiment_state(e.state)
        self.progress = e.progress
        self.archived = e.archived
        self.username = e.username
        self.num_trials = e.num_trials
        self.resource_pool = e.resource_pool
        self.start_time = _util.moment(e.start_time)
        self.end_time = _util.moment(e.end_time)
        self.project_id = e.project_id
        self.workspace_id = e.workspace_id

    @classmethod
    def _from_proto(cls, session: MasterSession, e: v1.Experiment) -> Experiment:
        exp = cls(e.id, session)
        exp._hydrate(e)
        return exp

    def move_to_project(self, workspace_name: str, project_name: str) -> None:
        """Move the experiment to the project ``project_name`` of the workspace
        ``workspace_name``, on the master and here.

        Raises:
            errors.NotFound: there is no such workspace or project.
        """
        from determined.api.gen import v1
        from determined.common.experimental.workspace import Workspace

        project = Workspace(self._session, workspace_name=workspace_name).get_project(project_name)
        req = v1.MoveExperimentRequest(experiment_id=self.id, destination_project_id=project.id)
        self._session.call(lambda stub: stub.move_experiment(req))
        self.project_id = project.id
        self.workspace_id = project.workspace_id

    def get_config(self) -> dict[str, Any]:
        """The experiment's filled config, read now (pydet's)."""
        self.reload()
        return self._config or {}

    # Name, description, notes and labels.

    def _patch(self, **fields: Any) -> None:
        from determined.api.gen import v1

        request = v1.PatchExperimentRequest(v1.PatchExperiment(id=self.id, **fields))
        resp = self._session.call(lambda stub: stub.patch_experiment(request))
        if resp.experiment is not None:
            self._hydrate(resp.experiment)
        self._config = None  # its name, description or labels changed there too

    def set_name(self, name: str) -> None:
        """Rename the experiment."""
        self._patch(name=name)

    def set_description(self, description: str) -> None:
        """Replace the experiment's description."""
        self._patch(description=description)

    def set_notes(self, notes: str) -> None:
        """Replace the experiment's notes."""
        self._patch(notes=notes)

    def set_labels(self, labels: set[str]) -> None:
        """Replace the experiment's labels with these."""
        from determined.api.gen import v1

        if isinstance(labels, str):
            raise InvalidValue(f"labels is a set of strings, not the string {labels!r}")
        self._patch(labels=v1.ExperimentLabels(values=sorted(labels)))

    def add_label(self, label: str) -> None:
        """Add a label (none if it is there already); ``labels`` is then the master's."""
        from determined.api.gen import v1

        request = v1.PutExperimentLabelRequest(experiment_id=self.id, label=label)
        resp = self._session.call(lambda stub: stub.put_experiment_label(request))
        self.labels = set(resp.labels)
        self._config = None

    def remove_label(self, label: str) -> None:
        """Remove a label (nothing if it is not there); ``labels`` is then the master's."""
        from determined.api.gen import v1

        request = v1.DeleteExperimentLabelRequest(experiment_id=self.id, label=label)
        resp = self._session.call(lambda stub: stub.delete_experiment_label(request))
        self.labels = set(resp.labels)
        self._config = None

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
        self.archived = True

    def unarchive(self) -> None:
        """Undo ``archive()``."""
        self._act("unarchive_experiment")
        self.archived = False

    def delete(self) -> None:
        """Delete the ended experiment with its checkpoints, metrics and logs."""
        self._act("delete_experiment")

    def delete_tensorboard_files(self) -> None:
        """Remove the experiment's TensorBoard files
        (``<storage>/<cluster>/tensorboard/experiment/<id>``) from its storage."""
        from determined.api.gen import v1

        request = v1.DeleteTensorboardFilesRequest(experiment_id=self.id)
        self._session.call(lambda stub: stub.delete_tensorboard_files(request))

    def download_code(self, output_dir: str | None = None) -> str:
        """Save the code the experiment was created with, as ``exp-ID_model_def.tar.gz`` in
        ``output_dir`` (created if needed; default the current directory, ``~`` expanded),
        replacing a file of that name; returns its path."""
        from determined.api.gen import v1

        request = v1.GetExperimentContextRequest(experiment_id=self.id)
        data = self._session.call(lambda stub: stub.get_experiment_context(request)).context
        name = f"exp-{self.id}_model_def.tar.gz"
        if output_dir:
            directory = pathlib.Path(output_dir).expanduser()
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / name
        else:
            path = pathlib.Path(name)
        path.write_bytes(data)
        return str(path)

    def get_pachyderm_config(self) -> dict[str, Any]:
        """The ``integrations.pachyderm`` section of the experiment's config.

        Raises:
            ValueError: the config has none.
        """
        try:
            return dict((self.config or {})["integrations"]["pachyderm"])
        except (KeyError, TypeError):
            raise InvalidValue(
                f"No Pachyderm configuration found for experiment {self.id}."
            ) from None

    # Waiting.

    def wait(self, interval: float = 5.0, *, timeout: float | None = None) -> ExperimentState:
        """Poll every ``interval`` seconds until the experiment has ended; returns its
        state (``COMPLETED``, ``CANCELED``, ``ERROR`` or ``DELETED``).

        Raises:
            ValueError: the experiment is paused, so it would never end.
            TimeoutError: ``timeout`` seconds passed first (pydet's).
        """
        start = time.monotonic()
        reported = 0
        while True:
            self.reload()
            if self.state in TERMINAL_STATES:
                assert self.state is not None
                return self.state
            if self.state is ExperimentState.PAUSED:
                raise InvalidValue(
                    f"Experiment {self.id} is in paused state. Make sure the experiment is active."
                )
            elapsed = time.monotonic() - start
            if timeout is not None and elapsed >= timeout:
                state = self.state.name if self.state else "UNKNOWN"
                raise TimeoutError(f"experiment {self.id} is still {state}")
            if elapsed // 60 > reported:
                reported = int(elapsed // 60)
                print(
                    f"Waiting for Experiment {self.id} to complete. Elapsed {reported} minutes",
                    file=sys.stderr,
                )
            time.sleep(interval)

    def await_first_trial(self, interval: float = 0.1, *, timeout: float | None = None) -> Trial:
        """Wait until the experiment has a trial and return the first one to start.

        Raises:
            RuntimeError: the experiment ended without any trial.
            TimeoutError: ``timeout`` seconds passed first (pydet's).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(interval, 2.0)
        while True:
            self.reload()
            trials = self._trials()
            if trials:
                return Trial._from_proto(self._session, min(trials, key=lambda t: t.id))
            if self.state in TERMINAL_STATES:
                raise RuntimeError(
                    "This experiment has terminated before a trial was started. "
                    f"Experiment is in state {self.state}."
                )
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"experiment {self.id} has no trial yet")
            time.sleep(delay)
            delay = min(delay * 2, max(interval, 2.0))

    # Trials.

    def _trials(self) -> list[v1.Trial]:
        from determined.api.gen import v1

        request = v1.GetExperimentTrialsRequest(experiment_id=self.id)
        return list(self._session.call(lambda stub: stub.get_experiment_trials(request)).trials)

    def iter_trials(
        self,
        sort_by: TrialSortBy = TrialSortBy.ID,
        order_by: OrderBy = OrderBy.ASCENDING,
        limit: int | None = None,
    ) -> Iterator[Trial]:
        """The experiment's trials sorted by ``sort_by`` (those without a value last).
        ``limit`` is the size of a page of Determined's answers, not a maximum: every
        trial is yielded."""
        trials = [Trial._from_proto(self._session, t) for t in self._trials()]
        key = self._trial_key(sort_by)
        have = [t for t in trials if key(t) is not None]
        lack = [t for t in trials if key(t) is None]
        have.sort(key=lambda t: (key(t), t.id), reverse=_util.descending(order_by))
        yield from have + lack

    def list_trials(
        self, sort_by: TrialSortBy = TrialSortBy.ID, order_by: OrderBy = OrderBy.ASCENDING
    ) -> list[Trial]:
        """Every trial of the experiment, as ``iter_trials`` sorts them."""
        return list(self.iter_trials(sort_by, order_by))

    def get_trials(
        self, sort_by: TrialSortBy = TrialSortBy.ID, order_by: OrderBy = OrderBy.ASCENDING
    ) -> list[Trial]:
        """Deprecated: ``list_trials``."""
        _util.deprecated("Experiment.get_trials()", "Experiment.list_trials()")
        return self.list_trials(sort_by, order_by)

    def _trial_key(self, sort_by: TrialSortBy) -> Callable[[Trial], Any]:
        if sort_by is TrialSortBy.CHECKPOINT_SIZE:
            sizes = self._checkpoint_sizes()
            return lambda t: sizes.get(t.id, 0)
        if sort_by is TrialSortBy.LATEST_VALIDATION_METRIC:
            latest = self._latest_validations()
            return lambda t: latest.get(t.id)
        return _TRIAL_KEYS.get(sort_by, _TRIAL_KEYS[TrialSortBy.ID])

    def _checkpoint_sizes(self) -> dict[int, int]:
        from determined.api.gen import v1
        from determined.common import checkpoint_info

        request = v1.GetCheckpointsRequest(experiment_id=self.id)
        sizes: dict[int, int] = {}
        for c in self._session.call(lambda stub: stub.get_checkpoints(request)).checkpoints:
            if c.state != v1.CheckpointState.DELETED:
                trial_id = checkpoint_info.trial_id(c)
                sizes[trial_id] = sizes.get(trial_id, 0) + int(c.size)
        return sizes

    def _latest_validations(self) -> dict[int, float]:
        """Each trial's latest value of the searcher's metric."""
        from determined.common import structs

        metric = (self.config or {}).get("searcher", {}).get("metric")
        out = {}
        for t in self._trials():
            latest = t.latest_validation
            shown = latest.metrics if latest is not None else None
            value = structs.python(shown.avg_metrics if shown is not None else None).get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[t.id] = float(value)
        return out

    # Checkpoints.

    def list_checkpoints(
        self,
        sort_by: str | ckpt.CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
        max_results: int | None = None,
    ) -> list[ckpt.Checkpoint]:
        """The experiment's COMPLETED checkpoints. Give ``sort_by`` (a ``CheckpointSortBy``
        or a validation metric's name) and ``order_by`` together, or neither: by default
        by the searcher's metric, better first (checkpoints without a validation last).
        ``max_results`` keeps the first ones.

        Raises:
            AssertionError: only one of ``sort_by`` and ``order_by`` was given.
            ValueError: ``sort_by`` is neither a ``CheckpointSortBy`` nor a string.
        """
        from determined.common.experimental import _ranking

        _check_sort(sort_by, order_by)
        checkpoints, config = _ranking.load(self._session, experiment_id=self.id)
        completed = [c for c in checkpoints if c.state is ckpt.CheckpointState.COMPLETED]
        ordered = _ranking.sort(completed, config, sort_by, order_by)
        return ordered if max_results is None else ordered[:max_results]

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> ckpt.Checkpoint:
        """Deprecated: ``list_checkpoints(..., max_results=1)``. The first checkpoint by
        ``sort_by`` (default: the searcher's metric, better first; a checkpoint without a
        validation still counts).

        Raises:
            AssertionError: the experiment has no completed checkpoint.
        """
        _util.deprecated(
            "Experiment.top_checkpoint()", "Experiment.list_checkpoints(...,max_results=1)"
        )
        order_by = _order(smaller_is_better) if sort_by else None
        found = self.list_checkpoints(sort_by=sort_by, order_by=order_by, max_results=1)
        if not found:
            raise AssertionError(f"No checkpoints found for experiment {self.id}")
        return found[0]

    def top_n_checkpoints(
        self, limit: int, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> list[ckpt.Checkpoint]:
        """Deprecated: ``list_checkpoints(..., max_results=n)``. The best completed
        checkpoint of each of the ``limit`` best trials, by ``sort_by`` (default: the
        searcher's metric and direction).

        Raises:
            AssertionError: the experiment has no completed checkpoint.
            ValueError: no ``sort_by`` and the config names no searcher metric.
        """
        from determined.common.experimental import _ranking

        _util.deprecated(
            "Experiment.top_n_checkpoints()", "Experiment.list_checkpoints(...,max_results=n)"
        )
        checkpoints, config = _ranking.load(self._session, experiment_id=self.id)
        completed = [c for c in checkpoints if c.state is ckpt.CheckpointState.COMPLETED]
        if not completed:
            raise AssertionError(f"No checkpoint found for experiment {self.id}")
        if not sort_by:
            metric, smaller_is_better = _ranking.searcher(config)
            if metric is None:
                raise InvalidValue(
                    "no searcher.metric found in experiment config; please provide a sort_by metric"
                )
            sort_by = metric
        return _ranking.best_of_distinct_trials(completed, sort_by, bool(smaller_is_better), limit)


class ExperimentReference(Experiment):
    """Deprecated: the older name of ``Experiment``."""

    def __init__(self, experiment_id: int, session: MasterSession) -> None:
        warnings.warn(
            "'ExperimentReference' was renamed to 'Experiment' and will be removed in a "
            "future release.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(experiment_id, session)


def _seconds(value: datetime.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


_TRIAL_KEYS: dict[TrialSortBy, Callable[[Trial], Any]] = {
    TrialSortBy.ID: lambda t: t.id,
    TrialSortBy.START_TIME: lambda t: _seconds(t.start_time),
    TrialSortBy.END_TIME: lambda t: _seconds(t.end_time),
    TrialSortBy.STATE: lambda t: None if t.state is None else list(TrialState).index(t.state),
    TrialSortBy.BEST_VALIDATION_METRIC: lambda t: t.best_validation_metric,
    TrialSortBy.BATCHES_PROCESSED: lambda t: t.steps_completed,
    TrialSortBy.RESTARTS: lambda t: t.restarts,
    TrialSortBy.DURATION: lambda t: (
        None if t.end_time is None or t.start_time is None else (t.end_time - t.start_time)
    ),
}
