"""Sessions do not pile up: logging in again and again keeps a bounded number per user."""

from __future__ import annotations

import pathlib

import pytest

from determined.common import errors
from pydet.master.auth import authenticator as auth
from pydet.master.auth.callers import TaskCaller, UserCaller
from pydet.master.store.db import Database


class NoTasks:
    def task_caller(self, token: str) -> TaskCaller | None:
        return None


async def test_repeated_logins_keep_at_most_the_newest_sessions(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "MAX_SESSIONS_PER_USER", 5)
    db = Database(tmp_path / "pydet.db")
    await db.open()
    try:
        now = [1000.0]
        authn = auth.Authenticator(
            db, tasks=NoTasks(), agent_token="agent", session_lifetime=60, clock=lambda: now[0]
        )
        await authn.bootstrap(tmp_path)
        password = (tmp_path / auth.ADMIN_PASSWORD_FILE).read_text().strip()
        first = (await authn.login("admin", password, "127.0.0.1")).token
        await authn.authenticate(first)  # cached from here on
        tokens = []
        for _ in range(auth.MAX_SESSIONS_PER_USER + 5):
            now[0] += 0.01
            tokens.append((await authn.login("admin", password, "127.0.0.1")).token)
        row = await db.fetch_one("SELECT COUNT(*) AS n FROM sessions")
        assert row is not None and row["n"] == auth.MAX_SESSIONS_PER_USER
        # The oldest session ended, though it had been checked (and cached) before.
        with pytest.raises(errors.Unauthenticated):
            await authn.authenticate(first)
        newest = await authn.authenticate(tokens[-1])
        assert isinstance(newest, UserCaller) and newest.username == "admin"
        # Expired sessions go at the next login.
        now[0] += 120
        await authn.login("admin", password, "127.0.0.1")
        row = await db.fetch_one("SELECT COUNT(*) AS n FROM sessions")
        assert row is not None and row["n"] == 1
    finally:
        await db.close()
