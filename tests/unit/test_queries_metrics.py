"""The API's SQL reads against a real SQLite store."""

from __future__ import annotations

import itertools
import json
import pathlib
from collections.abc import AsyncIterator

import pytest

from determined.common import errors
from pydet.master import queries
from pydet.master.store.db import Database


async def two_trials(store: Database) -> None:
    """Experiment 1 with trials 1 and 2."""
    await store.execute(
        "INSERT INTO experiments (id, state, config, original_config, start_time, job_id)"
        " VALUES (1, 'ACTIVE', '{}', '', 0, 'job-1')"
    )
    for trial in (1, 2):
        await store.execute(
            "INSERT INTO trials (id, experiment_id, request_id, state, hparams, seed, start_time)"
            " VALUES (?, 1, ?, 'ACTIVE', '{}', 0, 0)",
            (trial, f"r{trial}"),
        )


@pytest.fixture
async def db(tmp_path: pathlib.Path) -> AsyncIterator[Database]:
    store = Database(tmp_path / "pydet.db")
    await store.open()
    await two_trials(store)
    yield store
    await store.close()


async def report(db: Database, trial: int, group: str, step: int) -> None:
    await db.execute(
        "INSERT INTO metrics (trial_id, grp, steps_completed, metrics, timestamp)"
        " VALUES (?, ?, ?, ?, 0)",
        (trial, group, step, json.dumps({"loss": 1.0 / step})),
    )


async def thinned(db: Database, trial: int, max_points: int) -> list[dict[str, object]]:
    return list(json.loads(await queries.trial_metrics_json(db, trial, max_points=max_points)))


async def test_thinning_keeps_about_max_points_of_each_group_when_groups_and_trials_interleave(
    db: Database,
) -> None:
    # Two trials report at once, each a validation after every training report: row ids of
    # one group of one trial are every 4th, the case where thinning by id returned ~nothing.
    for step in range(1, 2001):
        for trial in (1, 2):
            await report(db, trial, "training", step)
            await report(db, trial, "validation", step)
    for trial in (1, 2):
        reports = await thinned(db, trial, max_points=200)
        for group in ("training", "validation"):
            steps = [int(str(r["stepsCompleted"])) for r in reports if r["group"] == group]
            assert 190 <= len(steps) <= 201, (trial, group, len(steps))
            assert steps[0] == 1 and steps[-1] == 2000
            gaps = {b - a for a, b in itertools.pairwise(steps)}
            assert max(gaps) <= 10, gaps  # spread over the whole length


async def test_a_group_under_max_points_is_returned_whole(db: Database) -> None:
    for step in range(1, 5001):
        await report(db, 1, "training", step)
    for step in range(100, 5001, 100):
        await report(db, 1, "validation", step)
    reports = await thinned(db, 1, max_points=1000)
    validations = [r for r in reports if r["group"] == "validation"]
    assert len(validations) == 50
    assert 990 <= len([r for r in reports if r["group"] == "training"]) <= 1001


async def test_without_max_points_every_report_comes_back_in_step_order(db: Database) -> None:
    for step in (3, 1, 2):
        await report(db, 1, "training", step)
    await report(db, 2, "training", 9)
    reports = await thinned(db, 1, max_points=0)
    assert [r["stepsCompleted"] for r in reports] == ["1", "2", "3"]


async def test_reports_are_listed_by_group_after_a_step_and_limited(db: Database) -> None:
    for step in (1, 2, 3):
        await report(db, 1, "training", step)
    await report(db, 1, "validation", 2)
    listed = await queries.metrics(db, 1, group="training", after_steps=1, limit=1)
    assert [(m.group, m.steps_completed) for m in listed] == [("training", 2)]
    assert [m.group for m in await queries.metrics(db, 1)] == [
        "training",
        "training",
        "validation",
        "training",
    ]


async def test_unknown_trials_have_no_reports_to_list(db: Database) -> None:
    with pytest.raises(errors.NotFound, match="trial 9"):
        await queries.metrics(db, 9)
    with pytest.raises(errors.NotFound, match="trial 9"):
        await queries.trial_metrics_json(db, 9)


async def test_the_best_validation_follows_the_searchers_direction(db: Database) -> None:
    await db.execute("UPDATE trials SET best_validation = ? WHERE id = ?", (0.5, 1))
    await db.execute("UPDATE trials SET best_validation = ? WHERE id = ?", (0.25, 2))
    config = {"searcher": {"smaller_is_better": False}}
    await db.execute("UPDATE experiments SET config = ?", (json.dumps(config),))
    assert await queries.best_validation(db, 1) == 0.5
    config = {"searcher": {"smaller_is_better": True}}
    await db.execute("UPDATE experiments SET config = ?", (json.dumps(config),))
    assert await queries.best_validation(db, 1) == 0.25
    with pytest.raises(errors.NotFound, match="experiment 2"):
        await queries.best_validation(db, 2)
