"""A user's profile as the SDK's ``User`` changes it: display names, renames (with what the
user owns and their live sessions), the agent user and group, and remote sign-on."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from determined.api.gen import v1
from determined.common import errors
from pydet.master.auth import authenticator as auth
from pydet.master.auth import rules as authz
from pydet.master.auth.callers import TaskCaller
from pydet.master.store.db import Database
from pydet.master.users import profiles
from pydet.master.users.profiles import Profiles

PASSWORD = "Str0ng-enough"


class NoTasks:
    def task_caller(self, token: str) -> TaskCaller | None:
        return None


@dataclass
class World:
    db: Database
    authn: auth.Authenticator
    lookup: authz.Lookup
    users: Profiles


@pytest.fixture
async def world(tmp_path: pathlib.Path) -> AsyncIterator[World]:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    authn = auth.Authenticator(db, tasks=NoTasks(), agent_token="agent-token")
    await authn.bootstrap(tmp_path)
    lookup = authz.Lookup(db)
    try:
        yield World(db, authn, lookup, Profiles(db, authn, lookup))
    finally:
        await db.close()


async def admin_caller(w: World) -> auth.UserCaller:
    password = (pathlib.Path(w.db.path).parent / auth.ADMIN_PASSWORD_FILE).read_text().strip()
    token = (await w.authn.login("admin", password, "127.0.0.1")).token
    caller = await w.authn.authenticate(token)
    assert isinstance(caller, auth.UserCaller)
    return caller


async def test_a_user_is_read_by_id_or_name_and_a_missing_one_is_named(world: World) -> None:
    alice = await world.users.create("alice", PASSWORD, admin=False, display_name="Alice A")
    assert (await world.users.get(alice.id)).username == "alice"
    shown = profiles.message(await world.users.by_name("alice"))
    assert (shown.display_name, shown.admin, shown.active, shown.remote) == (
        "Alice A",
        False,
        True,
        False,
    )
    assert shown.agent_user_group is None
    with pytest.raises(errors.NotFound, match="user 4242 not found"):
        await world.users.get(4242)
    with pytest.raises(errors.NotFound, match="user nobody not found"):
        await world.users.by_name("nobody")


async def test_display_names_keep_determineds_rules(world: World) -> None:
    root = await admin_caller(world)
    alice = await world.users.create("alice", PASSWORD, admin=False)
    await world.users.create("bob", PASSWORD, admin=False, display_name="Bobby")
    await world.users.patch(root, alice, v1.PatchUser(display_name="  renamed display-name "))
    alice = await world.users.get(alice.id)
    assert alice.display_name == "renamed display-name"
    for taken in ("Admin", "BOB", "bobby", "Determined"):
        with pytest.raises(errors.InvalidArgument, match="display_name"):
            await world.users.patch(root, alice, v1.PatchUser(display_name=taken))
    with pytest.raises(errors.InvalidArgument, match="ASCII"):
        await world.users.patch(root, alice, v1.PatchUser(display_name="Ålice"))
    await world.users.patch(root, alice, v1.PatchUser(display_name=""))
    assert (await world.users.get(alice.id)).display_name == ""


async def test_a_rename_carries_what_the_user_owns_and_their_sessions(world: World) -> None:
    root = await admin_caller(world)
    alice = await world.users.create("alice", PASSWORD, admin=False)
    token = (await world.authn.login("alice", PASSWORD, "127.0.0.1")).token
    assert (await world.authn.authenticate(token)).username == "alice"  # type: ignore[union-attr]
    await world.db.execute(
        "INSERT INTO experiments (id, state, config, original_config, username, start_time,"
        " job_id) VALUES (1, 'COMPLETED', ?, '', 'alice', 0, 'job-1')",
        (json.dumps({}),),
    )
    assert await world.lookup.experiment_owner(1) == "alice"

    renamed = await world.users.patch(root, alice, v1.PatchUser(username="alice-2"))
    assert renamed is not None and (renamed.old, renamed.new) == ("alice", "alice-2")
    assert (await world.users.get(alice.id)).username == "alice-2"
    # Her session goes on, as the new name; her experiment is still hers.
    assert (await world.authn.authenticate(token)).username == "alice-2"  # type: ignore[union-attr]
    assert await world.lookup.experiment_owner(1) == "alice-2"

    await world.users.create("bob", PASSWORD, admin=False)
    with pytest.raises(errors.AlreadyExists, match="user bob already exists"):
        await world.users.patch(root, await world.users.get(alice.id), v1.PatchUser(username="bob"))
    with pytest.raises(errors.InvalidArgument, match="'admin'"):
        await world.users.patch(
            root, await world.users.get(alice.id), v1.PatchUser(username="admin")
        )


async def test_the_agent_user_and_group_are_given_whole_or_cleared(world: World) -> None:
    root = await admin_caller(world)
    alice = await world.users.create("alice", PASSWORD, admin=False)
    group = v1.AgentUserGroup(agent_uid=1000, agent_gid=1001, agent_user="al", agent_group="staff")
    await world.users.patch(root, alice, v1.PatchUser(agent_user_group=group))
    shown = profiles.message(await world.users.get(alice.id)).agent_user_group
    assert shown == group
    with pytest.raises(errors.InvalidArgument, match="given together"):
        partial = v1.AgentUserGroup(agent_uid=1000, agent_gid=1000)
        await world.users.patch(root, alice, v1.PatchUser(agent_user_group=partial))
    await world.users.patch(root, alice, v1.PatchUser(agent_user_group=v1.AgentUserGroup()))
    assert profiles.message(await world.users.get(alice.id)).agent_user_group is None


async def test_a_remote_user_has_no_password_sign_on(world: World) -> None:
    remote = await world.users.create("sso-user", PASSWORD, admin=False, remote=True)
    assert remote.remote
    with pytest.raises(errors.Unauthenticated):
        await world.authn.login("sso-user", PASSWORD, "127.0.0.1")
    root = await admin_caller(world)
    with pytest.raises(errors.InvalidArgument, match="remote"):
        await world.users.patch(root, remote, v1.PatchUser(username="other"))
    local = await world.users.create("local", PASSWORD, admin=False)
    await world.users.patch(root, local, v1.PatchUser(remote=True))
    with pytest.raises(errors.Unauthenticated):
        await world.authn.login("local", PASSWORD, "127.0.0.1")


async def test_active_and_admin_go_through_the_authenticator(world: World) -> None:
    root = await admin_caller(world)
    alice = await world.users.create("alice", PASSWORD, admin=False)
    await world.users.patch(root, alice, v1.PatchUser(active=False, admin=True))
    changed = await world.users.get(alice.id)
    assert (changed.active, changed.admin) == (False, True)
    assert [u.username for u in await world.users.all(active=False)] == ["alice"]
    with pytest.raises(errors.FailedPrecondition, match="deactivate yourself"):
        await world.users.patch(
            root, await world.users.by_name("admin"), v1.PatchUser(active=False)
        )
