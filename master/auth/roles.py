"""Role assignments (``det rbac``): which users and groups hold which of Determined's roles.

An assignment names a role and a user or a group, and a scope: cluster-wide (the only one
until workspaces exist; ``scope_workspace_id`` is NULL) or one workspace. Assigning
ClusterAdmin to a user cluster-wide is making them an admin: the user's ``admin`` column
follows their own ClusterAdmin assignment, so that ``det user edit --admin`` and ``det rbac
assign-role ClusterAdmin`` are one thing. A batch is one transaction, all or nothing.
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

NO_WORKSPACES = (
    "scope_workspace_id: pydet has no workspaces yet; assign roles cluster-wide (without"
    " --workspace-name)"
)


@dataclass(frozen=True)
class Assignment:
    """One role held by one user or one group, cluster-wide."""

    role: perms.Role
    user_id: int = 0
    group_id: int = 0

    @property
    def holder(self) -> tuple[str, int]:
        return ("user", self.user_id) if self.user_id else ("group", self.group_id)


def _role_of(assignment: v1.RoleAssignment | None, where: str) -> perms.Role:
    if assignment is None or assignment.role is None:
        raise errors.InvalidArgument(f"{where}.role_assignment.role: required")
    if assignment.scope_workspace_id is not None:
        raise errors.InvalidArgument(f"{where}.role_assignment.{NO_WORKSPACES}")
    role_id = assignment.role.role_id
    if role_id not in perms.ROLE_BY_ID:
        raise errors.NotFound(
            f"{where}.role_assignment.role.role_id: role {role_id} does not exist (role ids 1"
            f" to {len(perms.ROLES)}, det rbac list-roles)"
        )
    return perms.ROLE_BY_ID[role_id]


def assignments(
    users: Sequence[v1.UserRoleAssignment], groups: Sequence[v1.GroupRoleAssignment]
) -> list[Assignment]:
    """The assignments a request names, checked (an unknown role or a workspace scope is
    refused naming the field)."""
    found = [
        Assignment(_role_of(u.role_assignment, f"user_role_assignments[{i}]"), user_id=u.user_id)
        for i, u in enumerate(users)
    ]
    found += [
        Assignment(_role_of(g.role_assignment, f"group_role_assignments[{i}]"), group_id=g.group_id)
        for i, g in enumerate(groups)
    ]
    return found


def _role_assignment(role: perms.Role) -> v1.RoleAssignment:
    return v1.RoleAssignment(role=perms.role_message(role), scope_cluster=True)


class Roles:
    def __init__(self, db: Database, grants: Grants) -> None:
        self._db = db
        self._grants = grants

    async def _names(self, wanted: list[Assignment]) -> dict[tuple[str, int], str]:
        """Each holder's name; ``NotFound`` for one that does not exist."""
        names: dict[tuple[str, int], str] = {}
        for a in wanted:
            kind, key = a.holder
            if (kind, key) in names:
                continue
            table, column = ("users", "username") if kind == "user" else ("user_groups", "name")
            row = await self._db.fetch_one(f"SELECT {column} FROM {table} WHERE id = ?", (key,))
            if row is None:
                raise errors.NotFound(f"{kind} {key} not found")
            names[(kind, key)] = str(row[column])
        return names

    async def _held(self, a: Assignment) -> bool:
        kind, key = a.holder
        row = await self._db.fetch_one(
            f"SELECT id FROM role_assignments WHERE role_id = ? AND {kind}_id = ?"
            " AND scope_workspace_id IS NULL",
            (a.role.id, key),
        )
        return row is not None

    async def assign(self, wanted: list[Assignment], *, by: str) -> None:
        names = await self._names(wanted)
        statements: list[tuple[str, Sequence[Any]]] = []
        for a in dict.fromkeys(wanted):
            kind, key = a.holder
            if await self._held(a):
                raise errors.AlreadyExists(
                    f"{kind} {names[a.holder]} already holds role {a.role.name} cluster-wide"
                )
            statements.append(
                (
                    f"INSERT INTO role_assignments (role_id, {kind}_id) VALUES (?, ?)",
                    (a.role.id, key),
                )
            )
            if kind == "user" and a.role.id == perms.CLUSTER_ADMIN:
                statements.append(("UPDATE users SET admin = 1 WHERE id = ?", (key,)))
        await self._commit(statements)
        for a in wanted:
            log.info("%s assigned role %s to %s %s", by, a.role.name, a.holder[0], names[a.holder])

    async def remove(self, wanted: list[Assignment], *, by: str, by_id: int) -> None:
        names = await self._names(wanted)
        statements: list[tuple[str, Sequence[Any]]] = []
        for a in dict.fromkeys(wanted):
            kind, key = a.holder
            if not await self._held(a):
                raise errors.NotFound(
                    f"{kind} {names[a.holder]} does not hold role {a.role.name} cluster-wide"
                )
            if kind == "user" and a.role.id == perms.CLUSTER_ADMIN:
                if key == by_id:
                    raise errors.FailedPrecondition(
                        "you cannot take ClusterAdmin away from yourself; another admin can"
                    )
                statements.append(("UPDATE users SET admin = 0 WHERE id = ?", (key,)))
            statements.append(
                (
                    f"DELETE FROM role_assignments WHERE role_id = ? AND {kind}_id = ?"
                    " AND scope_workspace_id IS NULL",
                    (a.role.id, key),
                )
            )
        await self._commit(statements)
        for a in wanted:
            log.info("%s removed role %s from %s %s", by, a.role.name, a.holder[0], names[a.holder])

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
            assignment = _role_assignment(role)
            out.append(
                v1.RoleWithAssignments(
                    role=perms.role_message(role),
                    user_role_assignments=[
                        v1.UserRoleAssignment(user_id=int(r["user_id"]), role_assignment=assignment)
                        for r in by_role[role.id]
                        if r["user_id"] is not None
                    ],
                    group_role_assignments=[
                        v1.GroupRoleAssignment(
                            group_id=int(r["group_id"]), role_assignment=assignment
                        )
                        for r in by_role[role.id]
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

    async def of_group(self, group_id: int) -> v1.GetRolesAssignedToGroupResponse:
        await self._names([Assignment(perms.ROLES[0], group_id=group_id)])
        rows = await self._rows("group_id = ?", (group_id,))
        roles = [perms.ROLE_BY_ID[int(r["role_id"])] for r in rows]
        return v1.GetRolesAssignedToGroupResponse(
            roles=[perms.role_message(r) for r in roles],
            assignments=[v1.RoleAssignmentSummary(role_id=r.id, scope_cluster=True) for r in roles],
        )

    async def summary(self, user_id: int) -> v1.GetPermissionsSummaryResponse:
        """The caller's roles and where they hold them (GetPermissionsSummary)."""
        roles = sorted(await self._grants.roles(user_id))
        return v1.GetPermissionsSummaryResponse(
            roles=[perms.role_message(perms.ROLE_BY_ID[r]) for r in roles],
            assignments=[v1.RoleAssignmentSummary(role_id=r, scope_cluster=True) for r in roles],
        )
