"""What each user's roles let them do: the permissions of every role assigned to the user
cluster-wide, directly or through a group they are in.

Rules ask this on every call, so the answer is kept in memory per user. This master is the
store's only writer, and every change to assignments, groups or memberships goes through
``roles`` or ``groups``, which call ``changed()`` once their transaction has committed; the
next question reads the store again. A read that was under way during a change does not
fill the cache with what it read before the change (the generation moved on).
"""

from __future__ import annotations

from pydet.master.auth import permissions as perms
from pydet.master.store.db import Database

# Users whose permissions are kept; past that, the cache starts again.
_CACHED_USERS = 100_000

# The roles a user holds cluster-wide, directly or through their groups.
ROLES_OF_USER = (
    "SELECT role_id FROM role_assignments WHERE scope_workspace_id IS NULL AND (user_id = ?"
    " OR group_id IN (SELECT group_id FROM user_group_members WHERE user_id = ?))"
)


class Grants:
    def __init__(self, db: Database) -> None:
        self._db = db
        # user id -> (the ids of their roles, those roles' permissions)
        self._known: dict[int, tuple[frozenset[int], frozenset[perms.P]]] = {}
        # user id -> the permissions alone: what every call asks
        self._permissions: dict[int, frozenset[perms.P]] = {}
        self._generation = 0

    async def _of(self, user_id: int) -> tuple[frozenset[int], frozenset[perms.P]]:
        found = self._known.get(user_id)
        if found is not None:
            return found
        generation = self._generation
        rows = await self._db.fetch_all(ROLES_OF_USER, (user_id, user_id))
        roles = frozenset(int(r["role_id"]) for r in rows)
        found = (roles, perms.permissions_of(roles))
        if generation == self._generation:
            if len(self._known) >= _CACHED_USERS:
                self._known.clear()
                self._permissions.clear()
            self._known[user_id] = found
            self._permissions[user_id] = found[1]
        return found

    def known(self, user_id: int) -> frozenset[perms.P] | None:
        """The user's permissions if they are cached (None: ``held`` reads the store)."""
        return self._permissions.get(user_id)

    async def held(self, user_id: int) -> frozenset[perms.P]:
        """The permissions the user's roles give them over everything."""
        return (await self._of(user_id))[1]

    async def roles(self, user_id: int) -> frozenset[int]:
        """The ids of the roles the user holds cluster-wide."""
        return (await self._of(user_id))[0]

    def changed(self) -> None:
        """Assignments, groups or memberships changed: forget every answer."""
        self._generation += 1
        self._known.clear()
        self._permissions.clear()
