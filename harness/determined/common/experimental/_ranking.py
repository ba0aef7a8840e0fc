"""Checkpoints with their training metadata, and the orders ``list_checkpoints`` sorts
them in, as Determined's master sorts them.

A checkpoint's validation is the one its trial reported at the same step: the master sends
its metrics and its value of the searcher's metric with the checkpoint. Sorting by the
searcher's metric puts checkpoints without one last, better first unless ``order_by`` says
otherwise; sorting by another metric puts those without it first in ascending order (last
in descending), and equal values in report order, as Determined does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from determined.common.experimental import _util
from determined.common.experimental.checkpoint import (
    Checkpoint,
    CheckpointSortBy,
    CheckpointState,
    CheckpointTrainingMetadata,
)

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession

# Determined's numbers of the checkpoint states, which SORT_BY_STATE orders by.
_STATE_NUMBERS = {s: n for n, s in enumerate(CheckpointState, start=1)}


def one(session: MasterSession, uuid: str) -> v1.Checkpoint:
    """The checkpoint's record (the master names a missing UUID in NotFound)."""
    from determined.api.gen import v1

    request = v1.GetCheckpointRequest(uuid=uuid)
    found = session.call(lambda stub: stub.get_checkpoint(request)).checkpoint
    assert found is not None
    return found


def _config(session: MasterSession, experiment_id: int) -> dict[str, Any]:
    from determined.api.gen import v1
    from determined.common import structs

    request = v1.GetExperimentRequest(experiment_id=experiment_id)
    return structs.python(session.call(lambda stub: stub.get_experiment(request)).config)


def _training(
    c: v1.Checkpoint, config: dict[str, Any], hparams: dict[str, Any]
) -> CheckpointTrainingMetadata | None:
    from determined.common import checkpoint_info, structs

    if c.training is None or not c.training.trial_id:
        return None
    validation = c.training.validation_metrics
    metrics = structs.to_dict(validation.avg_metrics) if validation is not None else None
    return CheckpointTrainingMetadata(
        experiment_config=config,
        experiment_id=checkpoint_info.experiment_id(c),
        trial_id=checkpoint_info.trial_id(c),
        hparams=hparams,
        validation_metrics={} if metrics is None else {"avgMetrics": metrics},
        searcher_metric=checkpoint_info.searcher_metric(c),
    )


def training_of(session: MasterSession, c: v1.Checkpoint) -> CheckpointTrainingMetadata | None:
    """The training metadata of one checkpoint (its experiment's config, its trial's
    hyperparameters)."""
    from determined.api.gen import v1
    from determined.common import checkpoint_info, structs

    trial_id = checkpoint_info.trial_id(c)
    if not trial_id:
        return None
    trial = session.call(lambda stub: stub.get_trial(v1.GetTrialRequest(trial_id=trial_id)))
    hparams = structs.python(trial.trial.hparams) if trial.trial else {}
    return _training(c, _config(session, checkpoint_info.experiment_id(c)), hparams)


def load(
    session: MasterSession, *, experiment_id: int = 0, trial_id: int = 0
) -> tuple[list[Checkpoint], dict[str, Any]]:
    """An experiment's or a trial's checkpoints (every state), oldest first, with their
    training metadata; and the experiment's config."""
    from determined.api.gen import v1
    from determined.common import checkpoint_info, structs

    if trial_id:
        t = session.call(lambda stub: stub.get_trial(v1.GetTrialRequest(trial_id=trial_id)))
        assert t.trial is not None
        experiment_id = t.trial.experiment_id
    config = _config(session, experiment_id)
    request = v1.GetCheckpointsRequest(experiment_id=experiment_id, trial_id=trial_id)
    records = session.call(lambda stub: stub.get_checkpoints(request)).checkpoints
    trials = v1.GetExperimentTrialsRequest(experiment_id=experiment_id)
    hparams = {
        t.id: structs.python(t.hparams)
        for t in session.call(lambda stub: stub.get_experiment_trials(trials)).trials
    }
    out = [
        Checkpoint._from_proto(
            session, c, _training(c, config, hparams.get(checkpoint_info.trial_id(c), {}))
        )
        for c in records
    ]
    return out, config


def searcher(config: dict[str, Any]) -> tuple[str | None, bool]:
    """The searcher's metric and whether smaller is better."""
    section = config.get("searcher") or {}
    metric = section.get("metric")
    return (metric if isinstance(metric, str) else None), bool(
        section.get("smaller_is_better", True)
    )


def metric_of(c: Checkpoint, name: str | None) -> float | None:
    """The checkpoint's validation value of ``name`` (None: the searcher's), if numeric."""
    training = c.training
    if training is None:
        return None
    if name is None:
        value: Any = training.searcher_metric
    else:
        value = (training.validation_metrics.get("avgMetrics") or {}).get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _time(c: Checkpoint) -> str:
    return c.report_time or ""


def _trial(c: Checkpoint) -> int:
    return c.training.trial_id if c.training is not None else 0


_FIELD_KEYS: dict[CheckpointSortBy, Callable[[Checkpoint], Any]] = {
    CheckpointSortBy.UUID: lambda c: c.uuid,
    CheckpointSortBy.TRIAL_ID: lambda c: (_trial(c), _time(c)),
    CheckpointSortBy.BATCH_NUMBER: lambda c: (c.steps_completed, _time(c)),
    CheckpointSortBy.END_TIME: _time,
    CheckpointSortBy.STATE: lambda c: _STATE_NUMBERS.get(c.state, 0) if c.state else 0,
}


def sort(
    checkpoints: list[Checkpoint],
    config: dict[str, Any],
    sort_by: str | CheckpointSortBy | None,
    order_by: Any,
) -> list[Checkpoint]:
    """``checkpoints`` in the master's order for ``sort_by`` (default: the searcher's
    metric) and ``order_by`` (default: better first for the searcher's metric, else
    ascending)."""
    if sort_by is None:
        sort_by = CheckpointSortBy.SEARCHER_METRIC
    if sort_by is CheckpointSortBy.SEARCHER_METRIC:
        if order_by is None:
            smaller = searcher(config)[1]
            order_by = _util.OrderBy.ASC if smaller else _util.OrderBy.DESC
        reverse = _util.descending(order_by)
        have = [c for c in checkpoints if metric_of(c, None) is not None]
        lack = [c for c in checkpoints if metric_of(c, None) is None]
        have.sort(key=lambda c: (metric_of(c, None), _time(c)), reverse=reverse)
        return have + lack
    reverse = _util.descending(order_by)
    if isinstance(sort_by, str):
        name = sort_by

        def by_metric(c: Checkpoint) -> tuple[int, float, str]:
            value = metric_of(c, name)
            return (0, 0.0, _time(c)) if value is None else (1, value, _time(c))

        return sorted(checkpoints, key=by_metric, reverse=reverse)
    return sorted(checkpoints, key=_FIELD_KEYS[sort_by], reverse=reverse)


def best_of_distinct_trials(
    checkpoints: list[Checkpoint], metric: str, smaller_is_better: bool, limit: int
) -> list[Checkpoint]:
    """Determined's ``top_n_checkpoints``: by ``metric`` (those without it last), the best
    checkpoint of each of the ``limit`` best trials."""
    have = [c for c in checkpoints if metric_of(c, metric) is not None]
    lack = [c for c in checkpoints if metric_of(c, metric) is None]
    have.sort(key=lambda c: metric_of(c, metric) or 0.0, reverse=not smaller_is_better)
    best: list[Checkpoint] = []
    seen: set[int] = set()
    for c in have + lack:
        if _trial(c) not in seen:
            seen.add(_trial(c))
            best.append(c)
    return best[:limit]
