"""Access tokens, user groups and role assignments in the store, on SQLite and PostgreSQL:
migration 25 on a store with admins, one row per assignment (the unique index over NULLable
columns), new rows' ids, the admin flag read from the roles, and what the master reads back
after a restart (a new Authenticator on the same store)."""

from __future__ import annotations

import pytest

from determined.common import errors
from pydet.master.auth import authenticator as auth
from pydet.master.auth import permissions as perms
from pydet.master.auth.roles import Assignment
from pydet.master.store import db as store_db
from pydet.master.store.db import Database
from pydet.master.store.migrations import MIGRATIONS


class NoTasks:
    def task_caller(self, token: str) -> None:
        return None


def authenticator(db: Database) -> auth.Authenticator:
    return auth.Authenticator(db, tasks=NoTasks(), agent_token="agent-token")


async def test_existing_admins_become_cluster_admins(
    new_store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as older:
        older.setattr(store_db, "MIGRATIONS", MIGRATIONS[:24])
        await new_store.open()
        for name, admin in (("root", 1), ("alice", 0)):
            await new_store.execute(
                "INSERT INTO users (username, password_hash, admin, active, modified_at)"
                " VALUES (?, 'h', ?, 1, 0)",
                (name, admin),
            )
        await new_store.close()
    await new_store.open()
    try:
        rows = await new_store.fetch_all(
            "SELECT r.role_id, u.username FROM role_assignments r JOIN users u ON u.id = r.user_id"
        )
        assert [(r["role_id"], r["username"]) for r in rows] == [(1, "root")]
        users = await authenticator(new_store).users()
        assert {u.username: u.admin for u in users} == {"root": True, "alice": False}
    finally:
        await new_store.close()


async def test_tokens_groups_and_roles_are_read_back_after_a_restart(store: Database) -> None:
    first = authenticator(store)
    alice = await first.create_user("alice", "alice-password", admin=False)
    made = await first.tokens.create(alice.id, lifespan="1h", description="ci", by="t")
    revoked = await first.tokens.create(alice.id, lifespan="1h", description="", by="t")
    await first.tokens.patch(revoked.token_id, description=None, revoke=True, by="t")
    team = await first.groups.create("team", [alice.id], by="t")
    editor = perms.ROLE_BY_NAME["Editor"]
    await first.roles.assign([Assignment(editor, group_id=team.group_id)], by="t")
    assert made.token_id > 0 and revoked.token_id == made.token_id + 1 and team.group_id > 0

    again = authenticator(store)  # a restarted master: nothing in memory
    caller = await again.authenticate(made.token)
    assert caller.username == "alice"
    with pytest.raises(errors.Unauthenticated, match="was revoked"):
        await again.authenticate(revoked.token)
    assert perms.P.UPDATE_EXPERIMENT in await again.grants.held(alice.id)
    assert [u.username for u in (await again.groups.details(team.group_id)).users] == ["alice"]


async def test_an_assignment_is_stored_once_whatever_its_null_columns(store: Database) -> None:
    a = authenticator(store)
    alice = await a.create_user("alice", "alice-password", admin=False)
    team = await a.groups.create("team", [], by="t")
    viewer = perms.ROLE_BY_NAME["Viewer"]
    for held in (Assignment(viewer, user_id=alice.id), Assignment(viewer, group_id=team.group_id)):
        await a.roles.assign([held], by="t")
        with pytest.raises(errors.AlreadyExists):
            await a.roles.assign([held], by="t")
    # The store itself refuses a second row, and a row for nobody or for both.
    for sql, params in (
        ("INSERT INTO role_assignments (role_id, user_id) VALUES (4, ?)", (alice.id,)),
        ("INSERT INTO role_assignments (role_id) VALUES (4)", ()),
        (
            "INSERT INTO role_assignments (role_id, user_id, group_id) VALUES (4, ?, ?)",
            (alice.id, team.group_id),
        ),
    ):
        with pytest.raises(Exception):  # noqa: B017 (sqlite3's or asyncpg's integrity error)
            await store.execute(sql, params)
    # Making an admin twice stays one assignment (INSERT OR IGNORE on both dialects).
    root = await a.create_user("root", "root-password", admin=True)
    caller = await a.authenticate((await a.login("root", "root-password", "t")).token)
    await a.patch_user(caller, "alice", active=None, admin=True)
    await a.patch_user(caller, "alice", active=None, admin=True)
    rows = await store.fetch_all("SELECT user_id FROM role_assignments WHERE role_id = 1")
    assert sorted(int(r["user_id"]) for r in rows) == sorted([root.id, alice.id])


async def test_a_deleted_group_takes_its_members_and_assignments_along(store: Database) -> None:
    a = authenticator(store)
    alice = await a.create_user("alice", "alice-password", admin=False)
    team = await a.groups.create("team", [alice.id], by="t")
    await a.roles.assign([Assignment(perms.ROLE_BY_NAME["Editor"], group_id=team.group_id)], by="t")
    await a.groups.delete(team.group_id, by="t")
    for table in ("user_group_members", "role_assignments", "user_groups"):
        row = await store.fetch_one(f"SELECT COUNT(*) AS n FROM {table}")
        assert row is not None and int(row["n"]) == 0, table
    assert await a.grants.held(alice.id) == frozenset()
