"""``core_context.train``: training and validation metrics, progress, early exit."""

from __future__ import annotations

import enum
import json
import logging
import math
import pathlib
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from determined.common import errors
from determined.core import _util
from determined.core._distributed import DistributedContext

if TYPE_CHECKING:
    from determined.core._metrics import MetricShipper
    from determined.core._rpc import MasterClient
    from determined.core._tensorboard import MetricEvents, TensorboardFiles

log = logging.getLogger("determined.core")


class MetricRecord(NamedTuple):
    """One ``MetricReport``: the metrics are already JSON (encoded in the caller's thread)."""

    group: str
    steps_completed: int
    metrics: str
    timestamp: float
    batch_metrics: str


class ReportError(errors.DetError):
    """Metric reports the master did not accept; raised by the next report or by close()."""


class EarlyExitReason(enum.Enum):
    """Why a trial ends before its searcher work is done (``train.report_early_exit``).

    ``INVALID_HP``: the hyperparameters cannot work; the trial ends as invalid, not failed,
    and the searcher may replace it (raising ``det.InvalidHP`` inside ``core.init()`` reports
    this for you). Determined's ``"EXITED_REASON_*"`` spellings are accepted as values too.
    """

    INVALID_HP = "invalid_hp"
    USER_REQUESTED_STOP = "user_canceled"
    ERRORED = "errored"

    @classmethod
    def _missing_(cls, value: object) -> EarlyExitReason | None:
        if isinstance(value, str):
            key = value.lower().removeprefix("exited_reason_")
            aliases = {"user_requested_stop": "user_canceled", "init_invalid_hp": "invalid_hp"}
            key = aliases.get(key, key)
            for member in cls:
                if member.value == key:
                    return member
        return None


class TrainContext:
    """Reports a trial's metrics and progress to the master.

    Reports are queued and shipped in batches by a background thread, so a call returns at
    once; a batch the master did not accept is raised by a later call or by
    ``core.Context.close()``, which also waits until everything reported has arrived. Only
    the chief (rank 0) may report.

    Metric values must be JSON-serializable; numpy and torch scalars are converted with
    ``.item()``. NaN and infinities are kept (sent as JSON's ``NaN``/``Infinity``).
    """

    def __init__(
        self,
        *,
        distributed: DistributedContext,
        trial_id: int,
        run_id: int,
        experiment_id: int,
        shipper: MetricShipper,
        client: MasterClient,
        tensorboard: TensorboardFiles | None = None,
        metric_events: MetricEvents | None = None,
    ) -> None:
        self._tensorboard = tensorboard
        # Set in AUTO mode (core.init(tensorboard_mode=...)), on the chief.
        self._metric_events = metric_events
        self._dist = distributed
        self._trial_id = trial_id
        self._run_id = run_id
        self._experiment_id = experiment_id
        self._shipper = shipper
        self._client = client

    # The public methods check their arguments here and hand the result to _emit/_progress,
    # which the off-cluster stand-in replaces with logging.

    def report_training_metrics(
        self,
        steps_completed: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Report training metrics averaged over the steps since the previous report.

        ``batch_metrics`` (optional) is a list of per-batch metric dicts, kept for later
        analysis but not charted.
        """
        _util.require_chief(self._dist, "report training metrics")
        batch_json = ""
        if batch_metrics is not None:
            if not isinstance(batch_metrics, list):
                raise TypeError(
                    "batch_metrics must be a list of dicts (one per batch), "
                    f"not {type(batch_metrics).__name__}"
                )
            batch_json = _util.dumps(batch_metrics, what="batch_metrics")
        self._emit(self._record("training", steps_completed, metrics, batch_json))

    def report_validation_metrics(self, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Report validation metrics; the searcher reads its ``searcher.metric`` from them.

        Values that are ``bytes`` are dropped with a warning; a ``None`` value is an error.
        """
        _util.require_chief(self._dist, "report validation metrics")
        _util.check_metrics(metrics, what="metrics")
        kept: dict[str, Any] = {}
        for name, value in metrics.items():
            if value is None:
                raise ValueError(f"validation metric {name!r} is None; report a number")
            if isinstance(value, (bytes, bytearray)):
                log.warning("dropping validation metric %r: bytes are not reportable", name)
                continue
            kept[name] = value
        self._emit(self._record("validation", steps_completed, kept, ""))

    def report_metrics(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Report metrics of any group (``"training"``, ``"validation"``, or your own name)."""
        _util.require_chief(self._dist, f"report {group!r} metrics")
        if not isinstance(group, str) or not group:
            raise ValueError(f"group must be a non-empty string, not {group!r}")
        self._emit(self._record(group, steps_completed, metrics, ""))

    def report_progress(self, progress: float) -> None:
        """Report the fraction of the trial's work done, from 0 to 1 (shown by the WebUI)."""
        _util.require_chief(self._dist, "report progress")
        value = _progress_value(progress)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"progress must be between 0 and 1, not {progress!r}")
        self._progress(value)

    def report_early_exit(self, reason: EarlyExitReason | str) -> None:
        """Tell the master the trial ends early, and why (``EarlyExitReason.INVALID_HP``)."""
        _util.require_chief(self._dist, "report an early exit")
        try:
            why = EarlyExitReason(reason)
        except ValueError:
            choices = ", ".join(f"EarlyExitReason.{m.name}" for m in EarlyExitReason)
            raise ValueError(
                f"unknown early exit reason {reason!r}; use one of {choices}"
            ) from None
        self._early_exit(why)

    def get_experiment_best_validation(self) -> float | None:
        """The best ``searcher.metric`` validated so far in the experiment, or None."""
        return self._client.get_best_validation(self._experiment_id)

    def get_tensorboard_path(self) -> pathlib.Path:
        """A directory (created if needed) for this worker's TensorBoard files, e.g. for
        ``torch.utils.tensorboard.SummaryWriter`` or
        ``torch.profiler.tensorboard_trace_handler``. Its files are uploaded by
        ``upload_tensorboard_files`` (and, in AUTO mode, as metrics are reported) to where
        ``det tensorboard start`` shows them."""
        tb = getattr(self, "_tensorboard", None)
        if tb is not None:
            path: pathlib.Path = tb.local
        else:
            trial = getattr(self, "_trial_id", None)
            name = f"tensorboard-{trial if trial is not None else 'local'}-rank{self._dist.rank}"
            path = pathlib.Path(tempfile.gettempdir()) / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def upload_tensorboard_files(
        self,
        selector: Callable[[pathlib.Path], bool] = lambda _: True,
        mangler: Callable[[pathlib.Path, int], pathlib.Path] = lambda p, __: p,
    ) -> None:
        """Upload the files under ``get_tensorboard_path()`` that are new or changed since
        the last upload to the trial's TensorBoard directory in storage (its
        ``tensorboard_storage``, else its checkpoint storage). Any worker may call it.

        Arguments:
            selector: given a file's path, True to upload it (default: every file).
            mangler: given a file's path relative to the TensorBoard directory and this
                worker's rank, the relative path to upload it as (e.g. to keep ranks'
                files apart); default: unchanged.
        """
        tb = getattr(self, "_tensorboard", None)
        if tb is None or tb.dest is None:
            log.info("upload_tensorboard_files: no TensorBoard storage here; nothing uploaded")
            return
        count = tb.upload(selector, mangler)
        log.debug("uploaded %d TensorBoard file(s) to %s", count, tb.dest.where)

    def set_status(self, status: str) -> None:
        """Describe what the trial is doing right now (logged)."""
        log.info("status: %s", status)

    def set_metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """Replace the trial's metadata (a JSON-able dict, for analysis or debugging, shown
        with the trial) and return it as the master stored it."""
        return self._client.set_trial_metadata(self._trial_id, _metadata(metadata))

    def get_metadata(self) -> dict[str, Any]:
        """The trial's metadata, as last set (``{}`` if never)."""
        return self._client.get_trial_metadata(self._trial_id)

    def _record(
        self, group: str, steps_completed: int, metrics: dict[str, Any], batch_json: str
    ) -> MetricRecord:
        steps = _util.check_int(steps_completed, what="steps_completed")
        _util.check_metrics(metrics, what="metrics")
        metrics_json = _util.dumps(metrics, what=f"{group} metrics")
        events = getattr(self, "_metric_events", None)
        if events is not None:
            try:
                events.write(group, steps, metrics)
                if self._tensorboard is not None:
                    self._tensorboard.upload_now_and_then(events.flush)
            except OSError as e:
                log.warning("writing TensorBoard events failed: %s", e)
        return MetricRecord(group, steps, metrics_json, time.time(), batch_json)

    def _emit(self, record: MetricRecord) -> None:
        log.debug("report %s metrics at step %d", record.group, record.steps_completed)
        self._shipper.put(record)

    def _progress(self, progress: float) -> None:
        self._shipper.put_progress(progress)

    def _early_exit(self, reason: EarlyExitReason) -> None:
        log.info("report_early_exit(%s)", reason.name)
        self._shipper.flush()
        self._client.report_early_exit(self._trial_id, reason.value)

    def _flush(self) -> None:
        self._shipper.flush()

    def _close(self) -> None:
        try:
            self._shipper.close()
        finally:
            tb, events = self._tensorboard, self._metric_events
            if events is not None:
                events.close()
                if tb is not None:
                    tb.finish()


class DummyTrainContext(TrainContext):
    """The off-cluster stand-in: checks every report like the real one, then logs it."""

    def __init__(self, distributed: DistributedContext | None = None) -> None:
        self._dist = distributed or DistributedContext(
            rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1
        )

    def get_experiment_best_validation(self) -> float | None:
        """Always None off-cluster: there is no experiment."""
        return None

    def set_metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """Off-cluster the metadata is kept in memory and logged."""
        self._metadata = json.loads(json.dumps(_metadata(metadata)))
        log.info("set_metadata(%s)", self._metadata)
        return dict(self._metadata)

    def get_metadata(self) -> dict[str, Any]:
        return dict(getattr(self, "_metadata", {}))

    def _emit(self, record: MetricRecord) -> None:
        log.info(
            "report_%s_metrics(steps_completed=%d, metrics=%s)",
            record.group,
            record.steps_completed,
            record.metrics,
        )
        if record.batch_metrics:
            log.debug("batch_metrics=%s", record.batch_metrics)

    def _progress(self, progress: float) -> None:
        log.info("progress: %.1f%%", progress * 100)

    def _early_exit(self, reason: EarlyExitReason) -> None:
        log.info("report_early_exit(%s)", reason.name)

    def _flush(self) -> None:
        pass

    def _close(self) -> None:
        pass


def _metadata(metadata: Any) -> dict[str, Any]:
    if not isinstance(metadata, dict):
        raise TypeError(f"set_metadata() takes a dict, not {type(metadata).__name__}")
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as e:
        raise TypeError(f"set_metadata(): the metadata is not JSON-able: {e}") from None
    return metadata


def _progress_value(progress: Any) -> float:
    try:
        value = float(progress)
    except (TypeError, ValueError):
        raise TypeError(f"progress must be a number, not {type(progress).__name__}") from None
    if math.isnan(value):
        raise ValueError("progress must be between 0 and 1, not NaN")
    return value
