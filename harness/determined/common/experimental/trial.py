"""``Trial``: one trial of an experiment, with its metrics, logs and checkpoints."""

from __future__ import annotations

import datetime
import enum
import inspect
import json
import math
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from determined.common import errors
from determined.common.experimental import _util
from determined.common.experimental import checkpoint as ckpt
from determined.common.experimental._util import DeprecatedEnum, InvalidValue, OrderBy
from determined.common.experimental.metrics import (
    TrainingMetrics,
    TrialMetrics,
    ValidationMetrics,
    _legacy,
)

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession
    from determined.common.experimental.experiment import Experiment


class LogLevel(enum.Enum):
    """Log levels for ``Trial.iter_logs(min_level=...)``."""

    TRACE = "LOG_LEVEL_TRACE"
    DEBUG = "LOG_LEVEL_DEBUG"
    INFO = "LOG_LEVEL_INFO"
    WARNING = "LOG_LEVEL_WARNING"
    ERROR = "LOG_LEVEL_ERROR"
    CRITICAL = "LOG_LEVEL_CRITICAL"


class TrialState(enum.Enum):
    """A trial's state (Determined's names and values)."""

    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_KILLED = "STATE_STOPPING_KILLED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    CANCELED = "STATE_CANCELED"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    QUEUED = "STATE_QUEUED"
    PULLING = "STATE_PULLING"
    STARTING = "STATE_STARTING"
    RUNNING = "STATE_RUNNING"


TERMINAL_TRIAL_STATES = frozenset({TrialState.COMPLETED, TrialState.CANCELED, TrialState.ERROR})


def trial_state(number: int) -> TrialState | None:
    """The SDK's state of a trial the master shows in state ``number`` (``v1.State``)."""
    return _util.state_named(TrialState, number)


class TrialSortBy(enum.Enum):
    """Fields ``Experiment.list_trials`` sorts by."""

    ID = "SORT_BY_ID"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    BEST_VALIDATION_METRIC = "SORT_BY_BEST_VALIDATION_METRIC"
    LATEST_VALIDATION_METRIC = "SORT_BY_LATEST_VALIDATION_METRIC"
    BATCHES_PROCESSED = "SORT_BY_BATCHES_PROCESSED"
    DURATION = "SORT_BY_DURATION"
    RESTARTS = "SORT_BY_RESTARTS"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    LOG_RETENTION_DAYS = "SORT_BY_LOG_RETENTION_DAYS"


class TrialOrderBy(DeprecatedEnum):
    """Deprecated: ``OrderBy``."""

    ASCENDING = "ORDER_BY_ASC"
    ASC = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"
    DESC = "ORDER_BY_DESC"


class _LogFilter:
    """What ``iter_logs`` keeps beyond what the master filters."""

    def __init__(
        self,
        containers: Iterable[str] | None,
        stdtypes: Iterable[str] | None,
        sources: Iterable[str] | None,
        before: float | None,
        after: float | None,
    ) -> None:
        self.containers = None if containers is None else set(containers)
        self.stdtypes = None if stdtypes is None else set(stdtypes)
        self.sources = None if sources is None else set(sources)
        self.before = before
        self.after = after

    def __call__(self, log: v1.TaskLog) -> bool:
        source = "master" if log.stdtype == "master" else "agent"
        return (
            (self.containers is None or log.container_id in self.containers)
            and (self.stdtypes is None or log.stdtype in self.stdtypes)
            and (self.sources is None or source in self.sources)
            and (self.before is None or _seconds(log) < self.before)
            and (self.after is None or _seconds(log) > self.after)
        )


def _seconds(log: v1.TaskLog) -> float:
    return 0.0 if log.timestamp is None else log.timestamp.timestamp()


def _epoch(value: str | int | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidValue(f"{what} is RFC 3339 text or epoch seconds, not {value!r}")
    if isinstance(value, int):
        return float(value)
    try:
        from determined.common import util

        return util.parse_protobuf_timestamp(value).timestamp()
    except ValueError:
        raise InvalidValue(f"{what}: {value!r} is not an RFC 3339 time") from None


# The keys Determined's summary_metrics uses for the two legacy groups.
_SUMMARY_KEYS = {"training": "avg_metrics", "validation": "validation_metrics"}


class Trial:
    """A trial: ``id``, ``experiment_id``, ``state``, ``hparams``, ``summary_metrics``;
    also ``restarts``, ``steps_completed``, ``start_time``, ``end_time``,
    ``latest_checkpoint_uuid``, ``best_validation_metric`` and ``metadata`` (what its code
    set with ``core_context.train.set_metadata()``).

    The attributes are as last read; ``reload()`` reads them again.
    """

    def __init__(self, trial_id: int, session: MasterSession) -> None:
        self.id = trial_id
        self._session = session
        self.experiment_id: int | None = None
        self.hparams: dict[str, Any] | None = None
        self.state: TrialState | None = None
        self.restarts = 0
        self.steps_completed = 0
        self.start_time: datetime.datetime | None = None
        self.end_time: datetime.datetime | None = None
        self.latest_checkpoint_uuid: str | None = None
        self.best_validation_metric: float | None = None
        self.metadata: dict[str, Any] = {}
        self._summary: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"Trial(id={self.id})"

    def reload(self) -> None:
        """Read the trial again.

        Raises:
            errors.NotFoundException: there is no trial with this id.
        """
        from determined.api.gen import v1

        resp = self._session.call(lambda stub: stub.get_trial(v1.GetTrialRequest(trial_id=self.id)))
        if resp.trial is None:
            raise errors.NotFound(f"trial {self.id} not found")
        self._hydrate(resp.trial)

    def _hydrate(self, t: v1.Trial) -> None:
        from determined.common import structs

        self.experiment_id = t.experiment_id
        self.state = trial_state(t.state)
        self.hparams = structs.python(t.hparams)
        self.restarts = t.restarts
        self.steps_completed = int(t.total_batches_processed)
        self.start_time = _util.moment(t.start_time)
        self.end_time = _util.moment(t.end_time)
        self.latest_checkpoint_uuid = t.latest_checkpoint_uuid
        self.best_validation_metric = t.best_validation_metric
        self.metadata = structs.python(t.metadata)
        self._summary = None

    @classmethod
    def _from_proto(cls, session: MasterSession, t: v1.Trial) -> Trial:
        trial = cls(t.id, session)
        trial._hydrate(t)
        return trial

    @property
    def summary_metrics(self) -> dict[str, Any]:
        """Per group, per metric: ``count``, ``last``, ``min``, ``max``, ``sum`` and ``type``
        (training under ``avg_metrics``, validation under ``validation_metrics``, other
        groups under their names). Computed from the metrics when first read after a
        ``reload()``."""
        if self._summary is None:
            self._summary = _summarize(self._reports(""))
        return self._summary

    def get_experiment(self) -> Experiment:
        """The trial's experiment."""
        from determined.common.experimental.experiment import Experiment

        if not self.experiment_id:
            self.reload()
        assert self.experiment_id is not None
        exp = Experiment(self.experiment_id, self._session)
        exp.reload()
        return exp

    def kill(self) -> None:
        """Kill the trial: its processes are ended without a checkpoint."""
        from determined.api.gen import v1

        self._session.call(lambda stub: stub.kill_trial(v1.KillTrialRequest(trial_id=self.id)))

    def wait(self, interval: float = 5.0, *, timeout: float | None = None) -> TrialState:
        """Poll every ``interval`` seconds until the trial has ended; returns its state
        (pydet's).

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.reload()
            if self.state in TERMINAL_TRIAL_STATES:
                assert self.state is not None
                return self.state
            if deadline is not None and time.monotonic() >= deadline:
                state = self.state.name if self.state else "UNKNOWN"
                raise TimeoutError(f"trial {self.id} is still {state}")
            time.sleep(interval)

    # Metrics.

    def iter_metrics(self, group: str) -> Iterator[TrialMetrics]:
        """The trial's reports in ``group`` ("training", "validation", or any group its code
        reported with ``core_context.train.report_metrics``), in step order."""
        return iter_trials_metrics(self._session, [self.id], group)

    def stream_metrics(self, group: str) -> Iterator[TrialMetrics]:
        """Deprecated: ``iter_metrics``."""
        _util.deprecated("Trial.stream_metrics()", "Trial.iter_metrics()")
        return self.iter_metrics(group)

    def iter_training_metrics(self) -> Iterator[TrialMetrics]:
        """``iter_metrics("training")`` (pydet's)."""
        return self.iter_metrics("training")

    def iter_validation_metrics(self) -> Iterator[TrialMetrics]:
        """``iter_metrics("validation")`` (pydet's)."""
        return self.iter_metrics("validation")

    def stream_training_metrics(self) -> Iterator[TrainingMetrics]:
        """Deprecated: ``iter_metrics("training")``."""
        _util.deprecated("Trial.stream_training_metrics", "Trial.iter_metrics('training')")
        return stream_legacy(self._session, [self.id], TrainingMetrics)  # type: ignore[return-value]

    def stream_validation_metrics(self) -> Iterator[ValidationMetrics]:
        """Deprecated: ``iter_metrics("validation")``."""
        _util.deprecated("Trial.stream_validation_metrics", "Trial.iter_metrics('validation')")
        return stream_legacy(self._session, [self.id], ValidationMetrics)  # type: ignore[return-value]

    # Logs.

    def iter_logs(
        self,
        follow: bool = False,
        *,
        head: int | None = None,
        tail: int | None = None,
        container_ids: list[str] | None = None,
        rank_ids: list[int] | None = None,
        stdtypes: list[str] | None = None,
        min_level: LogLevel | None = None,
        timestamp_before: str | int | None = None,
        timestamp_after: str | int | None = None,
        sources: list[str] | None = None,
        search_text: str | None = None,
    ) -> Iterator[str]:
        """The trial's log lines, each ending in a newline and prefixed ``[rank=N] `` where it
        came from a ranked worker; with ``follow``, new lines as they come until the trial
        ends. ``head``/``tail`` keep the first/last N lines; the other arguments keep lines
        from those containers, ranks, streams (``stdout``, ``stderr``), sources (``master``
        or ``agent``), levels at or above ``min_level``, times (RFC 3339 text or epoch
        seconds) and containing ``search_text``.

        Raises:
            ValueError: a bad argument (a negative head or tail, a time that is neither).
        """
        from determined.api.gen import v1

        if follow and (head is not None or tail is not None):
            raise InvalidValue("iter_logs(follow=True) cannot take head or tail")
        for name, n in (("head", head), ("tail", tail)):
            if n is not None and n < 0:
                raise InvalidValue(f"{name} must be non-negative, got {n}")
        level = min_level.name if isinstance(min_level, LogLevel) else (min_level or "")
        if level and level.upper() not in v1.LogLevel.__members__:
            names = ", ".join(m.name for m in v1.LogLevel if m)
            raise errors.InvalidArgument(f"min_level: one of {names}, not {level!r}")
        request = v1.TrialLogsRequest(
            trial_id=self.id,
            follow=follow,
            head=head or 0,
            tail=tail or 0,
            rank_ids=list(rank_ids or []),
            min_level=v1.LogLevel[level.upper()] if level else v1.LogLevel.UNSPECIFIED,
            search_text=search_text or "",
        )
        keep = _LogFilter(
            container_ids,
            stdtypes,
            sources,
            _epoch(timestamp_before, "timestamp_before"),
            _epoch(timestamp_after, "timestamp_after"),
        )
        return self._logs(request, keep)

    def _logs(self, request: v1.TrialLogsRequest, keep: _LogFilter) -> Iterator[str]:
        for response in self._session.stream(lambda stub: stub.trial_logs(request)):
            for log in response.logs:
                if keep(log):
                    rank = "" if log.rank_id is None else f"[rank={log.rank_id}] "
                    yield rank + log.message.rstrip("\r\n") + "\n"

    def logs(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        """Deprecated: ``iter_logs``."""
        _util.deprecated("Trial.logs()", "Trial.iter_logs()")
        return self.iter_logs(*args, **kwargs)

    logs.__signature__ = inspect.signature(iter_logs)  # type: ignore[attr-defined]  # help()

    # Checkpoints.

    def list_checkpoints(
        self,
        sort_by: str | ckpt.CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
        max_results: int | None = None,
    ) -> list[ckpt.Checkpoint]:
        """The trial's checkpoints, in every state. Give ``sort_by`` (a
        ``CheckpointSortBy`` or a validation metric's name) and ``order_by`` together, or
        neither: by default by the searcher's metric, better first (checkpoints without a
        validation last). ``max_results`` keeps the first ones.

        Raises:
            AssertionError: only one of ``sort_by`` and ``order_by`` was given.
            ValueError: ``sort_by`` is neither a ``CheckpointSortBy`` nor a string.
        """
        from determined.common.experimental import _ranking

        _check_sort(sort_by, order_by)
        checkpoints, config = _ranking.load(self._session, trial_id=self.id)
        ordered = _ranking.sort(checkpoints, config, sort_by, order_by)
        return ordered if max_results is None else ordered[:max_results]

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> ckpt.Checkpoint:
        """Deprecated: ``list_checkpoints(..., max_results=1)``. The checkpoint with the
        best validation of ``sort_by`` (default: the searcher's metric, better first).

        Raises:
            ValueError: the trial has no checkpoint.
        """
        _util.deprecated("Trial.top_checkpoint()", "Trial.list_checkpoints(...,max_results=1)")
        return self._first(sort_by, _order(smaller_is_better) if sort_by else None)

    def _first(
        self, sort_by: str | ckpt.CheckpointSortBy | None, order_by: OrderBy | None
    ) -> ckpt.Checkpoint:
        found = self.list_checkpoints(sort_by=sort_by, order_by=order_by, max_results=1)
        if not found:
            raise InvalidValue("No checkpoints found for criteria.")
        return found[0]

    def select_checkpoint(
        self,
        latest: bool = False,
        best: bool = False,
        uuid: str | None = None,
        sort_by: str | None = None,
        smaller_is_better: bool | None = None,
    ) -> ckpt.Checkpoint:
        """Deprecated: ``list_checkpoints``. The latest checkpoint (``latest``), the best
        (``best``, by ``sort_by`` in the direction ``smaller_is_better`` says, given
        together; by default the searcher's), or the one of that ``uuid``: exactly one.

        Raises:
            AssertionError: the arguments do not say exactly one way.
            ValueError: the trial has no checkpoint.
        """
        _util.deprecated("Trial.select_checkpoint()", "Trial.list_checkpoints()")
        if sum([int(latest), int(best), int(uuid is not None)]) != 1:
            raise AssertionError("Exactly one of latest, best, or uuid must be set")
        if (sort_by is None) != (smaller_is_better is None):
            raise AssertionError("sort_by and smaller_is_better must be set together")
        if sort_by is not None and not best:
            raise AssertionError(
                "`sort_by` and `smaller_is_better` parameters can only be used with `best`"
            )
        if uuid:
            from determined.common.experimental import _ranking

            found = _ranking.one(self._session, uuid)
            return ckpt.Checkpoint._from_proto(
                self._session, found, _ranking.training_of(self._session, found)
            )
        if latest:
            return self._first(ckpt.CheckpointSortBy.BATCH_NUMBER, OrderBy.DESC)
        return self._first(sort_by, _order(smaller_is_better) if sort_by else None)

    def get_checkpoints(
        self,
        sort_by: str | ckpt.CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
    ) -> list[ckpt.Checkpoint]:
        """Deprecated: ``list_checkpoints``. The trial's checkpoints (every state); by a
        metric (those without it last, in either order) or a field, by default by the
        searcher's metric, better first.

        Raises:
            AssertionError: only one of ``sort_by`` and ``order_by`` was given.
        """
        from determined.common.experimental import _ranking

        _util.deprecated("Trial.get_checkpoints()", "Trial.list_checkpoints()")
        if (sort_by is None) != (order_by is None):
            raise AssertionError("sort_by and order_by must be set together")
        checkpoints, config = _ranking.load(self._session, trial_id=self.id)
        if isinstance(sort_by, ckpt.CheckpointSortBy):
            return _ranking.sort(checkpoints, config, sort_by, order_by)
        name, smaller = _ranking.searcher(config)
        if sort_by is None:
            if name is None:
                raise InvalidValue(
                    "no searcher.metric found in experiment config; please provide a sort_by metric"
                )
            order_by = OrderBy.ASC if smaller else OrderBy.DESC
        metric = sort_by or name
        have = [c for c in checkpoints if _ranking.metric_of(c, metric) is not None]
        lack = [c for c in checkpoints if _ranking.metric_of(c, metric) is None]
        have.sort(
            key=lambda c: _ranking.metric_of(c, metric) or 0.0, reverse=_util.descending(order_by)
        )
        return have + lack

    def _reports(self, group: str) -> list[v1.MetricReport]:
        from determined.api.gen import v1

        request = v1.GetTrialMetricsRequest(trial_id=self.id, group=group)
        return list(self._session.call(lambda stub: stub.get_trial_metrics(request)).reports)


class TrialReference(Trial):
    """Deprecated: the older name of ``Trial``."""

    def __init__(self, trial_id: int, session: MasterSession) -> None:
        warnings.warn(
            "'TrialReference' was renamed to 'Trial' and will be removed in a future release.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(trial_id, session)


def _order(smaller_is_better: bool | None) -> OrderBy:
    """Determined's direction for a metric: ascending only when smaller is better."""
    return OrderBy.ASC if smaller_is_better else OrderBy.DESC


def _check_sort(sort_by: Any, order_by: Any) -> None:
    if (sort_by is None) != (order_by is None):
        raise AssertionError("sort_by and order_by must be either both set, or neither.")
    if sort_by is not None and not isinstance(sort_by, (ckpt.CheckpointSortBy, str)):
        raise InvalidValue("sort_by must be of type CheckpointSortBy or str")


def iter_trials_metrics(
    session: MasterSession, trial_ids: list[int], group: str
) -> Iterator[TrialMetrics]:
    """The reports in ``group`` of each trial (in id order), each in step order.

    Raises:
        errors.NotFoundException: one of the trials does not exist.
    """
    from determined.api.gen import v1

    if isinstance(trial_ids, int) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in trial_ids
    ):
        raise InvalidValue(f"trial_ids is a list of trial ids, not {trial_ids!r}")
    if not group:
        raise InvalidValue("name a metric group, e.g. 'training' or 'validation'")
    request = v1.GetMetricsRequest(trial_ids=list(trial_ids), group=group)
    for page in session.stream(lambda stub: stub.get_metrics(request)):
        for report in page.metrics:
            yield TrialMetrics._from_proto(report)


def stream_legacy(
    session: MasterSession, trial_ids: list[int], cls: type[TrialMetrics]
) -> Iterator[TrialMetrics]:
    """The training (``TrainingMetrics``) or validation (``ValidationMetrics``) reports."""
    group = "training" if cls is TrainingMetrics else "validation"
    for report in iter_trials_metrics(session, trial_ids, group):
        yield _legacy(cls, report)


def _summarize(reports: list[v1.MetricReport]) -> dict[str, Any]:
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for r in reports:
        group = summary.setdefault(_SUMMARY_KEYS.get(r.group, r.group), {})
        for name, value in (json.loads(r.metrics) if r.metrics else {}).items():
            entry = group.setdefault(name, {"count": 0, "last": None, "type": _kind(value)})
            entry["count"] += 1
            entry["last"] = value
            if _kind(value) != entry["type"]:
                entry["type"] = "mixed"
            if entry["type"] == "number" and not math.isnan(value):
                entry["min"] = min(entry.get("min", value), value)
                entry["max"] = max(entry.get("max", value), value)
                entry["sum"] = entry.get("sum", 0) + value
    return summary


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"
