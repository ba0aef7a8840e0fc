"""User groups and role assignments in the store, and Determined's roles themselves.

The roles' permission sets are held to what a Determined 0.38.1 master's migrations leave in
its ``roles`` and ``permission_assignments`` tables (master/static/migrations, applied to a
PostgreSQL; the numbers below are that query's answer)."""

from __future__ import annotations

import pytest

from determined.api.gen import v1
from determined.common import errors
from pydet.master.auth import permissions as perms
from pydet.master.auth import roles as role_store
from pydet.master.auth.roles import Assignment
from tests.unit.test_auth import World, admin_caller, world

__all__ = ["world"]  # the fixture, shared with test_auth

# SELECT r.id, r.role_name, string_agg(p.id) FROM roles r JOIN permission_assignments ...
DETERMINED_0_38_1 = {
    (1, "ClusterAdmin"): "all",
    (2, "WorkspaceAdmin"): "2001,2002,2003,2004,2005,2006,3001,3002,3003,4002,4003,4004,4006,"
    "4007,5001,5002,5003,5004,6002,7001,7002,7003,7004,7005,7006,7007,9001,9002,9003,9004,"
    "11003,11005,11006,11007,97001,97002",
    (3, "WorkspaceCreator"): "11006,11007,94001",
    (4, "Viewer"): "2002,2003,3002,4002,5002,7001,9001,11003,11006,11007,97002",
    (5, "Editor"): "2001,2002,2003,2004,2005,2006,3001,3002,3003,4002,5001,5002,5003,7001,7002,"
    "7003,7004,7005,9001,9002,9003,9004,11003,11006,11007,97001,97002",
    (6, "ModelRegistryViewer"): "7001,11006,11007",
    (7, "EditorRestricted"): "2001,2002,2003,2004,2005,2006,3002,4002,5001,5002,5003,7001,7002,"
    "7003,7004,7005,9001,9002,9003,9004,11003,11006,11007,97001,97002",
    (8, "GenAIUser"): "2001,2002,2003,2004,2005,2006,3001,3002,3003,4002,5001,5002,5003,5004,"
    "7001,7002,7003,7004,7005,9001,9002,9003,9004,11003,11006,11007,94001",
    (9, "EditorProjectRestricted"): "2001,2002,2003,2004,2005,2006,3001,3002,3003,4002,5002,"
    "7001,7002,7003,7004,7005,9001,9002,9003,9004,11003,11006,11007,97001,97002",
    (10, "TokenCreator"): "12002,12003,12006",
}
GLOBAL_ONLY = {
    8001, 8002, 8003, 8004, 8005, 8006, 8007, 8101, 10001, 11001, 11002, 11004,
    12001, 12002, 12003, 12004, 12005, 12006, 91001, 91002, 93001, 94001, 96001,
}  # fmt: skip


def test_the_roles_are_determineds_with_its_permission_sets() -> None:
    every = {p.value for p in perms.P if p.value}
    assert {p.value for p in perms.ALL_PERMISSIONS} == every
    assert {(r.id, r.name) for r in perms.ROLES} == set(DETERMINED_0_38_1)
    for role in perms.ROLES:
        expected = DETERMINED_0_38_1[(role.id, role.name)]
        wanted = every if expected == "all" else {int(i) for i in expected.split(",")}
        assert {p.value for p in role.permissions} == wanted, role.name
    assert {p.value for p in perms.GLOBAL_ONLY} == GLOBAL_ONLY
    shown = perms.role_message(perms.ROLE_BY_NAME["TokenCreator"])
    assert shown.scope_type_mask == v1.ScopeTypeMask(cluster=True, workspace=False)
    assert [p.name for p in shown.permissions] == [
        "update own access token",
        "create access token",
        "view own access token",
    ]


def test_what_every_user_holds_is_no_more_than_a_viewer_and_their_own_work() -> None:
    P = perms.P
    viewer = perms.ROLE_BY_NAME["Viewer"].permissions
    creates = {
        P.CREATE_EXPERIMENT,
        P.CREATE_NSC,
        P.CREATE_TEMPLATES,
        P.CREATE_WORKSPACE,
        P.CREATE_PROJECT,
        P.CREATE_MODEL_REGISTRY,
    }
    # Determined's basic authorization lets every user read the master's log and the
    # cluster's use, and create workspaces; nothing else cluster-only.
    cluster_reads = {P.VIEW_MASTER_LOGS, P.VIEW_CLUSTER_USAGE}
    assert perms.EVERY_USER <= viewer | creates | cluster_reads
    assert P.VIEW_WEBHOOKS not in perms.EVERY_USER  # admins list webhooks
    assert perms.EVERY_USER & perms.GLOBAL_ONLY == {P.CREATE_WORKSPACE, *cluster_reads}
    editor = perms.ROLE_BY_NAME["Editor"].permissions
    assert perms.OWNER <= editor | {P.VIEW_TOKEN}
    assert perms.MODEL_OWNER <= editor
    # A workspace's (or project's) creator holds over it what a WorkspaceAdmin holds there.
    workspace_admin = perms.ROLE_BY_NAME["WorkspaceAdmin"].permissions
    assert perms.PROJECT_OWNER <= perms.WORKSPACE_OWNER <= workspace_admin


async def _users(world: World) -> tuple[int, int]:
    alice = await world.authn.create_user("alice", "alice-password", admin=False)
    bob = await world.authn.create_user("bob", "bob-password", admin=False)
    return alice.id, bob.id


async def test_a_group_is_made_renamed_joined_left_and_deleted(world: World) -> None:
    alice, bob = await _users(world)
    groups = world.authn.groups
    made = await groups.create("team", [alice], by="admin")
    assert [u.username for u in made.users] == ["alice"]
    changed = await groups.update(
        made.group_id, name="crew", add_users=[bob], remove_users=[alice], by="admin"
    )
    assert changed.name == "crew" and [u.username for u in changed.users] == ["bob"]
    found = await groups.search(user_id=bob, name="", offset=0, limit=0, visible_to=None)
    assert [(g.group.name, g.num_members) for g in found if g.group] == [("crew", 1)]
    assert await groups.search(user_id=0, name="", offset=0, limit=0, visible_to=alice) == []
    await groups.delete(made.group_id, by="admin")
    with pytest.raises(errors.NotFound, match=f"group {made.group_id} not found"):
        await groups.details(made.group_id)


async def test_a_bad_group_change_changes_nothing_and_names_the_culprit(world: World) -> None:
    alice, bob = await _users(world)
    groups = world.authn.groups
    made = await groups.create("team", [alice], by="admin")
    for name in ("", " team", "x" * 129, "tab\there"):
        with pytest.raises(errors.InvalidArgument, match="group name"):
            await groups.create(name, [], by="admin")
    with pytest.raises(errors.AlreadyExists, match="group 'team' already exists"):
        await groups.create("team", [], by="admin")
    with pytest.raises(errors.NotFound, match="user 99 not found"):
        await groups.create("other", [alice, 99], by="admin")
    with pytest.raises(errors.AlreadyExists, match="user alice is already in group 'team'"):
        await groups.update(made.group_id, name="", add_users=[bob, alice], remove_users=[], by="a")
    with pytest.raises(errors.NotFound, match="user bob is not in group 'team'"):
        await groups.update(made.group_id, name="x", add_users=[], remove_users=[bob], by="a")
    # All or nothing: bob was not added, the name did not change, no "other" group exists.
    details = await groups.details(made.group_id)
    assert (details.name, [u.username for u in details.users]) == ("team", ["alice"])
    assert len(await groups.search(user_id=0, name="", offset=0, limit=0, visible_to=None)) == 1
    with pytest.raises(errors.NotFound, match="group 42 not found"):
        await groups.delete(42, by="admin")


async def test_roles_are_assigned_and_removed_once_and_count_at_once(world: World) -> None:
    alice, _ = await _users(world)
    roles = world.authn.roles
    editor = perms.ROLE_BY_NAME["Editor"]
    await roles.assign([Assignment(editor, user_id=alice)], by="admin")
    assert perms.P.UPDATE_EXPERIMENT in await world.authn.grants.held(alice)
    with pytest.raises(errors.AlreadyExists, match="user alice already holds role Editor"):
        await roles.assign([Assignment(editor, user_id=alice)], by="admin")
    (held,) = await roles.of_user(alice)
    assert held.role is not None and held.role.name == "Editor"
    assert [u.user_id for u in held.user_role_assignments] == [alice]
    await roles.remove([Assignment(editor, user_id=alice)], by="admin", by_id=1)
    assert await world.authn.grants.held(alice) == frozenset()
    with pytest.raises(errors.NotFound, match="user alice does not hold role Editor"):
        await roles.remove([Assignment(editor, user_id=alice)], by="admin", by_id=1)


async def test_cluster_admin_is_the_admin_flag(world: World) -> None:
    admin = await admin_caller(world)
    alice, _ = await _users(world)
    cluster_admin = perms.ROLE_BY_NAME["ClusterAdmin"]
    await world.authn.roles.assign([Assignment(cluster_admin, user_id=alice)], by="admin")
    assert (await world.authn.user("alice")).admin
    await world.authn.patch_user(admin, "alice", active=None, admin=False)
    assert await world.authn.roles.of_user(alice) == []
    # Through a group, too (the flag shows what the user holds).
    team = await world.authn.groups.create("admins", [alice], by="admin")
    await world.authn.roles.assign([Assignment(cluster_admin, group_id=team.group_id)], by="a")
    assert (await world.authn.user("alice")).admin
    # Nobody takes ClusterAdmin away from themselves.
    with pytest.raises(errors.FailedPrecondition, match="away from yourself"):
        await world.authn.roles.remove(
            [Assignment(cluster_admin, user_id=admin.id)], by="admin", by_id=admin.id
        )


def test_a_request_naming_no_role_an_unknown_one_or_a_cluster_role_on_a_workspace_is_refused() -> (
    None
):
    def user(assignment: v1.RoleAssignment | None) -> list[v1.UserRoleAssignment]:
        return [v1.UserRoleAssignment(user_id=2, role_assignment=assignment)]

    with pytest.raises(errors.InvalidArgument, match=r"\[0\].role_assignment.role: required"):
        role_store.assignments(user(None), [])
    with pytest.raises(errors.NotFound, match="role 42 does not exist"):
        role_store.assignments(user(v1.RoleAssignment(role=v1.Role(role_id=42))), [])
    editor_on_3 = v1.RoleAssignment(role=v1.Role(role_id=5), scope_workspace_id=3)
    (scoped,) = role_store.assignments(
        [], [v1.GroupRoleAssignment(group_id=1, role_assignment=editor_on_3)]
    )
    assert (scoped.role.name, scoped.group_id, scoped.workspace_id) == ("Editor", 1, 3)
    # Roles with a permission only the cluster has are assigned cluster-wide only.
    for role_id, permission in ((1, "VIEW_MASTER_LOGS"), (3, "CREATE_WORKSPACE"), (10, "TOKEN")):
        on_3 = v1.RoleAssignment(role=v1.Role(role_id=role_id), scope_workspace_id=3)
        with pytest.raises(errors.InvalidArgument, match="cluster-wide only") as e:
            role_store.assignments(user(on_3), [])
        assert "user_role_assignments[0].role_assignment.scope_workspace_id" in e.value.message
        assert permission in e.value.message
    with pytest.raises(errors.NotFound, match="role 'Nope' does not exist"):
        perms.role_named("Nope")


async def test_a_role_on_a_workspace_counts_there_only_and_goes_with_the_workspace(
    world: World,
) -> None:
    alice, bob = await _users(world)
    for workspace_id, name in ((2, "vision"), (3, "speech")):
        await world.db.execute(
            "INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, 0)", (workspace_id, name)
        )
    roles, grants = world.authn.roles, world.authn.grants
    editor = perms.ROLE_BY_NAME["Editor"]
    on_vision = Assignment(editor, user_id=alice, workspace_id=2)
    await roles.assign([on_vision], by="admin")
    update = perms.P.UPDATE_EXPERIMENT
    assert update not in await grants.held(alice)  # not cluster-wide
    assert update in await grants.held_in(alice, 2)
    assert update not in await grants.held_in(alice, 3)
    with pytest.raises(errors.AlreadyExists, match="alice already holds role Editor in workspace"):
        await roles.assign([on_vision], by="admin")
    # The same role cluster-wide is another assignment.
    await roles.assign([Assignment(editor, user_id=alice)], by="admin")
    assert update in await grants.held_in(alice, 3)
    await roles.remove([Assignment(editor, user_id=alice)], by="admin", by_id=1)
    (held,) = await roles.of_user(alice)
    assert [
        (u.user_id, u.role_assignment.scope_workspace_id, u.role_assignment.scope_cluster)
        for u in held.user_role_assignments
        if u.role_assignment
    ] == [(alice, 2, False)]
    summary = await roles.summary(alice)
    assert [(a.role_id, a.scope_cluster, a.scope_workspace_ids) for a in summary.assignments] == [
        (editor.id, False, [2])
    ]
    # Through a group, on another workspace.
    team = await world.authn.groups.create("speakers", [bob], by="admin")
    viewer = perms.ROLE_BY_NAME["Viewer"]
    await roles.assign([Assignment(editor, group_id=team.group_id, workspace_id=3)], by="a")
    await roles.assign([Assignment(viewer, group_id=team.group_id)], by="a")
    assert update in await grants.held_in(bob, 3) and update not in await grants.held_in(bob, 2)
    of_team = await roles.of_group(team.group_id)
    assert [(r.role_id, r.scope_cluster, r.scope_workspace_ids) for r in of_team.assignments] == [
        (viewer.id, True, []),
        (editor.id, False, [3]),
    ]
    with pytest.raises(errors.NotFound, match="workspace 9 not found"):
        await roles.assign([Assignment(editor, user_id=bob, workspace_id=9)], by="admin")
    with pytest.raises(errors.NotFound, match="does not hold role Editor in workspace speech"):
        await roles.remove([Assignment(editor, user_id=bob, workspace_id=3)], by="a", by_id=1)
    # A deleted workspace takes its assignments along.
    await world.db.execute("DELETE FROM workspaces WHERE id = 2")
    assert await roles.of_user(alice) == []


async def test_an_assignment_to_nobody_or_to_an_unknown_group_is_refused(world: World) -> None:
    editor = perms.ROLE_BY_NAME["Editor"]
    with pytest.raises(errors.NotFound, match="user 77 not found"):
        await world.authn.roles.assign([Assignment(editor, user_id=77)], by="admin")
    with pytest.raises(errors.NotFound, match="group 5 not found"):
        await world.authn.roles.assign([Assignment(editor, group_id=5)], by="admin")
