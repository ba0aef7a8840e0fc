"""An experiment's name, description, labels and notes changed after creation: the row, the
stored config and a running experiment's config all say the same."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator

import pytest

from determined.api.gen import v1
from determined.common import errors
from determined.common.expconf import parse_experiment_config
from pydet.master import queries
from pydet.master.experiments.edits import ExperimentEdits
from pydet.master.experiments.live import Experiment, LiveExperiments
from pydet.master.states import State
from pydet.master.store.db import Database

CONFIG = {
    "name": "first",
    "description": "d",
    "labels": ["a"],
    "entrypoint": "true",
    "searcher": {"name": "single", "metric": "x", "max_length": 1},
}


@pytest.fixture
async def db(tmp_path: pathlib.Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "pydet.db")
    await database.open()
    await database.execute(
        "INSERT INTO experiments (id, name, description, labels, state, config, original_config,"
        " username, start_time, job_id) VALUES (1, 'first', 'd', '[\"a\"]', 'ACTIVE', ?, '',"
        " 'alice', 0, 'job-1')",
        (json.dumps(CONFIG),),
    )
    try:
        yield database
    finally:
        await database.close()


async def test_a_patch_changes_the_row_and_the_stored_config(db: Database) -> None:
    edits = ExperimentEdits(db, LiveExperiments())
    labels = v1.ExperimentLabels(values=["x", "y", "x"])
    await edits.patch(v1.PatchExperiment(id=1, name="second", notes="n", labels=labels))
    row = await queries.experiment(db, 1)
    assert (row.name, row.description, row.labels, row.notes) == ("second", "d", ["x", "y"], "n")
    assert (row.config_dict["name"], row.config_dict["labels"]) == ("second", ["x", "y"])
    await edits.patch(v1.PatchExperiment(id=1, description="new"))
    row = await queries.experiment(db, 1)
    assert (row.name, row.description, row.notes) == ("second", "new", "n")


async def test_labels_are_added_once_and_removed(db: Database) -> None:
    edits = ExperimentEdits(db, LiveExperiments())
    assert await edits.add_label(1, "b") == ["a", "b"]
    assert await edits.add_label(1, "b") == ["a", "b"]
    assert await edits.remove_label(1, "a") == ["b"]
    assert await edits.remove_label(1, "absent") == ["b"]
    assert (await queries.experiment(db, 1)).config_dict["labels"] == ["b"]
    with pytest.raises(errors.InvalidArgument, match="label"):
        await edits.add_label(1, " ")


async def test_a_running_experiments_config_changes_too(db: Database) -> None:
    live = LiveExperiments()
    config = parse_experiment_config(CONFIG)
    exp = Experiment(id=1, config=config, state=State.ACTIVE, search=None, username="alice")
    live.add(exp)
    await ExperimentEdits(db, live).patch(
        v1.PatchExperiment(id=1, name="renamed", labels=v1.ExperimentLabels(values=["z"]))
    )
    assert (exp.config.name, exp.config.labels) == ("renamed", ("z",))


async def test_bad_input_is_named(db: Database) -> None:
    edits = ExperimentEdits(db, LiveExperiments())
    with pytest.raises(errors.InvalidArgument, match="name: must not be empty"):
        await edits.patch(v1.PatchExperiment(id=1, name="  "))
    with pytest.raises(errors.NotFound, match="experiment 7"):
        await edits.patch(v1.PatchExperiment(id=7, name="x"))
    with pytest.raises(errors.NotFound, match="experiment 7"):
        await edits.add_label(7, "x")
