"""`det rbac`: Determined's roles and their assignments, as Determined 0.38's CLI has them
(my-permissions, list-roles, list-users-roles, list-groups-roles, describe-role,
assign-role, unassign-role).

A role is assigned cluster-wide, or with ``-w/--workspace-name`` on one workspace, where its
permissions count over the workspace and the projects, experiments and models in it; the
tables show each assignment's scope as Determined's do. Without any role a user still does
what every user may (read, and create and steer their own work); ``my-permissions`` says so.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, listing, names, render, rpc, workspace

PERMISSION_KEYS = ("id", "name", "scopeTypeMask")
ASSIGNMENT_KEYS = (
    "roleName",
    "roleID",
    "assignedDirectlyToUser",
    "assignedToGroupName",
    "assignedToGroupID",
    "scopeCluster",
    "scopeWorkspaceName",
    "scopeWorkspaceID",
)
WORKSPACE_KEYS = ("assignedGlobally", "workspaceID", "workspaceName")
GROUP_KEYS = ("groupID", "groupName", "workspaceID", "workspaceName", "assignedGlobally")
USER_KEYS = ("userID", "username", "workspaceID", "workspaceName", "assignedGlobally")

EVERY_USER = (
    "without a role, every user may view experiments, TensorBoards, templates, workspaces,"
    " projects and models, create their own, and steer, change and delete what they own"
)


def add_parser(nouns: Subparsers) -> None:
    rbac = nouns.add_parser("rbac", help="manage role-based access control")
    verbs = rbac.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    p = verbs.add_parser("my-permissions", help="list the permissions you hold")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=my_permissions)

    p = verbs.add_parser("list-roles", help="list roles and their permissions")
    p.add_argument(
        "--exclude-global-roles",
        action="store_true",
        help="only roles that can be assigned on a workspace",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    listing.add_pagination(p)
    p.set_defaults(func=list_roles)

    p = verbs.add_parser("list-users-roles", help="list a user's roles")
    p.add_argument("username", help="the user")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_users_roles)

    p = verbs.add_parser("list-groups-roles", help="list a group's roles")
    p.add_argument("group_name", help="the user group")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_groups_roles)

    p = verbs.add_parser("describe-role", help="describe a role and who holds it")
    p.add_argument("role_name", help="the role (det rbac list-roles)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe_role)

    for verb, assign in (("assign-role", True), ("unassign-role", False)):
        p = verbs.add_parser(
            verb, help="assign a role to a user or group" if assign else "unassign a role"
        )
        p.add_argument("role_name", help="the role (det rbac list-roles)")
        p.add_argument(
            "-w",
            "--workspace-name",
            default=None,
            help="the workspace it applies in (default: cluster-wide)",
        )
        p.add_argument("-u", "--username-to-assign", default=None, help="the user")
        p.add_argument("-g", "--group-name-to-assign", default=None, help="the user group")
        p.set_defaults(func=change_assignment, assign=assign)


async def _workspace_names(s: client.Session, workspace_ids: Sequence[int]) -> dict[int, str]:
    """Workspace names by id."""
    found: dict[int, str] = {}
    for workspace_id in dict.fromkeys(workspace_ids):
        got = await s.call(s.stub.get_workspace(v1.GetWorkspaceRequest(id=workspace_id)))
        if got.workspace is not None:
            found[workspace_id] = got.workspace.name
    return found


def _scope(assignment: v1.RoleAssignment | None, workspaces: dict[int, str]) -> dict[str, Any]:
    """Where an assignment applies, as Determined's tables show it."""
    workspace_id = assignment.scope_workspace_id if assignment is not None else None
    return {
        "scopeCluster": workspace_id is None,
        "scopeWorkspaceName": None if workspace_id is None else workspaces.get(workspace_id),
        "scopeWorkspaceID": workspace_id,
    }


def _scoped_workspaces(role: v1.RoleWithAssignments) -> list[int]:
    """The workspaces a role is assigned on (to its users and groups)."""
    given = [u.role_assignment for u in role.user_role_assignments]
    given += [g.role_assignment for g in role.group_role_assignments]
    return [a.scope_workspace_id for a in given if a is not None and a.scope_workspace_id]


def _assigned_where(
    assignment: v1.RoleAssignment | None, workspaces: dict[int, str]
) -> dict[str, Any]:
    scope = _scope(assignment, workspaces)
    return {
        "workspaceID": scope["scopeWorkspaceID"],
        "workspaceName": scope["scopeWorkspaceName"],
        "assignedGlobally": scope["scopeCluster"],
    }


async def _group_names(s: client.Session, group_ids: Sequence[int]) -> dict[int, str]:
    """Group names by id; a group the caller may not see stays unnamed."""
    found: dict[int, str] = {}
    for group_id in dict.fromkeys(group_ids):
        try:
            got = await s.call(s.stub.get_group(v1.GetGroupRequest(group_id=group_id)))
        except errors.PermissionDenied:
            continue
        if got.group is not None:
            found[group_id] = got.group.name
    return found


def _permission_rows(permissions: Sequence[v1.Permission]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"PERMISSION_TYPE_{render.state_name(p.id)}",
            "name": p.name,
            "scopeTypeMask": {
                "cluster": p.scope_type_mask.cluster if p.scope_type_mask else True,
                "workspace": p.scope_type_mask.workspace if p.scope_type_mask else False,
            },
        }
        for p in permissions
    ]


def _print_role(role: v1.Role, heading: str) -> None:
    print(f"role '{role.name}' with ID {role.role_id} {heading}")
    if not role.permissions:
        print("role has no permissions assigned")
        return
    print(render.objects(PERMISSION_KEYS, _permission_rows(role.permissions)))
    print()


def my_permissions(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> tuple[v1.GetPermissionsSummaryResponse, dict[int, str]]:
        summary = await s.call(s.stub.get_permissions_summary(v1.GetPermissionsSummaryRequest()))
        ids = [w for a in summary.assignments for w in a.scope_workspace_ids]
        return summary, await _workspace_names(s, ids)

    summary, workspaces = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.message_dict(summary)))
        return 0
    of_role = {r.role_id: r.permissions for r in summary.roles}
    # scope (0: cluster-wide, else a workspace id) -> permission number -> permission
    held: dict[int, dict[int, v1.Permission]] = {}
    for a in summary.assignments:
        scopes = ([0] if a.scope_cluster else []) + list(a.scope_workspace_ids)
        for scope in scopes:
            for p in of_role.get(a.role_id, []):
                held.setdefault(scope, {})[int(p.id)] = p
    if not held:
        print("no permissions assigned")
        print(f"({EVERY_USER})")
        return 0
    for scope in sorted(held):
        if scope == 0:
            print("global permissions assigned")
        else:
            name = workspaces.get(scope, "")
            print(f"permissions assigned over workspace '{name}' with ID '{scope}'")
        rows = _permission_rows([held[scope][k] for k in sorted(held[scope])])
        print(render.objects(PERMISSION_KEYS, rows))
        print()
    return 0


def list_roles(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.SearchRolesAssignableToScopeResponse:
        req = v1.SearchRolesAssignableToScopeRequest(
            offset=args.offset,
            limit=args.limit if args.pages == "1" else 0,
            workspace_id=1 if args.exclude_global_roles else None,
        )
        return await s.call(s.stub.search_roles_assignable_to_scope(req))

    found = rpc.run(args.master, body).roles
    if args.json:
        print(render.to_json({"roles": [render.message_dict(r) for r in found]}))
        return 0
    if not found:
        print("no roles found")
    for role in found:
        _print_role(role, "with permissions")
    return 0


def list_users_roles(args: argparse.Namespace) -> int:
    async def body(
        s: client.Session,
    ) -> tuple[v1.GetRolesAssignedToUserResponse, dict[int, str], dict[int, str]]:
        (user_id,) = await names.user_ids(s, [args.username])
        found = await s.call(
            s.stub.get_roles_assigned_to_user(v1.GetRolesAssignedToUserRequest(user_id=user_id))
        )
        ids = [g.group_id for r in found.roles for g in r.group_role_assignments]
        where = [w for r in found.roles for w in _scoped_workspaces(r)]
        return found, await _group_names(s, ids), await _workspace_names(s, where)

    found, groups, workspaces = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.message_dict(found)))
        return 0
    if not found.roles:
        print("user has no role assignments")
        return 0
    rows: list[dict[str, Any]] = []
    for r in found.roles:
        role = rpc.present(r.role, "role")
        base = {
            "roleName": role.name,
            "roleID": role.role_id,
            "assignedDirectlyToUser": False,
            "assignedToGroupName": None,
            "assignedToGroupID": None,
        }
        rows += [
            {**base, "assignedDirectlyToUser": True, **_scope(u.role_assignment, workspaces)}
            for u in r.user_role_assignments
        ]
        rows += [
            {
                **base,
                "assignedToGroupID": g.group_id,
                "assignedToGroupName": groups.get(g.group_id),
                **_scope(g.role_assignment, workspaces),
            }
            for g in r.group_role_assignments
        ]
    print(render.objects(ASSIGNMENT_KEYS, rows))
    return 0


def list_groups_roles(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> tuple[v1.GetRolesAssignedToGroupResponse, dict[int, str]]:
        group_id = await names.group_id(s, args.group_name)
        req = v1.GetRolesAssignedToGroupRequest(group_id=group_id)
        found = await s.call(s.stub.get_roles_assigned_to_group(req))
        ids = [w for a in found.assignments for w in a.scope_workspace_ids]
        return found, await _workspace_names(s, ids)

    found, workspaces = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.message_dict(found)))
        return 0
    if not found.roles:
        print("group has no role assignments")
        return 0
    for role, where in zip(found.roles, found.assignments, strict=False):
        print(f"role '{role.name}' with ID {role.role_id} assigned")
        rows: list[dict[str, Any]] = []
        if where.scope_cluster:
            rows.append({"assignedGlobally": True, "workspaceID": None, "workspaceName": None})
        rows += [
            {"assignedGlobally": False, "workspaceID": w, "workspaceName": workspaces.get(w)}
            for w in where.scope_workspace_ids
        ]
        print(render.objects(WORKSPACE_KEYS, rows))
        print()
    return 0


def describe_role(args: argparse.Namespace) -> int:
    async def body(
        s: client.Session,
    ) -> tuple[v1.RoleWithAssignments, dict[int, str], dict[int, str], dict[int, str]]:
        role = await names.role(s, args.role_name)
        found = await s.call(
            s.stub.get_roles_by_id(v1.GetRolesByIdRequest(role_ids=[role.role_id]))
        )
        if len(found.roles) != 1:
            raise errors.NotFound(f"role {args.role_name!r} does not exist")
        held = found.roles[0]
        ids = [g.group_id for g in held.group_role_assignments]
        where = _scoped_workspaces(held)
        return (
            held,
            await _group_names(s, ids),
            await names.usernames(s),
            await _workspace_names(s, where),
        )

    found, groups, users, workspaces = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.message_dict(found)))
        return 0
    _print_role(rpc.present(found.role, "role"), "with permissions")
    _print_holders(
        ("any group", "groups"),
        GROUP_KEYS,
        [
            {
                "groupID": g.group_id,
                "groupName": groups.get(g.group_id),
                **_assigned_where(g.role_assignment, workspaces),
            }
            for g in found.group_role_assignments
        ],
    )
    _print_holders(
        ("any users", "users"),
        USER_KEYS,
        [
            {
                "userID": u.user_id,
                "username": users.get(u.user_id),
                **_assigned_where(u.role_assignment, workspaces),
            }
            for u in found.user_role_assignments
        ],
    )
    return 0


def _print_holders(whom: tuple[str, str], keys: Sequence[str], rows: list[dict[str, Any]]) -> None:
    """Determined's "role is (not) assigned to ..." lines, and the holders' table."""
    if not rows:
        print(f"role is not assigned to {whom[0]}")
        return
    print(f"role is assigned to {whom[1]}")
    print(render.objects(keys, rows))
    print()


def change_assignment(args: argparse.Namespace) -> int:
    if (args.username_to_assign is None) == (args.group_name_to_assign is None):
        raise errors.InvalidArgument(
            "must provide exactly one of --username-to-assign or --group-name-to-assign"
        )

    async def body(s: client.Session) -> tuple[v1.Role, int]:
        role = await names.role(s, args.role_name)
        assignment = v1.RoleAssignment(role=v1.Role(role_id=role.role_id), scope_cluster=True)
        if args.workspace_name is not None:
            where = await workspace.by_name(s, args.workspace_name)
            assignment = v1.RoleAssignment(
                role=v1.Role(role_id=role.role_id), scope_workspace_id=where.id
            )
        if args.username_to_assign is not None:
            (holder,) = await names.user_ids(s, [args.username_to_assign])
            users = [v1.UserRoleAssignment(user_id=holder, role_assignment=assignment)]
            groups: list[v1.GroupRoleAssignment] = []
        else:
            holder = await names.group_id(s, args.group_name_to_assign)
            users = []
            groups = [v1.GroupRoleAssignment(group_id=holder, role_assignment=assignment)]
        if args.assign:
            req = v1.AssignRolesRequest(user_role_assignments=users, group_role_assignments=groups)
            await s.call(s.stub.assign_roles(req))
        else:
            removal = v1.RemoveAssignmentsRequest(
                user_role_assignments=users, group_role_assignments=groups
            )
            await s.call(s.stub.remove_assignments(removal))
        return role, holder

    role, holder = rpc.run(args.master, body)
    who = (
        f"user '{args.username_to_assign}'"
        if args.username_to_assign is not None
        else f"group '{args.group_name_to_assign}'"
    )
    done = "assigned" if args.assign else "removed"
    to = "to" if args.assign else "from"
    scope = "globally" if args.workspace_name is None else f"to workspace {args.workspace_name}"
    print(f"{done} role '{role.name}' with ID {role.role_id} {to} {who} with ID {holder} {scope}")
    return 0
