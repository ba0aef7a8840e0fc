"""Workspaces, projects, moves and the model registry on both stores: every statement they
make (lists with their filters and counts, labels, registrations) answers alike on SQLite
and PostgreSQL."""

from __future__ import annotations

import json

from determined.common import errors
from pydet.master import queries
from pydet.master.experiments.checkpoints import Checkpoints
from pydet.master.models.models import ModelFilter
from pydet.master.models.registry import Registry
from pydet.master.store.db import Database
from pydet.master.workspaces.organization import Organization
from pydet.master.workspaces.projects import Note, ProjectFilter
from pydet.master.workspaces.workspaces import WorkspaceFilter


async def _experiment(db: Database, project_id: int, labels: list[str], state: str) -> int:
    return await db.execute(
        "INSERT INTO experiments (labels, state, config, original_config, username,"
        " start_time, job_id, project_id) VALUES (?, ?, '{}', '', 'alice', 1, 'j', ?)",
        (json.dumps(labels), state, project_id),
    )


async def test_workspaces_projects_and_moves_answer_alike_on_both_stores(store: Database) -> None:
    user = await store.execute(
        "INSERT INTO users (username, password_hash, modified_at) VALUES ('alice', '', 0)"
    )
    org = Organization(store, pools=("default",))
    team = await org.workspaces.create("team", user_id=user)
    vision = await org.projects.create(team.id, "vision", user_id=user, key="VIS")
    a = await _experiment(store, vision.id, ["cv", "prod"], "ACTIVE")
    b = await _experiment(store, vision.id, ["cv"], "COMPLETED")
    found, total = await org.workspaces.select(WorkspaceFilter(name="TEA", users=("alice",)))
    assert [w.name for w in found] == ["team"] and total == 1
    assert (found[0].num_projects, found[0].num_experiments) == (1, 2)
    projects, _ = await org.projects.select(
        ProjectFilter(workspace_id=team.id, order_by="last_experiment_start_time")
    )
    assert [(p.name, p.num_experiments, p.num_active_experiments) for p in projects] == [
        ("vision", 2, 1)
    ]
    assert (await org.projects.by_key("vis")).id == vision.id
    await org.projects.add_note(vision.id, Note("Plan", "#"))
    rows, total = await queries.experiments(
        store, queries.ExperimentFilter(project_id=vision.id, labels=("cv", "prod"))
    )
    assert [r.id for r in rows] == [a] and total == 1
    assert rows[0].workspace_name == "team" and rows[0].project_name == "vision"
    assert await queries.experiment_labels(store, vision.id) == ["cv", "prod"]
    assert await org.moves.move_many([a, b, 99], 1) == {a: "", b: "", 99: "experiment 99 not found"}
    await org.projects.delete(vision.id)
    await org.workspaces.delete(team.id)


async def test_the_registry_answers_alike_on_both_stores(store: Database) -> None:
    user = await store.execute(
        "INSERT INTO users (username, password_hash, modified_at) VALUES ('alice', '', 0)"
    )
    exp = await _experiment(store, 1, [], "COMPLETED")
    await store.execute(
        "INSERT INTO checkpoints (uuid, trial_id, experiment_id, steps_completed, metadata,"
        " resources, size, state, report_time, storage)"
        " VALUES ('ck', NULL, ?, 1, '{}', '{}', 0, 'COMPLETED', 0, '{}')",
        (exp,),
    )
    org = Organization(store, pools=("default",))
    registry = Registry(store, org.workspaces)
    model = await registry.models.create("resnet", user_id=user, labels=["cv", "prod"])
    await registry.models.create("vgg", user_id=user, labels=["cv"])
    version = await registry.versions.register("resnet", "ck", user_id=user)
    assert version.version == 1 and version.checkpoint is not None
    found, total = await registry.models.select(
        ModelFilter(labels=("prod",), workspace_names=("Uncategorized",), order_by="num_versions")
    )
    assert [m.name for m in found] == ["resnet"] and total == 1
    assert await registry.models.labels() == ["cv", "prod"]
    held = await queries.experiment_registrations(store, exp)
    assert [(r.uuid, r.model_name, r.version) for r in held] == [("ck", "resnet", 1)]
    try:
        await Checkpoints(store).delete_checkpoints(["ck"])
    except errors.FailedPrecondition as e:
        assert f"registered to resnet (model #{model.id}), version 1" in e.message
    else:
        raise AssertionError("a registered checkpoint was deleted")
    await registry.models.delete("resnet")
    assert await queries.registrations(store, ["ck"]) == []


async def test_pool_bindings_and_agent_users_answer_alike_on_both_stores(store: Database) -> None:
    user = await store.execute(
        "INSERT INTO users (username, password_hash, modified_at, agent_uid, agent_gid,"
        " agent_user, agent_group) VALUES ('bea', '', 0, 7, 8, 'bea', 'staff')"
    )
    org = Organization(store, pools=("default", "gpu"), default_pool="default")
    team = await org.workspaces.create("team", user_id=user, agent=(1, 1, "daemon", "daemon"))
    other = await org.workspaces.create("other", user_id=user)
    await org.bindings.bind("gpu", [team])
    assert await org.bindings.workspaces_of("gpu") == [team.id]
    assert await org.bindings.available_to(other.id) == ["default"]
    await org.bindings.overwrite("gpu", [other, team])
    await org.bindings.unbind("gpu", [team])
    assert await org.bindings.available_to(team.id) == ["default"]
    project = await org.projects.create(team.id, "p", user_id=user)
    task_id = "00000000-0000-0000-0000-000000000001"
    await store.execute(
        "INSERT INTO generic_tasks (id, task_type, username, description, resource_pool,"
        " state, start_time, extra) VALUES (?, 'GENERIC', 'bea', 'd', 'default', 'QUEUED', 0, ?)",
        (task_id, json.dumps({"project_id": project.id})),
    )
    assert await queries.task_identity(store, None, task_id) == (1, 1, "daemon", "daemon")
    await org.workspaces.patch(team.id, agent=None)
    assert await queries.task_identity(store, None, task_id) == (7, 8, "bea", "staff")
    await org.workspaces.delete(other.id)
    assert await org.bindings.workspaces_of("gpu") == []
