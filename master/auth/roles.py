"""Role assignments (``det rbac``): which users and groups hold which of Determined's roles.

An assignment names a role and a user or a group, and a scope: cluster-wide
(``scope_workspace_id`` is NULL) or one workspace, where the role's permissions count over
the workspace and the projects, experiments and models in it (``grants``). A role that holds
a permission only the cluster has (ClusterAdmin, WorkspaceCreator, GenAIUser, TokenCreator)
is assigned cluster-wide only, as in Determined. Assigning ClusterAdmin to a user
cluster-wide is making them an admin: the user's ``admin`` column follows their own
ClusterAdmin assignment, so that ``det user edit --admin`` and ``det rbac assign-role
ClusterAdmin`` are one thing. A batch is one transaction, all or nothing; a workspace's
assignments go with it when it is deleted.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from determined.api.gen import v1
from determined.common import errors
from pydet.master.auth import permissions as perms
from pydet.master.auth.grants import Grants
from pydet.master.store.db import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Assignment:
    """One role held by one user or one group, cluster-wide (``workspace_id`` None) or on
    one workspace."""

    role: perms.Role
    user_id: int = 0
    group_id: int = 0
    workspace_id: int | None = None

    @property
    def holder(self) -> tuple[str, int]:
        return ("user", self.user_id) if self.user_id else ("group", self.group_id)


def _role_of(assignment: v1.RoleAssignment | None, where: str) -> tuple[perms.Role, int | None]:
    if assignment is None or assignment.role is None:
        raise errors.InvalidArgument(f"{where}.role_assignment.role: required")
    role_id = assignment.role.role_id
    if role_id not in perms.ROLE_BY_ID:
        raise errors.NotFound(
            f"{where}.role_assignment.role.role_id: role {role_id} does not exist (role ids 1"
            f" to {len(perms.ROLES)}, det rbac list-roles)"
        )
    role = perms.ROLE_BY_ID[role_id]
    workspace_id = assignment.scope_workspace_id
    if workspace_id is not None and role.global_only:
        cluster_only = min(role.permissions & perms.GLOBAL_ONLY, key=lambda p: p.value)
        raise errors.InvalidArgument(
            f"{where}.role_assignment.scope_workspace_id: role {role.name} is assigned"
            f" cluster-wide only (it holds {perms.label(cluster_only)})"
        )
    return role, workspace_id


def assignments(
    users: Sequence[v1.UserRoleAssignment], groups: Sequence[v1.GroupRoleAssignment]
) -> list[Assignment]:
    """The assignments a request names, checked (an unknown role, or a workspace scope for
    a role assigned cluster-wide only, is refused naming the field)."""
    found = []
    for i, u in enumerate(users):
        role, workspace_id = _role_of(u.role_assignment, f"user_role_assignments[{i}]")
        found.append(Assignment(role, user_id=u.user_id, workspace_id=workspace_id))
    for i, g in enumerate(groups):
        role, workspace_id = _role_of(g.role_assignment, f"group_role_assignments[{i}]")
        found.append(Assignment(role, group_id=g.group_id, workspace_id=workspace_id))
    return found


def _role_assignment(role: perms.Role, workspace_id: int | None) -> v1.RoleAssignment:
    return v1.RoleAssignment(
        role=perms.role_message(role),
        scope_workspace_id=workspace_id,
        scope_cluster=workspace_id is None,
    )


def _scope_sql(workspace_id: int | None) -> tuple[str, tuple[int, ...]]:
    """The condition (and its parameters) that an assignment row has this scope."""
    if workspace_id is None:
        return "scope_workspace_id IS NULL", ()
    return "scope_workspace_id = ?", (workspace_id,)


def _summaries(rows: Sequence[Any]) -> tuple[list[int], list[v1.RoleAssignmentSummary]]:
    """Each role of ``rows`` once, with where it is held: cluster-wide and on which
    workspaces (Determined's RoleAssignmentSummary)."""
    where: dict[int, list[int | None]] = {}
    for row in rows:
        scope = row["scope_workspace_id"]
        where.setdefault(int(row["role_id"]), []).append(None if scope is None else int(scope))
    role_ids = sorted(where)
    return role_ids, [
        v1.RoleAssignmentSummary(
            role_id=role_id,
            scope_cluster=None in where[role_id],
            scope_workspace_ids=sorted({w for w in where[role_id] if w is not None}),
        )
        for role_id in role_ids
    ]


class Roles:
    def __init__(self, db: Database, grants: Grants) -> None:
        self._db = db
        self._grants = grants

    async def _names(self, wanted: list[Assignment]) -> dict[tuple[str, int], str]:
        """Each holder's and workspace's name; ``NotFound`` for one that does not exist."""
        names: dict[tuple[str, int], str] = {}
        for a in wanted:
            places = [a.holder]
            if a.workspace_id is not None:
                places.append(("workspace", a.workspace_id))
            for kind, key in places:
                if (kind, key) in names:
                    continue
                table, column = {
                    "user": ("users", "username"),
                    "group": ("user_groups", "name"),
                    "workspace": ("workspaces", "name"),
                }[kind]
                row = await self._db.fetch_one(f"SELECT {column} FROM {table} WHERE id = ?", (key,))
                if row is None:
                    raise errors.NotFound(f"{kind} {key} not found")
                names[(kind, key)] = str(row[column])
        return names

    @staticmethod
    def _where(a: Assignment, names: dict[tuple[str, int], str]) -> str:
        if a.workspace_id is None:
            return "cluster-wide"
        return f"in workspace {names[('workspace', a.workspace_id)]}"

    async def _held(self, a: Assignment) -> bool:
        kind, key = a.holder
        scope, params = _scope_sql(a.workspace_id)
        row = await self._db.fetch_one(
            f"SELECT id FROM role_assignments WHERE role_id = ? AND {kind}_id = ? AND {scope}",
            (a.role.id, key, *params),
        )
        return row is not None

    async def assign(self, wanted: list[Assignment], *, by: str) -> None:
        names = await self._names(wanted)
        statements: list[tuple[str, Sequence[Any]]] = []
        for a in dict.fromkeys(wanted):
            kind, key = a.holder
            if await self._held(a):
                raise errors.AlreadyExists(
                    f"{kind} {names[a.holder]} already holds role {a.role.name}"
                    f" {self._where(a, names)}"
                )
            statements.append(
                (
                    f"INSERT INTO role_assignments (role_id, {kind}_id, scope_workspace_id)"
                    " VALUES (?, ?, ?)",
                    (a.role.id, key, a.workspace_id),
                )
            )
            if kind == "user" and a.role.id == perms.CLUSTER_ADMIN:
                statements.append(("UPDATE users SET admin = 1 WHERE id = ?", (key,)))
        await self._commit(statements)
        for a in wanted:
            log.info(
                "%s assigned role %s to %s %s %s",
                by,
                a.role.name,
                a.holder[0],
                names[a.holder],
                self._where(a, names),
            )

    async def remove(self, wanted: list[Assignment], *, by: str, by_id: int) -> None:
        names = await self._names(wanted)
        statements: list[tuple[str, Sequence[Any]]] = []
        for a in dict.fromkeys(wanted):
            kind, key = a.holder
            if not await self._held(a):
                raise errors.NotFound(
                    f"{kind} {names[a.holder]} does not hold role {a.role.name}"
                    f" {self._where(a, names)}"
                )
            if kind == "user" and a.role.id == perms.CLUSTER_ADMIN:
                if key == by_id:
                    raise errors.FailedPrecondition(
                        "you cannot take ClusterAdmin away from yourself; another admin can"
                    )
                statements.append(("UPDATE users SET admin = 0 WHERE id = ?", (key,)))
            scope, params = _scope_sql(a.workspace_id)
            statements.append(
                (
                    f"DELETE FROM role_assignments WHERE role_id = ? AND {kind}_id = ? AND {scope}",
                    (a.role.id, key, *params),
                )
            )
        await self._commit(statements)
        for a in wanted:
            log.info(
                "%s removed role %s from %s %s %s",
                by,
                a.role.name,
                a.holder[0],
                names[a.holder],
                self._where(a, names),
            )

    async def _commit(self, statements: list[tuple[str, Sequence[Any]]]) -> None:
        if statements:
            await self._db.transaction(statements)
            self._grants.changed()

    # -- reads ------------------------------------------------------------------------------

    async def _rows(self, where: str, params: Sequence[Any]) -> list[Any]:
        return await self._db.fetch_all(
            "SELECT role_id, user_id, group_id, scope_workspace_id FROM role_assignments"
            f" WHERE {where} ORDER BY role_id, id",
            params,
        )

    async def with_assignments(self, role_ids: Sequence[int]) -> list[v1.RoleWithAssignments]:
        """Each role with every user and group it is assigned to (GetRolesByID)."""
        roles = [perms.role_of_id(int(r)) for r in dict.fromkeys(role_ids)]
        if not roles:
            return []
        rows = await self._rows(
            f"role_id IN ({', '.join('?' for _ in roles)})", [r.id for r in roles]
        )
        return self._grouped(roles, rows)

    def _grouped(self, roles: list[perms.Role], rows: list[Any]) -> list[v1.RoleWithAssignments]:
        by_role: dict[int, list[Any]] = defaultdict(list)
        for row in rows:
            by_role[int(row["role_id"])].append(row)
        out = []
        for role in roles:
            rows_of_role = by_role[role.id]

            def assignment(row: Any, role: perms.Role = role) -> v1.RoleAssignment:
                scope = row["scope_workspace_id"]
                return _role_assignment(role, None if scope is None else int(scope))

            out.append(
                v1.RoleWithAssignments(
                    role=perms.role_message(role),
                    user_role_assignments=[
                        v1.UserRoleAssignment(
                            user_id=int(r["user_id"]), role_assignment=assignment(r)
                        )
                        for r in rows_of_role
                        if r["user_id"] is not None
                    ],
                    group_role_assignments=[
                        v1.GroupRoleAssignment(
                            group_id=int(r["group_id"]), role_assignment=assignment(r)
                        )
                        for r in rows_of_role
                        if r["group_id"] is not None
                    ],
                )
            )
        return out

    async def of_user(self, user_id: int) -> list[v1.RoleWithAssignments]:
        """The roles a user holds, each with the assignments that give it to them: their own
        and their groups' (GetRolesAssignedToUser)."""
        await self._names([Assignment(perms.ROLES[0], user_id=user_id)])
        rows = await self._rows(
            "user_id = ? OR group_id IN (SELECT group_id FROM user_group_members"
            " WHERE user_id = ?)",
            (user_id, user_id),
        )
        roles = [perms.ROLE_BY_ID[i] for i in dict.fromkeys(int(r["role_id"]) for r in rows)]
        return self._grouped(roles, rows)

    async def on_workspace(self, workspace_id: int) -> list[v1.RoleWithAssignments]:
        """The roles assigned on the workspace, each with the users and groups it is
        assigned to there (GetGroupsAndUsersAssignedToWorkspace)."""
        rows = await self._rows("scope_workspace_id = ?", (workspace_id,))
        roles = [perms.ROLE_BY_ID[i] for i in dict.fromkeys(int(r["role_id"]) for r in rows)]
        return self._grouped(roles, rows)

    async def of_group(self, group_id: int) -> v1.GetRolesAssignedToGroupResponse:
        await self._names([Assignment(perms.ROLES[0], group_id=group_id)])
        role_ids, summaries = _summaries(await self._rows("group_id = ?", (group_id,)))
        return v1.GetRolesAssignedToGroupResponse(
            roles=[perms.role_message(perms.ROLE_BY_ID[r]) for r in role_ids],
            assignments=summaries,
        )

    async def summary(self, user_id: int) -> v1.GetPermissionsSummaryResponse:
        """The caller's roles and where they hold them, cluster-wide or on workspaces,
        directly or through their groups (GetPermissionsSummary)."""
        rows = await self._rows(
            "user_id = ? OR group_id IN (SELECT group_id FROM user_group_members"
            " WHERE user_id = ?)",
            (user_id, user_id),
        )
        role_ids, summaries = _summaries(rows)
        return v1.GetPermissionsSummaryResponse(
            roles=[perms.role_message(perms.ROLE_BY_ID[r]) for r in role_ids],
            assignments=summaries,
        )
