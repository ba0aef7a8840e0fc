"""Resource pools bound to workspaces in a real store: which pools each workspace may use,
the refusals each bad binding gets (unknown pool, the default pool, a binding twice or one
that does not exist), workspaces' default pools, and deleting a bound workspace."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from determined.common import errors
from pydet.master.store.db import Database
from pydet.master.workspaces.organization import Organization
from pydet.master.workspaces.workspaces import DEFAULT_ID, Workspace

ALICE = 2


@pytest.fixture
async def org(tmp_path: pathlib.Path) -> AsyncIterator[Organization]:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    await db.execute(
        "INSERT INTO users (id, username, password_hash, modified_at) VALUES (?, 'alice', '', 0)",
        (ALICE,),
    )
    try:
        yield Organization(db, pools=("default", "gpu", "tpu"), default_pool="default")
    finally:
        await db.close()


async def two_workspaces(org: Organization) -> tuple[Workspace, Workspace]:
    a = await org.workspaces.create("team-a", user_id=ALICE)
    b = await org.workspaces.create("team-b", user_id=ALICE)
    return a, b


async def test_a_bound_pool_is_available_only_to_its_workspaces(org: Organization) -> None:
    a, b = await two_workspaces(org)
    assert await org.bindings.available_to(a.id) == ["default", "gpu", "tpu"]
    await org.bindings.bind("gpu", [a])
    assert await org.bindings.workspaces_of("gpu") == [a.id]
    assert await org.bindings.workspaces_of("tpu") == []
    assert await org.bindings.available_to(a.id) == ["default", "gpu", "tpu"]
    assert await org.bindings.available_to(b.id) == ["default", "tpu"]
    assert await org.bindings.available_to(DEFAULT_ID) == ["default", "tpu"]
    await org.bindings.check("gpu", a.id, a.name, field="resources.resource_pool")
    await org.bindings.check("tpu", b.id, b.name, field="resources.resource_pool")
    with pytest.raises(errors.FailedPrecondition) as refused:
        await org.bindings.check("gpu", b.id, b.name, field="resources.resource_pool")
    assert str(refused.value).startswith(
        "resources.resource_pool: resource pool 'gpu' is bound to other workspaces and is not "
        "available to workspace 'team-b'"
    )


async def test_bind_adds_unbind_removes_and_overwrite_replaces(org: Organization) -> None:
    a, b = await two_workspaces(org)
    await org.bindings.bind("gpu", [a])
    await org.bindings.bind("gpu", [b])
    assert await org.bindings.workspaces_of("gpu") == [a.id, b.id]
    await org.bindings.unbind("gpu", [a])
    assert await org.bindings.workspaces_of("gpu") == [b.id]
    await org.bindings.overwrite("gpu", [a])
    assert await org.bindings.workspaces_of("gpu") == [a.id]
    await org.bindings.overwrite("gpu", [])
    assert await org.bindings.workspaces_of("gpu") == []
    assert await org.bindings.available_to(b.id) == ["default", "gpu", "tpu"]


async def test_bad_bindings_are_refused_naming_the_pool_and_workspace(org: Organization) -> None:
    a, b = await two_workspaces(org)
    with pytest.raises(errors.NotFound, match="no resource pool named 'fast'; the pools are"):
        await org.bindings.bind("fast", [a])
    with pytest.raises(errors.FailedPrecondition, match="'default' is the default pool"):
        await org.bindings.bind("default", [a])
    with pytest.raises(errors.FailedPrecondition, match="'default' is the default pool"):
        await org.bindings.overwrite("default", [a])
    await org.bindings.bind("gpu", [a])
    with pytest.raises(errors.AlreadyExists, match="'gpu' is already bound to workspace 'team-a'"):
        await org.bindings.bind("gpu", [b, a])
    # All or nothing: team-b was not bound either.
    assert await org.bindings.workspaces_of("gpu") == [a.id]
    with pytest.raises(errors.NotFound, match="'gpu' is not bound to workspace 'team-b'"):
        await org.bindings.unbind("gpu", [a, b])
    assert await org.bindings.workspaces_of("gpu") == [a.id]


async def test_a_workspaces_default_pool_must_be_available_to_it(org: Organization) -> None:
    a, b = await two_workspaces(org)
    await org.bindings.bind("gpu", [a])
    await org.workspaces.patch(a.id, default_compute_pool="gpu")
    with pytest.raises(errors.FailedPrecondition, match="default_aux_pool: resource pool 'gpu'"):
        await org.workspaces.patch(b.id, default_aux_pool="gpu")
    with pytest.raises(errors.FailedPrecondition, match="not available to this one"):
        await org.workspaces.create("team-c", user_id=ALICE, default_compute_pool="gpu")
    assert (await org.workspaces.get(a.id)).default_compute_pool == "gpu"


async def test_deleting_a_workspace_deletes_its_bindings(org: Organization) -> None:
    a, b = await two_workspaces(org)
    await org.bindings.bind("gpu", [a, b])
    await org.workspaces.delete(a.id)
    assert await org.bindings.workspaces_of("gpu") == [b.id]
    await org.workspaces.delete(b.id)
    assert await org.bindings.workspaces_of("gpu") == []
    assert await org.bindings.available_to(DEFAULT_ID) == ["default", "gpu", "tpu"]
