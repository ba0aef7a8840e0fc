"""User groups (``det user-group``): named sets of users that roles are assigned to.

Every change is one transaction and all or nothing: a batch that names an unknown user, a
user already in the group or one not in it changes nothing and names the culprit. Once it
has committed, ``grants`` forgets what it knew: a user added to a group holding a role
holds it from their next call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from determined.api.gen import v1
from determined.common import errors
from pydet.master import queries
from pydet.master.auth.grants import Grants
from pydet.master.auth.users import user_message
from pydet.master.store.db import Database

log = logging.getLogger(__name__)

MAX_NAME = 128


def check_group_name(name: str) -> str:
    if not name or name != name.strip() or len(name) > MAX_NAME:
        raise errors.InvalidArgument(
            f"group name: 1 to {MAX_NAME} characters, without leading or trailing spaces"
        )
    if any(ord(c) < 32 for c in name):
        raise errors.InvalidArgument("group name: no control characters")
    return name


class Groups:
    def __init__(
        self, db: Database, grants: Grants, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._grants = grants
        self._clock = clock

    async def _group(self, group_id: int) -> str:
        row = await self._db.fetch_one("SELECT name FROM user_groups WHERE id = ?", (group_id,))
        if row is None:
            raise errors.NotFound(f"group {group_id} not found")
        return str(row["name"])

    async def _usernames(self, user_ids: Iterable[int]) -> dict[int, str]:
        wanted = sorted(set(user_ids))
        if not wanted:
            return {}
        rows = await self._db.fetch_all(
            f"SELECT id, username FROM users WHERE id IN ({', '.join('?' for _ in wanted)})",
            wanted,
        )
        found = {int(r["id"]): str(r["username"]) for r in rows}
        for user_id in wanted:
            if user_id not in found:
                raise errors.NotFound(f"user {user_id} not found")
        return found

    async def _members(self, group_id: int) -> set[int]:
        rows = await self._db.fetch_all(
            "SELECT user_id FROM user_group_members WHERE group_id = ?", (group_id,)
        )
        return {int(r["user_id"]) for r in rows}

    async def _name_free(self, name: str) -> None:
        if await self._db.fetch_one("SELECT id FROM user_groups WHERE name = ?", (name,)):
            raise errors.AlreadyExists(f"group {name!r} already exists")

    async def details(self, group_id: int) -> v1.GroupDetails:
        name = await self._group(group_id)
        members = await self._members(group_id)
        users = [u for u in await queries.users(self._db) if u.id in members]
        return v1.GroupDetails(group_id=group_id, name=name, users=[user_message(u) for u in users])

    async def search(
        self, *, user_id: int, name: str, offset: int, limit: int, visible_to: int | None
    ) -> list[v1.GroupSearchResult]:
        """Groups by name; only ``user_id``'s when not 0; only those ``visible_to`` is in
        when given."""
        where: list[str] = ["1 = 1"]
        params: list[Any] = []
        for member in (user_id or None, visible_to):
            if member is not None:
                where.append("g.id IN (SELECT group_id FROM user_group_members WHERE user_id = ?)")
                params.append(member)
        if name:
            where.append("g.name = ?")
            params.append(name)
        rows = await self._db.fetch_all(
            "SELECT g.id, g.name, (SELECT COUNT(*) FROM user_group_members m"
            " WHERE m.group_id = g.id) AS members FROM user_groups g"
            f" WHERE {' AND '.join(where)} ORDER BY g.id LIMIT ? OFFSET ?",
            (*params, limit if limit > 0 else -1, max(offset, 0)),
        )
        return [
            v1.GroupSearchResult(
                group=v1.Group(group_id=int(r["id"]), name=str(r["name"])),
                num_members=int(r["members"]),
            )
            for r in rows
        ]

    async def create(self, name: str, add_users: Sequence[int], *, by: str) -> v1.GroupDetails:
        check_group_name(name)
        await self._name_free(name)
        await self._usernames(add_users)
        async with self._db.atomic():
            group_id = await self._db.execute(
                "INSERT INTO user_groups (name, created_at) VALUES (?, ?)", (name, self._clock())
            )
            await self._db.execute_many(
                "INSERT INTO user_group_members (group_id, user_id) VALUES (?, ?)",
                [(group_id, u) for u in sorted(set(add_users))],
            )
        self._grants.changed()
        log.info("%s created group %r (%d)", by, name, group_id)
        return await self.details(group_id)

    async def update(
        self,
        group_id: int,
        *,
        name: str,
        add_users: Sequence[int],
        remove_users: Sequence[int],
        by: str,
    ) -> v1.GroupDetails:
        old_name = await self._group(group_id)
        statements: list[tuple[str, Sequence[Any]]] = []
        if name and name != old_name:
            check_group_name(name)
            await self._name_free(name)
            statements.append(("UPDATE user_groups SET name = ? WHERE id = ?", (name, group_id)))
        names = await self._usernames([*add_users, *remove_users])
        members = await self._members(group_id)
        for user_id in add_users:
            if user_id in members:
                raise errors.AlreadyExists(
                    f"user {names[user_id]} is already in group {old_name!r}"
                )
        for user_id in remove_users:
            if user_id not in members:
                raise errors.NotFound(f"user {names[user_id]} is not in group {old_name!r}")
        statements += [
            ("INSERT INTO user_group_members (group_id, user_id) VALUES (?, ?)", (group_id, u))
            for u in sorted(set(add_users))
        ]
        statements += [
            ("DELETE FROM user_group_members WHERE group_id = ? AND user_id = ?", (group_id, u))
            for u in sorted(set(remove_users))
        ]
        if statements:
            await self._db.transaction(statements)
            self._grants.changed()
            log.info(
                "%s changed group %r: name %r, added %s, removed %s",
                by,
                old_name,
                name or old_name,
                sorted(names[u] for u in add_users),
                sorted(names[u] for u in remove_users),
            )
        return await self.details(group_id)

    async def delete(self, group_id: int, *, by: str) -> None:
        name = await self._group(group_id)
        await self._db.transaction(
            [
                ("DELETE FROM role_assignments WHERE group_id = ?", (group_id,)),
                ("DELETE FROM user_group_members WHERE group_id = ?", (group_id,)),
                ("DELETE FROM user_groups WHERE id = ?", (group_id,)),
            ]
        )
        self._grants.changed()
        log.info("%s deleted group %r (%d)", by, name, group_id)

    async def assign_multiple(
        self,
        user_ids: Sequence[int],
        add_groups: Sequence[int],
        remove_groups: Sequence[int],
        *,
        by: str,
    ) -> None:
        """Every user joins ``add_groups`` and leaves ``remove_groups`` (what they are
        already in or not in is left as it is)."""
        await self._usernames(user_ids)
        for group_id in {*add_groups, *remove_groups}:
            await self._group(group_id)
        statements: list[tuple[str, Sequence[Any]]] = []
        for user_id in sorted(set(user_ids)):
            for group_id in sorted(set(add_groups)):
                statements.append(
                    (
                        "INSERT OR IGNORE INTO user_group_members (group_id, user_id)"
                        " VALUES (?, ?)",
                        (group_id, user_id),
                    )
                )
            for group_id in sorted(set(remove_groups)):
                statements.append(
                    (
                        "DELETE FROM user_group_members WHERE group_id = ? AND user_id = ?",
                        (group_id, user_id),
                    )
                )
        if statements:
            await self._db.transaction(statements)
            self._grants.changed()
            log.info("%s changed the groups of users %s", by, sorted(set(user_ids)))
