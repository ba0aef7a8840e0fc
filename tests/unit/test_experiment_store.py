"""The experiments' and trials' rows, written and read back as a restarted master does."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from determined.common import expconf
from pydet.master.events import EventBus
from pydet.master.experiments.checkpoints import Checkpoints
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import Experiment
from pydet.master.experiments.trial_lifecycle import TrialPhase
from pydet.master.search import searcher
from pydet.master.states import State
from pydet.master.store import db as db_module
from pydet.master.store.db import Database

CONFIG = expconf.parse_experiment_config(
    {
        "name": "stored",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "resources": {"resource_pool": "default", "priority": 30},
    }
)


async def new_experiment(store: ExperimentStore) -> Experiment:
    exp_id = await store.insert(
        CONFIG,
        text="name: stored",
        context=b"",
        state=State.ACTIVE,
        username="alice",
        start_time=1.0,
        parent_id=0,
        job_id="job-1",
    )
    return Experiment(
        id=exp_id,
        config=CONFIG,
        state=State.ACTIVE,
        search=searcher.new_search(CONFIG, 1),
        job_id="job-1",
        username="alice",
        start_time=1.0,
    )


async def test_what_is_written_is_what_a_restarted_master_loads(store: Database) -> None:
    events = EventBus()
    experiments = ExperimentStore(store, events)
    exp = await new_experiment(experiments)
    trial = await experiments.insert_trial(
        exp, request_id="r1", phase=TrialPhase.QUEUED, hparams={"lr": 0.1}, seed=7
    )
    trial.phase, trial.searcher_length, trial.restarts = TrialPhase.RUNNING, 100, 1
    await experiments.save_trial(trial)
    resources = dataclasses.replace(exp.config.resources, priority=5)
    exp.config = dataclasses.replace(exp.config, resources=resources)
    exp.queue_order = 0.5
    await experiments.save_job(exp)

    (stored,) = await experiments.live_experiments()
    assert (stored.id, stored.job_id, stored.username) == (exp.id, "job-1", "alice")
    assert stored.config.resources.priority == 5 and stored.queue_order == 0.5
    (loaded,) = await experiments.trials(exp.id)
    assert loaded == trial


async def test_an_ended_experiment_is_not_loaded_again(store: Database) -> None:
    experiments = ExperimentStore(store, EventBus())
    exp = await new_experiment(experiments)
    exp.state = State.COMPLETED
    await experiments.save_state(exp)
    assert await experiments.live_experiments() == []


async def test_a_new_experiment_ends_trials_without_reading_checkpoints(tmp_path: Path) -> None:
    exp = Experiment(
        id=1,
        config=CONFIG,
        state=State.ACTIVE,
        search=searcher.new_search(CONFIG, 1),
        may_have_checkpoints=False,
    )
    # The store is not even open: the retention policy reads nothing from it.
    await Checkpoints(Database(tmp_path / "closed.db")).apply_retention(exp)
    exp.may_have_checkpoints = True
    with pytest.raises(RuntimeError, match="not open"):
        await Checkpoints(Database(tmp_path / "closed.db")).apply_retention(exp)


async def test_the_searchers_records_of_running_trials_are_saved_on_their_rows(
    store: Database,
) -> None:
    experiments = ExperimentStore(store, EventBus())
    exp = await new_experiment(experiments)
    (create,) = exp.search.initial_operations()
    assert isinstance(create, searcher.Create)
    trial = await experiments.insert_trial(
        exp, request_id=create.request_id, phase=TrialPhase.QUEUED, hparams={}, seed=1
    )
    exp.trials[trial.id] = trial
    exp.search.on_trial_created(trial.request_id)
    exp.search.on_validation_completed(trial.request_id, 0.5, 1)  # reported; closing
    await experiments.save_search(exp)
    assert await experiments.searcher_records(exp.id) == {trial.request_id: [1, 1]}

    (stored,) = await experiments.live_experiments()
    restored = searcher.new_search(CONFIG, 99)
    restored.load_state_dict(stored.searcher_state)
    restored.load_trial_records(await experiments.searcher_records(exp.id))
    assert restored.trial_records() == exp.search.trial_records()
    assert restored.progress() == exp.search.progress()

    exp.search.on_trial_closed(trial.request_id)
    await experiments.save_search(exp)
    assert await experiments.searcher_records(exp.id) == {}


async def test_deleting_an_experiment_takes_its_logs_and_metrics_and_no_others(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_module, "DELETE_CHUNK", 3)  # several chunks of each
    experiments = ExperimentStore(store, EventBus())
    doomed, kept = await new_experiment(experiments), await new_experiment(experiments)
    for exp in (doomed, kept):
        trial = await experiments.insert_trial(
            exp, request_id="r1", phase=TrialPhase.RUNNING, hparams={}, seed=1
        )
        await store.execute_many(
            "INSERT INTO task_logs (trial_id, task_id, allocation_id, timestamp, message)"
            " VALUES (?, 't', 'a', 0, 'line')",
            [(trial.id,)] * 10,
        )
        await store.execute_many(
            "INSERT INTO metrics (trial_id, grp, steps_completed, metrics, timestamp)"
            " VALUES (?, 'training', ?, '{}', 0)",
            [(trial.id, step) for step in range(10)],
        )

    await experiments.delete(doomed.id)

    for table in ("task_logs", "metrics"):
        rows = await store.fetch_all(
            f"SELECT t.experiment_id FROM {table} JOIN trials t ON t.id = {table}.trial_id"
        )
        assert [r["experiment_id"] for r in rows] == [kept.id] * 10, table
    assert await store.fetch_one("SELECT id FROM experiments WHERE id = ?", (doomed.id,)) is None
