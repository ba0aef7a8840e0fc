"""Checkpoints with the searcher metric of the validation at their step."""

from __future__ import annotations

import json

import pytest

from determined.common import errors
from pydet.master import queries
from pydet.master.store.db import Database
from tests.unit import rows


async def checkpoint(db: Database, uuid: str, trial_id: int, step: int, at: float) -> None:
    await db.execute(
        "INSERT INTO checkpoints (uuid, trial_id, experiment_id, steps_completed, metadata,"
        " resources, size, state, report_time, storage) VALUES (?, ?, 1, ?, '{}', ?, 3,"
        " 'COMPLETED', ?, '{}')",
        (uuid, trial_id, step, json.dumps({"model.pt": 3}), at),
    )


async def test_each_checkpoint_carries_the_metric_of_the_last_validation_at_its_step(
    store: Database,
) -> None:
    await rows.experiment(store, 1, metric="loss")
    await rows.trial(store, 1, 1)
    await rows.metric(store, 1, "validation", 10, run=1, loss=0.9)
    await rows.metric(store, 1, "validation", 10, run=2, loss=0.7)  # a later run's
    await rows.metric(store, 1, "validation", 20, loss=float("nan"))
    await rows.metric(store, 1, "training", 30, loss=0.1)
    await checkpoint(store, "c", 1, 30, at=3.0)
    await checkpoint(store, "a", 1, 10, at=1.0)
    await checkpoint(store, "b", 1, 20, at=2.0)

    found = await queries.trial_checkpoints(store, 1)
    assert [(c.uuid, c.searcher_metric) for c in found] == [("a", 0.7), ("b", None), ("c", None)]
    assert found[0].resources == {"model.pt": 3}
    assert [c.uuid for c in await queries.experiment_checkpoints(store, 1)] == ["a", "b", "c"]
    assert (await queries.checkpoint(store, "a")).searcher_metric == 0.7


async def test_unknown_checkpoints_trials_and_experiments_are_not_found(store: Database) -> None:
    with pytest.raises(errors.NotFound, match="checkpoint nope"):
        await queries.checkpoint(store, "nope")
    with pytest.raises(errors.NotFound, match="trial 4"):
        await queries.trial_checkpoints(store, 4)
    with pytest.raises(errors.NotFound, match="experiment 4"):
        await queries.experiment_checkpoints(store, 4)
    assert await queries.checkpoint_trial(store, "nope") is None
    assert await queries.checkpoint_experiment(store, "nope") is None
