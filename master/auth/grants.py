"""What each user's roles let them do: the permissions of every role assigned to the user,
directly or through a group they are in, cluster-wide (over everything) and per workspace
(over the workspace and the projects, experiments and models in it).

Rules ask this on every call, so the answer is kept in memory per user. This master is the
store's only writer, and every change to assignments, groups or memberships goes through
``roles`` or ``groups``, which call ``changed()`` once their transaction has committed; the
next question reads the store again. A read that was under way during a change does not
fill the cache with what it read before the change (the generation moved on). A deleted
workspace takes its assignments along in the store (ON DELETE CASCADE); what is cached of
them can grant nothing more, because workspace ids are never used again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydet.master.auth import permissions as perms
from pydet.master.store.db import Database

# Users whose permissions are kept; past that, the cache starts again.
_CACHED_USERS = 100_000

# The roles a user holds, and where (NULL: cluster-wide), directly or through their groups.
ROLES_OF_USER = (
    "SELECT role_id, scope_workspace_id FROM role_assignments WHERE user_id = ?"
    " OR group_id IN (SELECT group_id FROM user_group_members WHERE user_id = ?)"
)

_NONE: frozenset[perms.P] = frozenset()


@dataclass(frozen=True)
class Held:
    """A user's roles and their permissions, cluster-wide and per workspace."""

    roles: frozenset[int] = frozenset()
    permissions: frozenset[perms.P] = frozenset()
    # workspace id -> the ids of the roles assigned on it, and their permissions
    workspace_roles: Mapping[int, frozenset[int]] = field(default_factory=dict)
    workspace_permissions: Mapping[int, frozenset[perms.P]] = field(default_factory=dict)
    # What some role gives somewhere: cluster-wide, or on at least one workspace.
    anywhere: frozenset[perms.P] = frozenset()

    def in_workspace(self, workspace_id: int | None) -> frozenset[perms.P]:
        """The permissions over workspace ``workspace_id`` and what is in it."""
        if workspace_id is None:
            return self.permissions
        return self.permissions | self.workspace_permissions.get(workspace_id, _NONE)


def _held(rows: list[tuple[int, int | None]]) -> Held:
    cluster = frozenset(role for role, workspace in rows if workspace is None)
    scoped: dict[int, set[int]] = {}
    for role, workspace in rows:
        if workspace is not None:
            scoped.setdefault(workspace, set()).add(role)
    permissions = perms.permissions_of(cluster)
    workspace_permissions = {w: perms.permissions_of(frozenset(r)) for w, r in scoped.items()}
    anywhere = permissions.union(*workspace_permissions.values())
    return Held(
        roles=cluster,
        permissions=permissions,
        workspace_roles={w: frozenset(r) for w, r in scoped.items()},
        workspace_permissions=workspace_permissions,
        anywhere=anywhere,
    )


class Grants:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._known: dict[int, Held] = {}
        # user id -> the cluster-wide permissions alone: what every call asks
        self._permissions: dict[int, frozenset[perms.P]] = {}
        # user id -> what some role gives them somewhere
        self._anywhere: dict[int, frozenset[perms.P]] = {}
        self._generation = 0
        # known(user id): the user's cluster-wide permissions if they are cached (None:
        # ``held`` reads the store). known_anywhere(user id): what some role of the user
        # gives them, cluster-wide or on some workspace, if it is cached: a permission not
        # in it is held nowhere. The caches' own ``get``, asked on every call: the dicts are
        # only ever cleared, never replaced.
        self.known: Callable[[int], frozenset[perms.P] | None] = self._permissions.get
        self.known_anywhere: Callable[[int], frozenset[perms.P] | None] = self._anywhere.get

    async def of(self, user_id: int) -> Held:
        """Everything the user's roles give them."""
        found = self._known.get(user_id)
        if found is not None:
            return found
        generation = self._generation
        rows = await self._db.fetch_all(ROLES_OF_USER, (user_id, user_id))
        found = _held(
            [
                (
                    int(r["role_id"]),
                    None if r["scope_workspace_id"] is None else int(r["scope_workspace_id"]),
                )
                for r in rows
            ]
        )
        if generation == self._generation:
            if len(self._known) >= _CACHED_USERS:
                self._known.clear()
                self._permissions.clear()
                self._anywhere.clear()
            self._known[user_id] = found
            self._permissions[user_id] = found.permissions
            self._anywhere[user_id] = found.anywhere
        return found

    async def held(self, user_id: int) -> frozenset[perms.P]:
        """The permissions the user's roles give them over everything."""
        return (await self.of(user_id)).permissions

    async def held_in(self, user_id: int, workspace_id: int | None) -> frozenset[perms.P]:
        """The permissions the user's roles give them over the workspace ``workspace_id``
        and what is in it: the cluster-wide ones and the workspace's own."""
        return (await self.of(user_id)).in_workspace(workspace_id)

    async def roles(self, user_id: int) -> frozenset[int]:
        """The ids of the roles the user holds cluster-wide."""
        return (await self.of(user_id)).roles

    async def roles_anywhere(self, user_id: int) -> frozenset[int]:
        """The ids of the roles the user holds cluster-wide or on some workspace."""
        held = await self.of(user_id)
        return held.roles.union(*held.workspace_roles.values())

    def changed(self) -> None:
        """Assignments, groups or memberships changed: forget every answer."""
        self._generation += 1
        self._known.clear()
        self._permissions.clear()
        self._anywhere.clear()
