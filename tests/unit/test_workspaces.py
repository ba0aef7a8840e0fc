"""Workspaces and projects in a real store: what each call changes, and the one-line refusal
each kind of bad input gets (unknown ids and names, duplicates, the immutable defaults,
archived projects, deleting what still holds experiments)."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from determined.common import errors
from pydet.master.store.db import Database
from pydet.master.workspaces.organization import Organization
from pydet.master.workspaces.projects import Note, ProjectFilter
from pydet.master.workspaces.workspaces import DEFAULT_ID, WorkspaceFilter

ALICE, BOB = 2, 3


@pytest.fixture
async def org(tmp_path: pathlib.Path) -> AsyncIterator[Organization]:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    for user_id, name in ((ALICE, "alice"), (BOB, "bob")):
        await db.execute(
            "INSERT INTO users (id, username, password_hash, modified_at) VALUES (?, ?, '', 0)",
            (user_id, name),
        )
    try:
        yield Organization(db, pools=("default", "gpu"))
    finally:
        await db.close()


async def add_experiment(org: Organization, project_id: int, state: str = "ACTIVE") -> int:
    db = org.workspaces._db
    return await db.execute(
        "INSERT INTO experiments (state, config, original_config, username, start_time, job_id,"
        " project_id) VALUES (?, '{}', '', 'alice', 5, 'j', ?)",
        (state, project_id),
    )


async def test_the_defaults_are_uncategorized_and_cannot_change(org: Organization) -> None:
    w = await org.workspaces.get(DEFAULT_ID)
    p = await org.projects.get(DEFAULT_ID)
    assert (w.name, w.immutable, w.username, w.num_projects) == ("Uncategorized", True, "admin", 1)
    assert (p.name, p.workspace_name, p.immutable) == ("Uncategorized", "Uncategorized", True)
    with pytest.raises(errors.FailedPrecondition, match="default workspace and cannot be deleted"):
        await org.workspaces.delete(DEFAULT_ID)
    with pytest.raises(errors.FailedPrecondition, match="default workspace and cannot be changed"):
        await org.workspaces.patch(DEFAULT_ID, name="Mine")
    with pytest.raises(errors.FailedPrecondition, match="default project and cannot be archived"):
        await org.projects.set_archived(DEFAULT_ID, True)
    with pytest.raises(errors.FailedPrecondition, match="takes no new projects"):
        await org.projects.create(DEFAULT_ID, "p", user_id=ALICE)


async def test_names_are_unique_in_their_parent_and_unknown_ones_are_named(
    org: Organization,
) -> None:
    team = await org.workspaces.create("team", user_id=ALICE)
    other = await org.workspaces.create("other", user_id=BOB)
    with pytest.raises(errors.AlreadyExists, match="a workspace named 'team' exists"):
        await org.workspaces.create("team", user_id=BOB)
    await org.projects.create(team.id, "vision", user_id=ALICE)
    # The same project name in another workspace is another project.
    await org.projects.create(other.id, "vision", user_id=BOB)
    with pytest.raises(errors.AlreadyExists, match="workspace 'team' has a project named 'vision'"):
        await org.projects.create(team.id, "vision", user_id=BOB)
    with pytest.raises(errors.NotFound, match="workspace 404 not found"):
        await org.workspaces.get(404)
    with pytest.raises(errors.NotFound, match="workspace 'nope' not found"):
        await org.workspaces.by_name("nope")
    with pytest.raises(errors.NotFound, match="project 'nlp' not found in workspace 'team'"):
        await org.projects.by_name("team", "nlp")
    with pytest.raises(errors.NotFound, match="project 77 not found"):
        await org.projects.get(77)
    with pytest.raises(errors.InvalidArgument, match="workspace name: must contain"):
        await org.workspaces.create("   ", user_id=ALICE)


async def test_projects_have_keys_generated_or_given_and_unique(org: Organization) -> None:
    team = await org.workspaces.create("team", user_id=ALICE)
    made = await org.projects.create(team.id, "vision models", user_id=ALICE)
    assert made.key.startswith("VIS") and len(made.key) == 5
    given = await org.projects.create(team.id, "nlp", user_id=ALICE, key="nlp1")
    assert given.key == "NLP1"
    assert (await org.projects.by_key("nlp1")).id == given.id
    with pytest.raises(errors.AlreadyExists, match="project key 'NLP1' is in use"):
        await org.projects.create(team.id, "speech", user_id=ALICE, key="NLP1")
    with pytest.raises(errors.InvalidArgument, match="1 to 5 letters and digits"):
        await org.projects.create(team.id, "speech", user_id=ALICE, key="too-long")


async def test_a_workspace_holding_experiments_or_models_is_not_deleted(
    org: Organization,
) -> None:
    team = await org.workspaces.create("team", user_id=ALICE)
    project = await org.projects.create(team.id, "vision", user_id=ALICE)
    for _ in range(3):
        await add_experiment(org, project.id)
    with pytest.raises(errors.FailedPrecondition, match="'team' holds 3 experiments"):
        await org.workspaces.delete(team.id)
    with pytest.raises(errors.FailedPrecondition, match="'vision' holds 3 experiments"):
        await org.projects.delete(project.id)
    results = await org.moves.move_many([1, 2, 3], DEFAULT_ID)
    assert results == {1: "", 2: "", 3: ""}
    db = org.workspaces._db
    await db.execute(
        "INSERT INTO models (name, workspace_id, creation_time, last_updated_time)"
        " VALUES ('m', ?, 0, 0)",
        (team.id,),
    )
    with pytest.raises(errors.FailedPrecondition, match="'team' holds 1 model;"):
        await org.workspaces.delete(team.id)
    await db.execute("DELETE FROM models")
    await org.workspaces.delete(team.id)
    with pytest.raises(errors.NotFound):
        await org.projects.get(project.id)


async def test_an_archived_project_takes_no_new_experiments(org: Organization) -> None:
    team = await org.workspaces.create("team", user_id=ALICE)
    project = await org.projects.create(team.id, "vision", user_id=ALICE)
    placed = await org.placements.place({"workspace": "team", "project": "vision"})
    assert placed.project.id == project.id
    await org.projects.set_archived(project.id, True)
    with pytest.raises(errors.FailedPrecondition, match=r"'vision' .* archived and cannot add new"):
        await org.placements.place({"workspace": "team", "project": "vision"})
    with pytest.raises(errors.FailedPrecondition, match="archived and cannot add new"):
        await org.placements.place({}, project.id)
    await org.projects.set_archived(project.id, False)
    await org.workspaces.set_archived(team.id, True)
    with pytest.raises(errors.FailedPrecondition, match="workspace 'team' is archived"):
        await org.placements.place({}, project.id)
    with pytest.raises(errors.InvalidArgument, match="give both in the config, or neither"):
        await org.placements.place({"project": "vision"})
    assert (await org.placements.place({})).project.id == DEFAULT_ID


async def test_a_workspace_gives_its_storage_and_pool_to_its_experiments(
    org: Organization,
) -> None:
    storage = {"type": "shared_fs", "host_path": "/team/ckpts"}
    team = await org.workspaces.create(
        "team", user_id=ALICE, checkpoint_storage=storage, default_compute_pool="gpu"
    )
    project = await org.projects.create(team.id, "vision", user_id=ALICE)
    placed = await org.placements.place({}, project.id)
    assert placed.defaults == {
        "checkpoint_storage": storage,
        "resources": {"resource_pool": "gpu"},
    }
    with pytest.raises(errors.InvalidArgument, match="no resource pool named 'tpu'"):
        await org.workspaces.patch(team.id, default_compute_pool="tpu")
    with pytest.raises(errors.InvalidArgument, match=r"checkpoint_storage_config\.type"):
        await org.workspaces.patch(team.id, checkpoint_storage={"type": "floppy"})
    changed = await org.workspaces.patch(team.id, checkpoint_storage={})
    assert changed.checkpoint_storage is None


async def test_moves_say_per_experiment_why_one_stays(org: Organization) -> None:
    team = await org.workspaces.create("team", user_id=ALICE)
    a = await org.projects.create(team.id, "a", user_id=ALICE)
    b = await org.projects.create(team.id, "b", user_id=ALICE)
    moving = await add_experiment(org, a.id)
    archived = await add_experiment(org, a.id)
    db = org.workspaces._db
    await db.execute("UPDATE experiments SET archived = 1 WHERE id = ?", (archived,))
    results = await org.moves.move_many([moving, archived, 999], b.id, source=a.id)
    assert results[moving] == ""
    assert "is archived and cannot be moved" in results[archived]
    assert results[999] == "experiment 999 not found"
    assert (await org.projects.get(b.id)).num_experiments == 1
    with pytest.raises(errors.NotFound, match="experiment 12345 not found"):
        await org.moves.move(12345, b.id)
    with pytest.raises(errors.NotFound, match="project 55 not found"):
        await org.moves.move(moving, 55)


async def test_lists_filter_sort_and_page(org: Organization) -> None:
    for name, owner in (("b-team", ALICE), ("a-team", BOB), ("c-crew", ALICE)):
        await org.workspaces.create(name, user_id=owner)
    found, total = await org.workspaces.select(
        WorkspaceFilter(name="TEAM", order_by="name", descending=True)
    )
    assert [w.name for w in found] == ["b-team", "a-team"] and total == 2
    found, total = await org.workspaces.select(WorkspaceFilter(users=("alice",), limit=1))
    assert [w.name for w in found] == ["b-team"] and total == 2
    team = await org.workspaces.by_name("b-team")
    for name in ("z", "y", "x"):
        await org.projects.create(team.id, name, user_id=ALICE)
    found, total = await org.projects.select(
        ProjectFilter(workspace_id=team.id, order_by="name", offset=1)
    )
    assert [p.name for p in found] == ["y", "z"] and total == 3


async def test_project_notes_are_replaced_or_added(org: Organization) -> None:
    notes = await org.projects.add_note(DEFAULT_ID, Note("Readme", "# hello"))
    assert notes == (Note("Readme", "# hello"),)
    notes = await org.projects.set_notes(DEFAULT_ID, [Note("A", "1"), Note("B", "2")])
    assert [n.name for n in notes] == ["A", "B"]
    with pytest.raises(errors.InvalidArgument, match=r"notes\[0\].name"):
        await org.projects.set_notes(DEFAULT_ID, [Note(" ", "x")])
