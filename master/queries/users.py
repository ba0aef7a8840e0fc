"""Users as `det user list` and `det user whoami` show them (never their password hashes)."""

from __future__ import annotations

from dataclasses import dataclass

from pydet.master.store.db import Database, Row

_COLUMNS = "id, username, admin, active, modified_at"


@dataclass(frozen=True)
class UserRow:
    id: int
    username: str
    admin: bool
    active: bool
    modified_at: float


def _row(r: Row) -> UserRow:
    return UserRow(
        id=int(r["id"]),
        username=str(r["username"]),
        admin=bool(r["admin"]),
        active=bool(r["active"]),
        modified_at=float(r["modified_at"]),
    )


async def user(db: Database, username: str) -> UserRow | None:
    row = await db.fetch_one(f"SELECT {_COLUMNS} FROM users WHERE username = ?", (username,))
    return None if row is None else _row(row)


async def users(db: Database) -> list[UserRow]:
    return [_row(r) for r in await db.fetch_all(f"SELECT {_COLUMNS} FROM users ORDER BY id")]
