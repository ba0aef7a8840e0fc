"""``Trial``: one trial of an experiment, with its metrics, logs and checkpoints."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from determined.common import errors
from determined.common.experimental import checkpoint as ckpt
from determined.common.experimental._state import ExperimentState

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession


# A trial's state has an experiment's names and numbers on pydet's wire.
TrialState = ExperimentState

TERMINAL_TRIAL_STATES = frozenset({TrialState.COMPLETED, TrialState.CANCELED, TrialState.ERROR})


class TrialSortBy(enum.Enum):
    """Fields ``Experiment.list_trials`` sorts by."""

    UNSPECIFIED = 0
    ID = 1
    START_TIME = 4
    END_TIME = 5
    STATE = 6
    BEST_VALIDATION_METRIC = 7
    LATEST_VALIDATION_METRIC = 8
    BATCHES_PROCESSED = 9
    DURATION = 10
    RESTARTS = 11


class OrderBy(enum.Enum):
    """Sort direction; ``ASCENDING``/``DESCENDING`` are the older names."""

    ASC = 1
    DESC = 2
    ASCENDING = 1
    DESCENDING = 2


TrialOrderBy = OrderBy


@dataclasses.dataclass
class TrialMetrics:
    """One metrics report of a trial: ``metrics`` (name to value) at ``steps_completed``."""

    trial_id: int
    trial_run_id: int
    steps_completed: int
    end_time: datetime.datetime
    metrics: dict[str, Any]
    group: str
    batch_metrics: list[dict[str, Any]] | None = None


class LogLevel(enum.Enum):
    """Log levels for ``Trial.iter_logs(min_level=...)``."""

    TRACE = 1
    DEBUG = 2
    INFO = 3
    WARNING = 4
    ERROR = 5
    CRITICAL = 6


@dataclasses.dataclass(frozen=True)
class _LogFilter:
    """What ``iter_logs`` keeps beyond what the master filters."""

    containers: set[str] | None
    stdtypes: set[str] | None
    sources: set[str] | None
    before: float | None
    after: float | None

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
        raise errors.InvalidArgument(f"{what} is RFC 3339 text or epoch seconds, not {value!r}")
    if isinstance(value, int):
        return float(value)
    try:
        from determined.common import util

        return util.parse_protobuf_timestamp(value).timestamp()
    except ValueError:
        raise errors.InvalidArgument(f"{what}: {value!r} is not an RFC 3339 time") from None


# The keys Determined's summary_metrics uses for the two legacy groups.
_SUMMARY_KEYS = {"training": "avg_metrics", "validation": "validation_metrics"}


class Trial:
    """A trial: ``id``, ``experiment_id``, ``state``, ``hparams``, ``summary_metrics``,
    ``metadata`` (what its code set with ``core_context.train.set_metadata()``).

    ``reload()`` refreshes the attributes; methods always ask the master.
    """

    def __init__(self, trial_id: int, session: MasterSession) -> None:
        self.id = trial_id
        self._session = session
        self.experiment_id = 0
        self.state: TrialState = TrialState.UNSPECIFIED
        self.hparams: dict[str, Any] = {}
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
        """Fetch the trial's attributes again."""
        from determined.api.gen import v1

        resp = self._session.call(lambda stub: stub.get_trial(v1.GetTrialRequest(trial_id=self.id)))
        if resp.trial is None:
            raise errors.NotFound(f"trial {self.id} not found")
        self._hydrate(resp.trial)

    def _hydrate(self, t: v1.Trial) -> None:
        from determined.common import structs

        self.experiment_id = t.experiment_id
        self.state = TrialState(int(t.state))
        self.hparams = structs.python(t.hparams)
        self.restarts = t.restarts
        self.steps_completed = int(t.total_batches_processed)
        self.start_time = t.start_time
        self.end_time = t.end_time
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

    def kill(self) -> None:
        """Kill the trial: its processes are ended without a checkpoint."""
        from determined.api.gen import v1

        self._session.call(lambda stub: stub.kill_trial(v1.KillTrialRequest(trial_id=self.id)))

    def wait(self, interval: float = 5.0, *, timeout: float | None = None) -> TrialState:
        """Poll every ``interval`` seconds until the trial has ended; returns its state.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.reload()
            if self.state in TERMINAL_TRIAL_STATES:
                return self.state
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"trial {self.id} is still {self.state.name}")
            time.sleep(interval)

    def iter_metrics(self, group: str) -> Iterator[TrialMetrics]:
        """The trial's reports in ``group`` ("training", "validation", or a custom group),
        oldest first."""
        if not group:
            raise errors.InvalidArgument("iter_metrics needs a group, e.g. 'validation'")
        for r in self._reports(group):
            yield self._metrics(r)

    def iter_training_metrics(self) -> Iterator[TrialMetrics]:
        """``iter_metrics("training")``."""
        return self.iter_metrics("training")

    def iter_validation_metrics(self) -> Iterator[TrialMetrics]:
        """``iter_metrics("validation")``."""
        return self.iter_metrics("validation")

    # Determined's older names.
    stream_training_metrics = iter_training_metrics
    stream_validation_metrics = iter_validation_metrics

    def iter_logs(
        self,
        follow: bool = False,
        *,
        head: int | None = None,
        tail: int | None = None,
        container_ids: Iterable[str] | None = None,
        rank_ids: Iterable[int] | None = None,
        stdtypes: Iterable[str] | None = None,
        min_level: LogLevel | str | None = None,
        timestamp_before: str | int | None = None,
        timestamp_after: str | int | None = None,
        sources: Iterable[str] | None = None,
        search_text: str | None = None,
    ) -> Iterator[str]:
        """The trial's log lines, each ending in a newline and prefixed ``[rank=N] `` where it
        came from a ranked worker; with ``follow``, new lines as they come until the trial
        ends. ``head``/``tail`` keep the first/last N lines; the other arguments keep lines
        from those containers, ranks, streams (``stdout``, ``stderr``), sources (``master``
        or ``agent``), levels at or above ``min_level``, times (RFC 3339 text or epoch
        seconds) and containing ``search_text``."""
        from determined.api.gen import v1

        if follow and (head is not None or tail is not None):
            raise errors.InvalidArgument("iter_logs(follow=True) cannot take head or tail")
        for name, n in (("head", head), ("tail", tail)):
            if n is not None and n < 0:
                raise errors.InvalidArgument(f"{name} must be non-negative, not {n}")
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
            containers=set(container_ids) if container_ids is not None else None,
            stdtypes=set(stdtypes) if stdtypes is not None else None,
            sources=set(sources) if sources is not None else None,
            before=_epoch(timestamp_before, "timestamp_before"),
            after=_epoch(timestamp_after, "timestamp_after"),
        )
        for response in self._session.stream(lambda stub: stub.trial_logs(request)):
            for log in response.logs:
                if keep(log):
                    rank = "" if log.rank_id is None else f"[rank={log.rank_id}] "
                    yield rank + log.message.rstrip("\r\n") + "\n"

    # Determined's older name, still what most scripts call.
    logs = iter_logs

    def list_checkpoints(
        self,
        sort_by: str | ckpt.CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
        max_results: int | None = None,
    ) -> list[ckpt.Checkpoint]:
        """The trial's completed checkpoints, sorted as asked (default: newest first)."""
        from determined.common.experimental import _ranking

        return _ranking.list_checkpoints(
            self._session,
            trial_id=self.id,
            sort_by=sort_by,
            order_by=order_by,
            max_results=max_results,
        )

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> ckpt.Checkpoint:
        """The checkpoint with the best validation: by metric ``sort_by``, else by the
        searcher's metric, in the direction the experiment's searcher sets unless
        ``smaller_is_better`` says otherwise."""
        from determined.common.experimental import _ranking

        best = _ranking.best_checkpoints(
            self._session,
            trial_id=self.id,
            sort_by=sort_by,
            smaller_is_better=smaller_is_better,
            limit=1,
        )
        if not best:
            raise errors.NotFound(f"trial {self.id} has no checkpoint with a validation")
        return best[0]

    def _reports(self, group: str) -> list[v1.MetricReport]:
        from determined.api.gen import v1

        request = v1.GetTrialMetricsRequest(trial_id=self.id, group=group)
        return list(self._session.call(lambda stub: stub.get_trial_metrics(request)).reports)

    def _metrics(self, r: v1.MetricReport) -> TrialMetrics:
        batch = json.loads(r.batch_metrics) if r.batch_metrics else None
        return TrialMetrics(
            trial_id=self.id,
            trial_run_id=0,
            steps_completed=int(r.steps_completed),
            end_time=datetime.datetime.fromtimestamp(r.timestamp, tz=datetime.UTC),
            metrics=json.loads(r.metrics) if r.metrics else {},
            group=r.group,
            batch_metrics=batch or None,
        )


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
