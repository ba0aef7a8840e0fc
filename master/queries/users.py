"""Users as `det user list`, `det user whoami` and the SDK's ``User`` show them (never
their password hashes).

A user is an admin when they hold ClusterAdmin (role 1) cluster-wide, assigned to them or
to a group they are in (master/auth/permissions.py)."""

from __future__ import annotations

from dataclasses import dataclass

from pydet.master.store.db import Database, Row

_COLUMNS = (
    "u.id, u.username, u.active, u.modified_at, u.display_name, u.remote, u.agent_uid,"
    " u.agent_gid, u.agent_user, u.agent_group, EXISTS (SELECT 1 FROM role_assignments r"
    " WHERE r.role_id = 1 AND r.scope_workspace_id IS NULL AND (r.user_id = u.id OR"
    " r.group_id IN (SELECT m.group_id FROM user_group_members m WHERE m.user_id = u.id)))"
    " AS admin"
)


@dataclass(frozen=True)
class UserRow:
    id: int
    username: str
    admin: bool
    active: bool
    modified_at: float
    display_name: str = ""
    remote: bool = False
    # The Unix identity its tasks run as (User.link_with_agent); None where unset.
    agent_uid: int | None = None
    agent_gid: int | None = None
    agent_user: str | None = None
    agent_group: str | None = None


def _row(r: Row) -> UserRow:
    return UserRow(
        id=int(r["id"]),
        username=str(r["username"]),
        admin=bool(r["admin"]),
        active=bool(r["active"]),
        modified_at=float(r["modified_at"]),
        display_name=str(r["display_name"] or ""),
        remote=bool(r["remote"]),
        agent_uid=None if r["agent_uid"] is None else int(r["agent_uid"]),
        agent_gid=None if r["agent_gid"] is None else int(r["agent_gid"]),
        agent_user=r["agent_user"],
        agent_group=r["agent_group"],
    )


async def user(db: Database, username: str) -> UserRow | None:
    row = await db.fetch_one(f"SELECT {_COLUMNS} FROM users u WHERE u.username = ?", (username,))
    return None if row is None else _row(row)


async def user_by_id(db: Database, user_id: int) -> UserRow | None:
    row = await db.fetch_one(f"SELECT {_COLUMNS} FROM users u WHERE u.id = ?", (user_id,))
    return None if row is None else _row(row)


async def users(db: Database, *, active: bool | None = None) -> list[UserRow]:
    """Every user, or only the active (``active=True``) or deactivated ones, by id."""
    if active is None:
        rows = await db.fetch_all(f"SELECT {_COLUMNS} FROM users u ORDER BY u.id")
    else:
        rows = await db.fetch_all(
            f"SELECT {_COLUMNS} FROM users u WHERE u.active = ? ORDER BY u.id", (int(active),)
        )
    return [_row(r) for r in rows]
