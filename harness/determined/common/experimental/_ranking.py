"""Listing and ranking checkpoints for ``Experiment`` and ``Trial``.

A checkpoint's validation is the validation its trial reported at the same step; the
master records the searcher metric of that validation with the checkpoint, and the other
metrics come from the trial's validation reports. Only completed checkpoints count.
"""

from __future__ import annotations

import functools
import json
import math
from typing import TYPE_CHECKING, Any

from determined.common import errors
from determined.common.experimental.checkpoint import (
    Checkpoint,
    CheckpointSortBy,
    CheckpointTrainingMetadata,
)
from determined.common.experimental.trial import OrderBy

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession


def _load(
    session: MasterSession, *, experiment_id: int = 0, trial_id: int = 0
) -> tuple[list[Checkpoint], dict[str, Any]]:
    from determined.api.gen import v1
    from determined.common import checkpoint_info, structs

    if trial_id:
        t = session.call(lambda stub: stub.get_trial(v1.GetTrialRequest(trial_id=trial_id)))
        if t.trial is None:
            raise errors.NotFound(f"trial {trial_id} not found")
        experiment_id = t.trial.experiment_id
    exp = session.call(
        lambda stub: stub.get_experiment(v1.GetExperimentRequest(experiment_id=experiment_id))
    )
    config: dict[str, Any] = structs.python(exp.config)
    request = v1.GetCheckpointsRequest(experiment_id=experiment_id, trial_id=trial_id)
    records = [
        c
        for c in session.call(lambda stub: stub.get_checkpoints(request)).checkpoints
        if c.state == v1.CheckpointState.COMPLETED
    ]
    trials = {
        t.id: t
        for t in session.call(
            lambda stub: stub.get_experiment_trials(
                v1.GetExperimentTrialsRequest(experiment_id=experiment_id)
            )
        ).trials
    }
    validations: dict[int, dict[int, dict[str, Any]]] = {}
    for tid in sorted({checkpoint_info.trial_id(c) for c in records}):
        reports = session.call(functools.partial(_validations, trial_id=tid)).reports
        validations[tid] = {
            int(r.steps_completed): json.loads(r.metrics) if r.metrics else {} for r in reports
        }
    out = []
    for c in records:
        trial_id = checkpoint_info.trial_id(c)
        trial = trials.get(trial_id)
        metrics = validations.get(trial_id, {}).get(int(c.steps_completed))
        training = CheckpointTrainingMetadata(
            experiment_config=config,
            experiment_id=checkpoint_info.experiment_id(c),
            trial_id=trial_id,
            hparams=structs.python(trial.hparams) if trial is not None else {},
            validation_metrics={} if metrics is None else {"avgMetrics": metrics},
            searcher_metric=checkpoint_info.searcher_metric(c),
        )
        out.append(Checkpoint._from_proto(session, c, training))
    return out, config


async def _validations(stub: v1.DeterminedStub, *, trial_id: int) -> v1.GetTrialMetricsResponse:
    from determined.api.gen import v1

    return await stub.get_trial_metrics(
        v1.GetTrialMetricsRequest(trial_id=trial_id, group="validation")
    )


def _searcher(config: dict[str, Any]) -> tuple[str, bool]:
    searcher = config.get("searcher") or {}
    return str(searcher.get("metric") or ""), bool(searcher.get("smaller_is_better", True))


def _metric(c: Checkpoint, name: str | None) -> float | None:
    """The checkpoint's validation of ``name`` (None: the searcher metric), if numeric."""
    training = c.training
    if training is None:
        return None
    if name is None:
        value: Any = training.searcher_metric
    else:
        value = training.validation_metrics.get("avgMetrics", {}).get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def best_checkpoints(
    session: MasterSession,
    *,
    experiment_id: int = 0,
    trial_id: int = 0,
    sort_by: str | None,
    smaller_is_better: bool | None,
    limit: int,
) -> list[Checkpoint]:
    """The best checkpoint of each of the ``limit`` best trials, best first."""
    checkpoints, config = _load(session, experiment_id=experiment_id, trial_id=trial_id)
    metric, searcher_smaller = _searcher(config)
    name = None if not sort_by or sort_by == metric else sort_by
    smaller = searcher_smaller if smaller_is_better is None else smaller_is_better
    sign = 1.0 if smaller else -1.0
    ranked = [(m, c) for c in checkpoints if (m := _metric(c, name)) is not None]
    ranked.sort(key=lambda mc: (sign * mc[0], mc[1].training.trial_id if mc[1].training else 0))
    best: list[Checkpoint] = []
    seen: set[int] = set()
    for _, c in ranked:
        tid = c.training.trial_id if c.training else 0
        if tid not in seen:
            seen.add(tid)
            best.append(c)
    return best[:limit]


def list_checkpoints(
    session: MasterSession,
    *,
    experiment_id: int = 0,
    trial_id: int = 0,
    sort_by: str | CheckpointSortBy | None,
    order_by: OrderBy | None,
    max_results: int | None,
) -> list[Checkpoint]:
    """Completed checkpoints sorted by a field or a validation metric; by default by the
    searcher metric, best first. Checkpoints without the metric come last."""
    checkpoints, config = _load(session, experiment_id=experiment_id, trial_id=trial_id)
    metric, smaller = _searcher(config)
    if sort_by is None:
        sort_by = CheckpointSortBy.SEARCHER_METRIC
        if order_by is None:
            order_by = OrderBy.ASC if smaller else OrderBy.DESC
    descending = order_by is OrderBy.DESC
    if isinstance(sort_by, str) or sort_by is CheckpointSortBy.SEARCHER_METRIC:
        name = None if sort_by is CheckpointSortBy.SEARCHER_METRIC or sort_by == metric else sort_by
        assert not isinstance(name, CheckpointSortBy)
        with_metric = [c for c in checkpoints if _metric(c, name) is not None]
        without = [c for c in checkpoints if _metric(c, name) is None]
        with_metric.sort(key=lambda c: _metric(c, name) or 0.0, reverse=descending)
        ordered = with_metric + without
    else:
        ordered = sorted(checkpoints, key=_field_key(sort_by), reverse=descending)
    return ordered if max_results is None else ordered[:max_results]


def _field_key(sort_by: CheckpointSortBy) -> Any:
    def key(c: Checkpoint) -> Any:
        if sort_by is CheckpointSortBy.UUID:
            return c.uuid
        if sort_by is CheckpointSortBy.TRIAL_ID:
            return c.training.trial_id if c.training else 0
        if sort_by is CheckpointSortBy.BATCH_NUMBER:
            return c.steps_completed
        if sort_by is CheckpointSortBy.END_TIME:
            return c.report_time.timestamp() if c.report_time else 0.0
        return c.state.value

    return key
