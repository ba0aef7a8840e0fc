"""The model registry in a real store: models and versions as Determined keeps them, the
refusals for bad input, and the checkpoints it holds kept from garbage collection and from
deletion (naming the model)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator

import pytest

from determined.common import errors, expconf
from pydet.master.experiments.checkpoints import Checkpoints
from pydet.master.experiments.live import Experiment, Trial
from pydet.master.experiments.trial_lifecycle import TrialPhase
from pydet.master.models.models import ModelFilter
from pydet.master.models.registry import Registry
from pydet.master.search import searcher
from pydet.master.states import State
from pydet.master.store.db import Database
from pydet.master.workspaces.workspaces import WorkspaceStore

ALICE = 2
CONFIG = expconf.parse_experiment_config(
    {
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        # The policy keeps one checkpoint per trial: the latest.
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": "/tmp",
            "save_trial_best": 0,
            "save_trial_latest": 1,
        },
    }
)


@pytest.fixture
async def db(tmp_path: pathlib.Path) -> AsyncIterator[Database]:
    store = Database(tmp_path / "pydet.db")
    await store.open()
    await store.execute(
        "INSERT INTO users (id, username, password_hash, modified_at) VALUES (?, 'alice', '', 0)",
        (ALICE,),
    )
    # Experiment 1's trial 1 wrote checkpoints ck-1, ck-2 and ck-3 (steps 1 to 3).
    await store.execute(
        "INSERT INTO experiments (id, state, config, original_config, username, start_time,"
        " job_id) VALUES (1, 'COMPLETED', ?, '', 'alice', 0, 'j')",
        (json.dumps(CONFIG.to_dict()),),
    )
    await store.execute(
        "INSERT INTO trials (id, experiment_id, request_id, state, hparams, seed, start_time)"
        " VALUES (1, 1, 'r', 'COMPLETED', '{}', 0, 0)"
    )
    for step in (1, 2, 3):
        await store.execute(
            "INSERT INTO checkpoints (uuid, trial_id, experiment_id, steps_completed, metadata,"
            " resources, size, state, report_time, storage)"
            " VALUES (?, 1, 1, ?, '{}', '{}', 0, 'COMPLETED', ?, '{}')",
            (f"ck-{step}", step, float(step)),
        )
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def registry(db: Database) -> Registry:
    return Registry(db, WorkspaceStore(db, pools=("default",)))


async def test_a_model_gets_numbered_versions_that_hold_checkpoints(registry: Registry) -> None:
    model = await registry.models.create(
        "resnet", user_id=ALICE, description="d", metadata={"a": 1}, labels=["x", "x", "y"]
    )
    assert (model.workspace_id, model.labels, model.metadata) == (1, ("x", "y"), {"a": 1})
    first = await registry.versions.register(
        "resnet", "ck-1", user_id=ALICE, name="first", labels=["prod"], metadata={"acc": 0.9}
    )
    second = await registry.versions.register(str(model.id), "ck-2", user_id=ALICE)
    assert (first.version, second.version) == (1, 2)
    assert first.checkpoint is not None and first.checkpoint.steps_completed == 1
    _, versions, total = await registry.versions.select("resnet", descending=True)
    assert [v.version for v in versions] == [2, 1] and total == 2
    changed = await registry.versions.patch("resnet", 1, notes="# best so far")
    assert (changed.notes, changed.name) == ("# best so far", "first")
    assert (await registry.models.get("resnet")).num_versions == 2
    await registry.versions.delete("resnet", 2)
    with pytest.raises(errors.NotFound, match="version 2 of model 'resnet' not found"):
        await registry.versions.get("resnet", 2)


async def test_bad_names_unknown_models_and_unusable_checkpoints_are_refused(
    registry: Registry, db: Database
) -> None:
    await registry.models.create("resnet", user_id=ALICE)
    with pytest.raises(errors.AlreadyExists, match="a model named 'resnet' exists"):
        await registry.models.create("resnet", user_id=ALICE)
    with pytest.raises(errors.InvalidArgument, match="cannot be only numbers"):
        await registry.models.create("1234", user_id=ALICE)
    with pytest.raises(errors.InvalidArgument, match="cannot have slashes"):
        await registry.models.create("a/b", user_id=ALICE)
    with pytest.raises(errors.NotFound, match="model 'vgg' not found"):
        await registry.models.get("vgg")
    with pytest.raises(errors.NotFound, match="model '77' not found"):
        await registry.versions.register("77", "ck-1", user_id=ALICE)
    with pytest.raises(errors.NotFound, match="checkpoint nope not found"):
        await registry.versions.register("resnet", "nope", user_id=ALICE)
    await db.execute("UPDATE checkpoints SET state = 'DELETED' WHERE uuid = 'ck-3'")
    with pytest.raises(errors.FailedPrecondition, match="ck-3 is in DELETED state"):
        await registry.versions.register("resnet", "ck-3", user_id=ALICE)
    with pytest.raises(errors.NotFound, match="workspace 'lab' not found"):
        await registry.models.create("vgg", user_id=ALICE, workspace_name="lab")
    await registry.models.set_archived("resnet", True)
    with pytest.raises(errors.FailedPrecondition, match="archived and cannot register new"):
        await registry.versions.register("resnet", "ck-1", user_id=ALICE)
    with pytest.raises(errors.FailedPrecondition, match="archived and cannot have attributes"):
        await registry.models.patch("resnet", description="new")


async def test_models_are_listed_by_label_workspace_and_name(registry: Registry) -> None:
    await registry.models.create("a-net", user_id=ALICE, labels=["cv", "prod"])
    await registry.models.create("b-net", user_id=ALICE, labels=["cv"])
    await registry.models.create("gpt", user_id=ALICE, labels=['cv", "prod'])
    found, total = await registry.models.select(ModelFilter(labels=("cv", "prod")))
    assert [m.name for m in found] == ["a-net"] and total == 1
    found, _ = await registry.models.select(ModelFilter(name="NET", order_by="name"))
    assert [m.name for m in found] == ["a-net", "b-net"]
    found, _ = await registry.models.select(ModelFilter(workspace_names=("Uncategorized",)))
    assert len(found) == 3
    assert await registry.models.labels() == ["cv", 'cv", "prod', "prod"]


async def test_a_registered_checkpoint_is_never_garbage_collected(
    registry: Registry, db: Database
) -> None:
    await registry.models.create("resnet", user_id=ALICE)
    await registry.versions.register("resnet", "ck-1", user_id=ALICE)
    exp = Experiment(
        id=1, config=CONFIG, state=State.COMPLETED, search=searcher.new_search(CONFIG, 1)
    )
    exp.trials[1] = Trial(
        id=1, experiment_id=1, request_id="r", phase=TrialPhase.COMPLETED, hparams={}, seed=0
    )
    await Checkpoints(db).apply_retention(exp)
    states = {r["uuid"]: r["state"] for r in await db.fetch_all("SELECT * FROM checkpoints")}
    # The policy keeps the latest (ck-3); the registry keeps ck-1; ck-2 goes.
    assert states == {"ck-1": "COMPLETED", "ck-2": "DELETED", "ck-3": "COMPLETED"}


async def test_deleting_a_registered_checkpoint_is_refused_naming_the_model(
    registry: Registry, db: Database
) -> None:
    model = await registry.models.create("resnet", user_id=ALICE)
    await registry.versions.register("resnet", "ck-2", user_id=ALICE)
    with pytest.raises(errors.FailedPrecondition) as refused:
        await Checkpoints(db).delete_checkpoints(["ck-1", "ck-2"])
    assert f"ck-2, registered to resnet (model #{model.id}), version 1" in refused.value.message
    row = await db.fetch_one("SELECT state FROM checkpoints WHERE uuid = 'ck-1'")
    assert row is not None and row["state"] == "COMPLETED"  # nothing deleted at all
    await registry.versions.delete("resnet", 1)
    await Checkpoints(db).delete_checkpoints(["ck-2"])
