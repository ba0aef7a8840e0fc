"""A user's profile: read by id or name, and changed field by field as Determined's
PatchUser changes it.

Determined's rules, kept here: a display name or username is printable ASCII; only an
admin may be called ``admin`` and nobody new ``determined``; a display name may not be
another user's username or display name (in any case), and ``""`` clears it; a remote user
(one who signs on through an identity provider) has no password and no new username; an
agent user and group are given whole (uid, gid, user and group) or not at all (cleared).
Who may change what is ``auth.rules``' business (the RPC's rule).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from dataclasses import dataclass

from determined.api.gen import v1
from determined.common import errors
from pydet.master import queries
from pydet.master.auth.authenticator import Authenticator, check_username, user_message
from pydet.master.auth.callers import UserCaller
from pydet.master.auth.rules import Lookup
from pydet.master.store.db import Database

log = logging.getLogger(__name__)

# Not a scrypt hash: no password ever matches it (a remote user signs on elsewhere).
NO_PASSWORD = "remote"
# Tables whose rows name their owner by username.
_OWNED = ("experiments", "templates", "generic_tasks")
_PRINTABLE_ASCII = re.compile(r"^[\x20-\x7e]*$")


def message(row: queries.UserRow) -> v1.User:
    """A user as the API shows it."""
    group = None
    if row.agent_user is not None:
        group = v1.AgentUserGroup(
            agent_uid=row.agent_uid,
            agent_gid=row.agent_gid,
            agent_user=row.agent_user,
            agent_group=row.agent_group,
        )
    shown = user_message(row)
    shown.display_name = row.display_name
    shown.remote = row.remote
    shown.agent_user_group = group
    return shown


@dataclass(frozen=True)
class AgentUserGroup:
    uid: int
    gid: int
    user: str
    group: str


def agent_user_group(given: v1.AgentUserGroup | None) -> AgentUserGroup | None:
    """The agent identity asked for; None to clear it (nothing given)."""
    if given is None:
        return None
    fields = (given.agent_uid, given.agent_gid, given.agent_user, given.agent_group)
    if all(f is None for f in fields):
        return None
    if (
        given.agent_uid is None
        or given.agent_gid is None
        or not given.agent_user
        or not (given.agent_group)
    ):
        raise errors.InvalidArgument(
            "agent_user_group: agent_uid, agent_gid, agent_user and agent_group are given "
            "together, the names non-empty"
        )
    if given.agent_uid < 0 or given.agent_gid < 0:
        raise errors.InvalidArgument("agent_user_group: agent_uid and agent_gid must be >= 0")
    return AgentUserGroup(given.agent_uid, given.agent_gid, given.agent_user, given.agent_group)


def _clean_name(target: queries.UserRow, name: str, what: str) -> str:
    clean = name.strip()
    if not _PRINTABLE_ASCII.match(clean):
        raise errors.InvalidArgument(f"{what}: only printable ASCII characters, not {name!r}")
    if not target.admin and clean.lower() == "admin":
        raise errors.InvalidArgument(f"{what}: a user who is not an admin cannot be 'admin'")
    if clean.lower() == "determined" and target.username != "determined":
        raise errors.InvalidArgument(f"{what}: a user cannot be renamed 'determined'")
    return clean


@dataclass(frozen=True)
class Renamed:
    user_id: int
    old: str
    new: str


class Profiles:
    def __init__(self, db: Database, auth: Authenticator, lookup: Lookup) -> None:
        self._db = db
        self._auth = auth
        self._lookup = lookup

    async def get(self, user_id: int) -> queries.UserRow:
        row = await queries.user_by_id(self._db, user_id)
        if row is None:
            raise errors.NotFound(f"user {user_id} not found")
        return row

    async def all(self, *, active: bool | None = None) -> list[queries.UserRow]:
        return await queries.users(self._db, active=active)

    async def by_name(self, username: str) -> queries.UserRow:
        row = await queries.user(self._db, username)
        if row is None:
            raise errors.NotFound(f"user {username} not found")
        return row

    async def create(
        self,
        username: str,
        password: str,
        *,
        admin: bool,
        remote: bool = False,
        display_name: str = "",
        agent: v1.AgentUserGroup | None = None,
    ) -> queries.UserRow:
        """A new user; a remote one has no password (any password given is ignored)."""
        group = agent_user_group(agent)
        if remote:
            password = secrets.token_urlsafe(24)  # replaced below: it is never usable
        created = await self._auth.create_user(username, password, admin=admin)
        row = await self.get(created.id)
        if remote:
            await self._set(row.id, password_hash=NO_PASSWORD, remote=1)
        if display_name:
            await self._set(row.id, display_name=await self._display_name(row, display_name))
        if group is not None:
            await self._set_agent(row.id, group)
        return await self.get(row.id)

    async def patch(
        self, caller: UserCaller, target: queries.UserRow, change: v1.PatchUser
    ) -> Renamed | None:
        """Apply ``change`` to ``target``; says the old and new name if it was renamed. The
        caller is the one ``auth`` checks deactivating or demoting against."""
        group = agent_user_group(change.agent_user_group) if change.agent_user_group else None
        remote = target.remote if change.remote is None else change.remote
        renamed = None
        if change.username is not None and change.username != target.username:
            if remote:
                raise errors.InvalidArgument("username: a remote user's name cannot change")
            new = check_username(_clean_name(target, change.username, "username"))
            if await queries.user(self._db, new) is not None:
                raise errors.AlreadyExists(f"user {new} already exists")
            renamed = Renamed(target.id, target.username, new)
        display = None
        if change.display_name is not None and change.display_name != target.display_name:
            display = await self._display_name(target, change.display_name)
        if change.active is not None or change.admin is not None:
            await self._auth.patch_user(
                caller, target.username, active=change.active, admin=change.admin
            )
        if change.remote is not None and change.remote != target.remote:
            if change.remote:  # no more password sign-on
                await self._set(target.id, remote=1, password_hash=NO_PASSWORD)
            else:  # an admin sets a password (det user change-password) for sign-on
                await self._set(target.id, remote=0)
        if display is not None:
            await self._set(target.id, display_name=display)
        if change.agent_user_group is not None:
            await self._set_agent(target.id, group)
        if renamed is not None:
            await self._rename(renamed)
        log.info("%s changed user %s", caller.username, target.username)
        return renamed

    async def _display_name(self, target: queries.UserRow, name: str) -> str:
        clean = _clean_name(target, name, "display_name")
        if clean:
            similar = await self._db.fetch_one(
                "SELECT id FROM users WHERE id != ? AND (lower(username) = ?"
                " OR lower(display_name) = ?)",
                (target.id, clean.lower(), clean.lower()),
            )
            if similar is not None:
                raise errors.InvalidArgument(
                    f"display_name: cannot be {clean!r}, another user's name or display name"
                )
        return clean

    async def _rename(self, renamed: Renamed) -> None:
        """The new name on the user and on everything it owns, in one transaction; its
        sessions' callers carry the name, so they are read again."""
        statements: list[tuple[str, tuple[object, ...]]] = [
            (
                "UPDATE users SET username = ?, modified_at = ? WHERE id = ?",
                (renamed.new, time.time(), renamed.user_id),
            )
        ]
        for table in _OWNED:
            statements.append(
                (f"UPDATE {table} SET username = ? WHERE username = ?", (renamed.new, renamed.old))
            )
        await self._db.transaction(statements)
        self._auth.forget_cached_sessions(renamed.user_id)
        self._lookup.forget_owners()
        log.info("user %s is now %s", renamed.old, renamed.new)

    async def _set_agent(self, user_id: int, group: AgentUserGroup | None) -> None:
        await self._set(
            user_id,
            agent_uid=None if group is None else group.uid,
            agent_gid=None if group is None else group.gid,
            agent_user=None if group is None else group.user,
            agent_group=None if group is None else group.group,
        )

    async def _set(self, user_id: int, **columns: object) -> None:
        names = ", ".join(f"{c} = ?" for c in columns)
        await self._db.execute(
            f"UPDATE users SET {names}, modified_at = ? WHERE id = ?",
            (*columns.values(), time.time(), user_id),
        )
