"""The CLI's sessions: one token cache per master (mode 0600), who a command runs as, and
what it says without a session. Commands run against an in-memory master that checks
tokens (grpclib's ChannelFor: real gRPC, no sockets)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import stat
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import grpclib
import grpclib.const
import grpclib.server
import pytest
from grpclib.testing import ChannelFor

from determined.api.gen import v1
from determined.common import client
from pydet.cli import auth
from pydet.cli.__main__ import main

MASTER = "127.0.0.1:8080"
PASSWORDS = {"admin": "admin-password", "alice": "alice-password", "bob": "bob-password"}

_who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="")


class Master(v1.DeterminedBase):
    """Users, logins and sessions; every call but Login needs a live token."""

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}
        self.logins: list[str] = []

    async def login(self, message: v1.LoginRequest) -> v1.LoginResponse:
        if PASSWORDS.get(message.username) != message.password:
            raise grpclib.GRPCError(
                grpclib.const.Status.UNAUTHENTICATED, "invalid username or password"
            )
        token = f"token-{message.username}-{len(self.logins)}"
        self.logins.append(message.username)
        self.sessions[token] = message.username
        return v1.LoginResponse(token=token, user=v1.User(username=message.username))

    async def logout(self, message: v1.LogoutRequest) -> v1.LogoutResponse:
        for token, who in list(self.sessions.items()):
            if who == _who.get():
                del self.sessions[token]
        return v1.LogoutResponse()

    async def get_master(self, message: v1.GetMasterRequest) -> v1.GetMasterResponse:
        return v1.GetMasterResponse(version="test")

    async def get_me(self, message: v1.GetMeRequest) -> v1.GetMeResponse:
        return v1.GetMeResponse(user=v1.User(username=_who.get(), admin=_who.get() == "admin"))

    async def get_experiments(self, message: v1.GetExperimentsRequest) -> v1.GetExperimentsResponse:
        return v1.GetExperimentsResponse()

    def expire_all(self) -> None:
        self.sessions.clear()


class TokenChecked:
    """``master`` behind a token check, as the real master's guard puts it."""

    def __init__(self, master: Master) -> None:
        self.master = master

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        def wrap(
            path: str, func: Callable[[grpclib.server.Stream[Any, Any]], Awaitable[None]]
        ) -> Callable[[grpclib.server.Stream[Any, Any]], Awaitable[None]]:
            async def handler(stream: grpclib.server.Stream[Any, Any]) -> None:
                if path != "/v1.Determined/Login":
                    who = self.master.sessions.get(str(stream.metadata.get("x-det-token")))
                    if who is None:
                        raise grpclib.GRPCError(
                            grpclib.const.Status.UNAUTHENTICATED,
                            "invalid or revoked session: log in again (det user login)",
                        )
                    _who.set(who)
                await func(stream)

            return handler

        return {
            path: h._replace(func=wrap(path, h.func))
            for path, h in self.master.__mapping__().items()
        }


class InMemorySession(client.Session):
    def __init__(self, address: str | None, channel: grpclib.client.Channel) -> None:
        super().__init__(address)
        self._memory = channel

    @property
    def stub(self) -> v1.DeterminedStub:
        return v1.DeterminedStub(self._memory, metadata=client.metadata(self.token))


@pytest.fixture
def master(monkeypatch: pytest.MonkeyPatch) -> Iterator[Master]:
    fake = Master()

    @contextlib.asynccontextmanager
    async def session(address: str | None = None, *, token: str | None = None) -> Any:
        async with ChannelFor([TokenChecked(fake)]) as channel:
            yield InMemorySession(address, channel)

    monkeypatch.setattr(client, "session", session)
    monkeypatch.setenv("DET_MASTER", MASTER)
    yield fake
    auth.select_user(None)


def det(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cache() -> dict[str, Any]:
    return dict(json.loads(auth.store_path().read_text()))


# -- the cache file ------------------------------------------------------------------------------


def test_the_cache_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        auth.remember(MASTER, "alice", "secret-token", active=True)
    finally:
        os.umask(old)
    path = auth.store_path()
    assert path == Path(os.environ["XDG_CONFIG_HOME"]) / "pydet" / "auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_leftover_temporary_file_does_not_leak_its_mode_into_the_cache() -> None:
    auth.remember(MASTER, "alice", "first-token", active=True)
    leftover = auth.store_path().with_name(f"auth.json.{os.getpid()}.tmp")
    leftover.write_text("")
    leftover.chmod(0o644)
    auth.remember(MASTER, "alice", "second-token", active=True)
    assert stat.S_IMODE(auth.store_path().stat().st_mode) == 0o600
    assert auth.cached_token(MASTER, "alice") == "second-token"


def test_tokens_are_kept_per_master_and_per_user() -> None:
    auth.remember("10.0.0.1:8080", "alice", "token-a", active=True)
    auth.remember("10.0.0.2:8080", "alice", "token-b", active=True)
    auth.remember("10.0.0.1:9090", "bob", "token-c", active=True)
    auth.remember("10.0.0.1:8080", "bob", "token-d", active=False)
    assert auth.cached_token("10.0.0.1:8080", "alice") == "token-a"
    assert auth.cached_token("10.0.0.2:8080", "alice") == "token-b"
    assert auth.cached_token("10.0.0.1:9090", "alice") is None
    assert auth.cached_token("10.0.0.1:8080", "bob") == "token-d"
    assert auth.active_user("10.0.0.1:8080") == "alice"
    assert auth.active_user("10.0.0.1:9090") == "bob"


@pytest.mark.parametrize(
    "same",
    ["localhost:8080", "127.0.0.1:8080", "[::1]:8080", "http://localhost:8080", "localhost"],
)
def test_localhost_and_127_0_0_1_share_one_cached_session(same: str) -> None:
    auth.remember("127.0.0.1:8080", "alice", "token-a", active=True)
    assert auth.master_key(same) == "localhost:8080"
    assert auth.cached_token(same, "alice") == "token-a"
    assert auth.active_user(same) == "alice"
    assert auth.cached_token("localhost:8081", "alice") is None


def test_forgetting_the_active_user_leaves_no_default() -> None:
    auth.remember(MASTER, "alice", "token-a", active=True)
    auth.remember(MASTER, "bob", "token-b", active=False)
    auth.forget(MASTER, "alice")
    assert auth.cached_token(MASTER, "alice") is None
    assert auth.active_user(MASTER) is None
    assert auth.cached_token(MASTER, "bob") == "token-b"


def test_a_damaged_cache_is_treated_as_empty_and_rewritten() -> None:
    path = auth.store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in ("{not json", "[]", '{"masters": 3}'):
        path.write_text(text)
        assert auth.active_user(MASTER) is None
    auth.remember(MASTER, "alice", "token-a", active=True)
    assert auth.cached_token(MASTER, "alice") == "token-a"


# -- who a command runs as --------------------------------------------------------------------


def test_u_beats_det_user_which_beats_the_active_user(monkeypatch: pytest.MonkeyPatch) -> None:
    auth.remember(MASTER, "alice", "token-a", active=True)
    assert auth.wanted_user(MASTER) == "alice"
    monkeypatch.setenv("DET_USER", "bob")
    assert auth.wanted_user(MASTER) == "bob"
    auth.select_user("admin")
    try:
        assert auth.wanted_user(MASTER) == "admin"
    finally:
        auth.select_user(None)


def test_login_caches_the_session_and_makes_the_user_the_default(
    master: Master, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_PASS", "alice-password")
    code, out, _ = det(capsys, "user", "login", "alice")
    assert (code, out.strip()) == (0, f"Logged in to {MASTER} as alice")
    monkeypatch.delenv("DET_PASS")
    assert cache()["masters"]["localhost:8080"]["active_user"] == "alice"
    assert "alice-password" not in auth.store_path().read_text()
    code, out, _ = det(capsys, "user", "whoami")
    assert (code, out.strip()) == (0, "You are logged in as user 'alice'")
    # The cached session was used: one login in all.
    assert master.logins == ["alice"]


def test_u_logs_in_for_one_command_without_changing_the_default(
    master: Master, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_PASS", "alice-password")
    assert det(capsys, "user", "login", "alice")[0] == 0
    monkeypatch.setenv("DET_PASS", "admin-password")
    code, out, _ = det(capsys, "-u", "admin", "user", "whoami")
    assert (code, out.strip()) == (0, "You are logged in as user 'admin' (admin)")
    auth.select_user(None)
    monkeypatch.delenv("DET_PASS")
    assert det(capsys, "user", "whoami")[1].strip() == "You are logged in as user 'alice'"
    # admin's session is cached too: -u admin needs no password any more.
    code, out, _ = det(capsys, "-u", "admin", "user", "whoami")
    assert "'admin'" in out
    assert master.logins == ["alice", "admin"]


def test_det_user_and_det_pass_log_a_script_in(
    master: Master, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_USER", "bob")
    monkeypatch.setenv("DET_PASS", "bob-password")
    code, out, _ = det(capsys, "user", "whoami")
    assert (code, out.strip()) == (0, "You are logged in as user 'bob'")
    assert det(capsys, "user", "whoami")[0] == 0
    assert master.logins == ["bob"]


def test_a_wrong_det_pass_is_one_clear_line_and_exit_1(
    master: Master, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_USER", "bob")
    monkeypatch.setenv("DET_PASS", "not-bobs-password")
    code, out, err = det(capsys, "experiment", "list")
    assert (code, out) == (1, "")
    assert err == "Error: invalid username or password\n"
    assert not auth.store_path().exists() or auth.cached_token(MASTER, "bob") is None


# -- without a session -----------------------------------------------------------------------------


def test_without_a_session_a_command_says_how_to_log_in(
    master: Master, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = det(capsys, "experiment", "list")
    assert (code, out) == (1, "")
    assert err == f"Error: not logged in to {MASTER}: run det user login\n"


def test_det_user_without_a_password_or_a_session_is_not_logged_in(
    master: Master, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_USER", "bob")
    code, _, err = det(capsys, "user", "whoami")
    assert code == 1
    assert err == f"Error: not logged in to {MASTER}: run det user login\n"


def test_an_expired_session_is_forgotten_and_reported(
    master: Master, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_PASS", "alice-password")
    assert det(capsys, "user", "login", "alice")[0] == 0
    monkeypatch.delenv("DET_PASS")
    master.expire_all()
    code, _, err = det(capsys, "experiment", "list")
    assert code == 1
    assert err == (
        f"Error: not logged in to {MASTER} (the session has expired or was revoked): "
        "run det user login\n"
    )
    assert auth.cached_token(MASTER, "alice") is None
    assert "Traceback" not in err


def test_an_expired_session_is_renewed_with_det_pass(
    master: Master, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_USER", "bob")
    monkeypatch.setenv("DET_PASS", "bob-password")
    assert det(capsys, "user", "whoami")[0] == 0
    master.expire_all()
    code, out, _ = det(capsys, "user", "whoami")
    assert (code, out.strip()) == (0, "You are logged in as user 'bob'")
    assert master.logins == ["bob", "bob"]


def test_logout_ends_the_session_and_forgets_it(
    master: Master, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_PASS", "alice-password")
    assert det(capsys, "user", "login", "alice")[0] == 0
    monkeypatch.delenv("DET_PASS")
    code, out, _ = det(capsys, "user", "logout")
    assert (code, out.strip()) == (0, f"Logged out of {MASTER} (alice)")
    assert master.sessions == {}
    assert auth.cached_token(MASTER, "alice") is None
    assert det(capsys, "user", "whoami")[0] == 1
    code, out, _ = det(capsys, "user", "logout")
    assert (code, out.strip()) == (0, f"Not logged in to {MASTER}")
