"""Experiments and trials as the API lists them, read from a real SQLite store."""

from __future__ import annotations

import importlib

import pytest

from determined.common import errors
from pydet.master import queries
from pydet.master.states import State
from pydet.master.store.db import Database
from tests.unit import rows


async def test_the_list_filters_by_state_name_and_archived_and_pages_in_order(
    store: Database,
) -> None:
    await rows.experiment(store, 1, name="mnist", state="COMPLETED")
    await rows.experiment(store, 2, name="MNIST big", state="ACTIVE")
    await rows.experiment(store, 3, name="cifar", state="COMPLETED", archived=True)
    await rows.experiment(store, 4, name="mnist old", state="COMPLETED", archived=True)

    found, total = await queries.experiments(store, queries.ExperimentFilter(name="mnist"))
    assert [e.id for e in found] == [1, 2, 4] and total == 3
    found, total = await queries.experiments(
        store, queries.ExperimentFilter(states=[State.COMPLETED], archived=False)
    )
    assert [e.id for e in found] == [1] and total == 1
    found, total = await queries.experiments(
        store, queries.ExperimentFilter(order_by="id", descending=True, limit=2, offset=1)
    )
    assert [e.id for e in found] == [3, 2] and total == 4


async def test_the_list_filters_by_owner(store: Database) -> None:
    await rows.experiment(store, 1, username="alice")
    await rows.experiment(store, 2, username="bob")
    await rows.experiment(store, 3, username="carol")
    found, total = await queries.experiments(store, queries.ExperimentFilter(users=["bob"]))
    assert [e.id for e in found] == [2] and total == 1
    everyone = queries.ExperimentFilter(users=["alice", "carol"])
    assert [e.id for e in (await queries.experiments(store, everyone))[0]] == [1, 3]


async def test_an_unknown_order_is_refused_with_the_columns_it_may_name(store: Database) -> None:
    with pytest.raises(errors.InvalidArgument, match="start_time"):
        await queries.experiments(store, queries.ExperimentFilter(order_by="password"))


async def test_an_experiment_shows_its_trial_count_and_best_metric_by_its_direction(
    store: Database,
) -> None:
    await rows.experiment(store, 1, smaller_is_better=True)
    await rows.experiment(store, 2, smaller_is_better=False)
    for exp in (1, 2):
        await rows.trial(store, exp * 10, exp, best=0.5)
        await rows.trial(store, exp * 10 + 1, exp, best=0.25)
        await rows.trial(store, exp * 10 + 2, exp)
    lower, higher = await queries.experiment(store, 1), await queries.experiment(store, 2)
    assert (lower.num_trials, lower.best_validation) == (3, 0.25)
    assert (higher.num_trials, higher.best_validation) == (3, 0.5)
    listed, _ = await queries.experiments(store, queries.ExperimentFilter())
    assert [e.best_validation for e in listed] == [0.25, 0.5]


async def test_trials_come_oldest_first_with_their_task_ids(store: Database) -> None:
    await rows.experiment(store, 7)
    for trial_id in (3, 1, 2):
        await rows.trial(store, trial_id, 7)
    trials = await queries.trials(store, 7)
    assert [t.task_id for t in trials] == ["7.1", "7.2", "7.3"]
    assert (await queries.trial(store, 2)).state is State.ACTIVE


async def test_unknown_experiments_and_trials_are_not_found(store: Database) -> None:
    with pytest.raises(errors.NotFound, match="experiment 9"):
        await queries.experiment(store, 9)
    with pytest.raises(errors.NotFound, match="experiment 9"):
        await queries.trials(store, 9)
    with pytest.raises(errors.NotFound, match="experiment 9"):
        await queries.context(store, 9)
    with pytest.raises(errors.NotFound, match="trial 9"):
        await queries.trial(store, 9)
    assert await queries.stored_config(store, 9) is None


async def test_an_experiments_summary_reads_indexes_not_its_trials_rows(store: Database) -> None:
    """GetExperiment and the experiment list run at every poll of the WebUI and the CLI: the
    trial count, best validation and phases come from indexes on (experiment, column), so
    an experiment of 10,000 trials answers in under a millisecond, not 17."""
    if store.dialect == "postgres":
        # Its planner chooses by the table's statistics (a few rows: a sequential scan);
        # what the store owes it is the indexes.
        rows = await store.fetch_all("SELECT indexname FROM pg_indexes WHERE tablename = 'trials'")
        names = {r["indexname"] for r in rows}
        assert {"trials_experiment_phase", "trials_experiment_best"} <= names
        return
    # The package exports the function ``experiments``, which hides the module of that name.
    summary = importlib.import_module("pydet.master.queries.experiments")._EXPERIMENTS
    plan = await store.fetch_all(f"EXPLAIN QUERY PLAN {summary} WHERE e.id = ?", (1,))
    reads = [r["detail"] for r in plan if " t " in f" {r['detail']} "]
    assert len(reads) == 4
    assert all("USING COVERING INDEX" in read for read in reads), reads
