"""``TrialMetrics``: one metrics report of a trial, as ``Trial.iter_metrics``,
``Determined.iter_trials_metrics`` and ``Checkpoint.get_metrics`` give them."""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import TYPE_CHECKING, Any

from determined.common import util

if TYPE_CHECKING:
    from determined.api.gen import v1


@dataclasses.dataclass
class TrialMetrics:
    """One report: ``metrics`` (name to value) that trial ``trial_id`` reported in its run
    ``trial_run_id`` (1 for its first process, one more at each restart) after
    ``steps_completed`` steps, at ``end_time``, in ``group`` ("training", "validation" or
    any group passed to ``core_context.train.report_metrics``)."""

    trial_id: int
    trial_run_id: int
    steps_completed: int
    end_time: datetime.datetime
    metrics: dict[str, Any]
    group: str
    batch_metrics: list[dict[str, Any]] | None = None

    @classmethod
    def _from_proto(cls, r: v1.MetricReport, trial_id: int = 0) -> TrialMetrics:
        batch = json.loads(r.batch_metrics) if r.batch_metrics else None
        return cls(
            trial_id=r.trial_id or trial_id,
            trial_run_id=r.trial_run_id,
            steps_completed=int(r.steps_completed),
            end_time=datetime.datetime.fromtimestamp(r.timestamp, tz=datetime.UTC),
            metrics=json.loads(r.metrics) if r.metrics else {},
            group=r.group,
            batch_metrics=batch or None,
        )

    @property
    def total_batches(self) -> int:
        """The older name of ``steps_completed``."""
        return self.steps_completed

    @total_batches.setter
    def total_batches(self, value: int) -> None:
        self.steps_completed = value


class TrainingMetrics(TrialMetrics):
    """A report of the training group (deprecated: ``TrialMetrics`` with that group)."""

    def __init__(self, total_batches: int | None = None, **kwargs: Any) -> None:
        if total_batches is not None:
            kwargs["steps_completed"] = total_batches
        kwargs["group"] = util._LEGACY_TRAINING
        super().__init__(**kwargs)


class ValidationMetrics(TrialMetrics):
    """A report of the validation group (deprecated: ``TrialMetrics`` with that group)."""

    def __init__(self, total_batches: int | None = None, **kwargs: Any) -> None:
        if total_batches is not None:
            kwargs["steps_completed"] = total_batches
        kwargs["group"] = util._LEGACY_VALIDATION
        super().__init__(**kwargs)


def _legacy(cls: type[TrialMetrics], report: TrialMetrics) -> TrialMetrics:
    """``report`` as a ``TrainingMetrics`` or ``ValidationMetrics``."""
    fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
    fields.pop("group")
    return cls(**fields)
