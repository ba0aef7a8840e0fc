"""Users, sessions and tokens in the master: the first admin, logins, expiry, revocation."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pathlib
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from determined.common import errors
from pydet.master.auth import authenticator as auth
from pydet.master.auth import passwords
from pydet.master.auth.callers import AgentCaller, TaskCaller, UserCaller
from pydet.master.auth.throttle import LoginThrottle
from pydet.master.store.db import Database

AGENT_TOKEN = "the-agent-token-of-this-cluster"
TASK_TOKEN = "a-live-allocations-task-token"
REFUSED = "invalid username or password"


class Tasks:
    def __init__(self) -> None:
        self.live: dict[str, TaskCaller] = {
            TASK_TOKEN: TaskCaller(
                allocation_id="1.1.0",
                task_id="1.1",
                trial_id=1,
                experiment_id=1,
                start_checkpoint="",
            )
        }

    def task_caller(self, token: str) -> TaskCaller | None:
        return self.live.get(token)


@dataclass
class World:
    db: Database
    authn: auth.Authenticator
    data_dir: pathlib.Path
    tasks: Tasks
    throttle: LoginThrottle
    now: list[float] = field(default_factory=lambda: [1_000_000.0])

    @property
    def admin_password(self) -> str:
        return (self.data_dir / auth.ADMIN_PASSWORD_FILE).read_text().strip()

    async def sessions(self) -> int:
        row = await self.db.fetch_one("SELECT COUNT(*) AS n FROM sessions")
        assert row is not None
        return int(row["n"])

    async def login(self, username: str, password: str, address: str = "10.0.0.1") -> str:
        return (await self.authn.login(username, password, address)).token

    async def caller(self, token: str) -> UserCaller:
        caller = await self.authn.authenticate(token)
        assert isinstance(caller, UserCaller)
        return caller


@pytest.fixture
async def world(tmp_path: pathlib.Path) -> AsyncIterator[World]:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    tasks = Tasks()
    # No slowdown unless a test asks for it: the throttle has its own tests.
    throttle = LoginThrottle(free_failures=1000)
    now = [1_000_000.0]
    authn = auth.Authenticator(
        db,
        tasks=tasks,
        agent_token=AGENT_TOKEN,
        session_lifetime=3600,
        throttle=throttle,
        clock=lambda: now[0],
    )
    data_dir = tmp_path / "master"
    await authn.bootstrap(data_dir)
    try:
        yield World(db, authn, data_dir, tasks, throttle, now)
    finally:
        await db.close()


async def admin_caller(w: World) -> UserCaller:
    return await w.caller(await w.login("admin", w.admin_password))


# -- the first start ---------------------------------------------------------------------------


async def test_first_start_writes_a_generated_admin_password_readable_by_its_owner_only(
    world: World,
) -> None:
    path = world.data_dir / auth.ADMIN_PASSWORD_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    password = world.admin_password
    assert len(password) >= 16 and password.strip() == password
    me = await admin_caller(world)
    assert me.username == "admin" and (await world.authn.me(me)).admin
    # The first admin is ClusterAdmin: every permission.
    assert await world.authn.grants.roles(me.id) == {1}


async def test_the_store_keeps_no_password_and_no_token(world: World) -> None:
    token = await world.login("admin", world.admin_password)
    users = await world.db.fetch_all("SELECT * FROM users")
    sessions = await world.db.fetch_all("SELECT * FROM sessions")
    stored = repr([dict(r) for r in users]) + repr([dict(r) for r in sessions])
    assert world.admin_password not in stored
    assert token not in stored
    assert passwords.token_digest(token) in stored


async def test_bootstrap_again_changes_nothing(world: World) -> None:
    password = world.admin_password
    await world.authn.bootstrap(world.data_dir)
    await world.authn.bootstrap(world.data_dir)
    assert world.admin_password == password
    assert len(await world.authn.users()) == 1
    await world.login("admin", password)


async def test_bootstrap_logs_where_the_password_is_never_the_password(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    try:
        authn = auth.Authenticator(db, tasks=Tasks(), agent_token=AGENT_TOKEN)
        with caplog.at_level(logging.DEBUG):
            await authn.bootstrap(tmp_path / "data")
            token = (await authn.login("admin", _password(tmp_path / "data"), "x")).token
        path = tmp_path / "data" / auth.ADMIN_PASSWORD_FILE
        assert str(path) in caplog.text
        assert _password(tmp_path / "data") not in caplog.text
        assert token not in caplog.text
    finally:
        await db.close()


def _password(data_dir: pathlib.Path) -> str:
    return (data_dir / auth.ADMIN_PASSWORD_FILE).read_text().strip()


async def test_no_admin_is_made_when_users_exist_already(tmp_path: pathlib.Path) -> None:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    try:
        authn = auth.Authenticator(db, tasks=Tasks(), agent_token=AGENT_TOKEN)
        await authn.bootstrap(tmp_path / "first")
        (tmp_path / "first" / auth.ADMIN_PASSWORD_FILE).unlink()
        await authn.bootstrap(tmp_path / "first")
        assert not (tmp_path / "first" / auth.ADMIN_PASSWORD_FILE).exists()
    finally:
        await db.close()


def test_secret_files_are_0600_even_under_a_permissive_umask(tmp_path: pathlib.Path) -> None:
    import os

    old = os.umask(0)
    try:
        auth.write_secret_file(tmp_path / "deep" / "secret", "s3cr3t")
        token = auth.load_or_create_agent_token(tmp_path / "agent-token")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "deep" / "secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "agent-token").stat().st_mode) == 0o600
    assert len(token) >= 32
    assert auth.load_or_create_agent_token(tmp_path / "agent-token") == token


def test_an_empty_agent_token_file_is_refused_with_its_path(tmp_path: pathlib.Path) -> None:
    (tmp_path / "agent-token").write_text("\n")
    with pytest.raises(errors.FailedPrecondition, match="agent-token is empty"):
        auth.load_or_create_agent_token(tmp_path / "agent-token")


# -- logins ------------------------------------------------------------------------------------


async def test_a_wrong_password_and_an_unknown_user_get_the_same_answer(world: World) -> None:
    with pytest.raises(errors.Unauthenticated) as wrong:
        await world.login("admin", "not-the-password")
    with pytest.raises(errors.Unauthenticated) as unknown:
        await world.login("nobody", "not-the-password")
    assert wrong.value.message == unknown.value.message
    assert REFUSED in wrong.value.message
    assert "nobody" not in unknown.value.message
    assert await world.sessions() == 0


async def test_overlong_names_and_passwords_get_the_same_answer_without_work(
    world: World,
) -> None:
    for username, password in (("a" * 65, "whatever1"), ("admin", "p" * 5000)):
        with pytest.raises(errors.Unauthenticated, match=REFUSED):
            await world.login(username, password)
    assert await world.sessions() == 0


async def test_failed_logins_are_counted_per_user_and_address(world: World) -> None:
    for _ in range(3):
        with pytest.raises(errors.Unauthenticated):
            await world.login("admin", "wrong-password", "10.9.9.9")
    assert world.throttle._failures["user:admin"][0] == 3
    assert world.throttle._failures["addr:10.9.9.9"][0] == 3
    # A success clears the user's count, and takes its own attempt off the address.
    await world.login("admin", world.admin_password, "10.9.9.9")
    assert "user:admin" not in world.throttle._failures
    assert world.throttle._failures["addr:10.9.9.9"][0] == 3


@dataclasses.dataclass
class Throttled:
    """An authenticator with a real login throttle, and the waits it asked for (recorded,
    not slept)."""

    authn: auth.Authenticator
    waits: list[float]
    password: str


@pytest.fixture
async def throttled(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Throttled]:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(auth.asyncio, "sleep", sleep)
    try:
        authn = auth.Authenticator(
            db,
            tasks=Tasks(),
            agent_token=AGENT_TOKEN,
            throttle=LoginThrottle(free_failures=3, base_delay=0.25, max_delay=8.0),
        )
        await authn.bootstrap(tmp_path)
        password = (tmp_path / "admin-password").read_text().strip()
        yield Throttled(authn, waits, password)
    finally:
        await db.close()


async def test_logins_sent_at_once_wait_as_long_as_logins_sent_one_by_one(
    throttled: Throttled,
) -> None:
    results = await asyncio.gather(
        *(throttled.authn.login("admin", f"guess-{i}", "10.0.0.7") for i in range(10)),
        return_exceptions=True,
    )
    assert all(isinstance(r, errors.Unauthenticated) for r in results)
    assert sorted(throttled.waits) == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


async def test_guesses_at_a_user_never_keep_the_right_password_waiting(
    throttled: Throttled, caplog: pytest.LogCaptureFixture
) -> None:
    authn, waits = throttled.authn, throttled.waits
    with caplog.at_level(logging.WARNING, logger=auth.__name__):
        for i in range(15):
            with pytest.raises(errors.Unauthenticated):
                await authn.login("admin", f"guess-{i}", "203.0.113.9")
    assert waits[-1] == 8.0  # the guessing address is slowed to the maximum
    slowed = [r.getMessage() for r in caplog.records if "slowing logins" in r.getMessage()]
    assert slowed and all("203.0.113.9" in m for m in slowed)
    assert len(slowed) < 15  # when it is slowed further, not at every attempt
    # The right password from an address that has not failed: no wait at all.
    waits.clear()
    await authn.login("admin", throttled.password, "198.51.100.4")
    assert waits == []
    # The guessing address is still slowed. Guessing the user from many addresses is
    # too: each address's first guess is free, and after it the user's count (3 free
    # failures, then 0.25 s, doubling) slows that address as well.
    with pytest.raises(errors.Unauthenticated):
        await authn.login("admin", "guess-15", "203.0.113.9")
    assert waits == [8.0]
    for address in ("192.0.2.1", "192.0.2.2"):
        for guess in ("a-guess", "another-guess"):
            with pytest.raises(errors.Unauthenticated):
                await authn.login("admin", guess, address)
    # The user's count after the success: 1, 2, 3, 4, 5 failures; only a second guess
    # from an address that already failed waits, once the count is past the free ones.
    assert waits == [8.0, 0.5]


async def test_a_deactivated_user_cannot_log_in_and_loses_its_sessions(world: World) -> None:
    admin = await admin_caller(world)
    await world.authn.create_user("alice", "alice-password", admin=False)
    token = await world.login("alice", "alice-password")
    await world.caller(token)  # checked once, so cached
    await world.authn.patch_user(admin, "alice", active=False, admin=None)
    with pytest.raises(errors.Unauthenticated):
        await world.authn.authenticate(token)
    with pytest.raises(errors.PermissionDenied, match="alice is deactivated"):
        await world.login("alice", "alice-password")
    # A wrong password says no more than for anybody else.
    with pytest.raises(errors.Unauthenticated, match=REFUSED):
        await world.login("alice", "wrong-password")
    await world.authn.patch_user(admin, "alice", active=True, admin=None)
    await world.caller(await world.login("alice", "alice-password"))


async def test_nobody_can_deactivate_themselves(world: World) -> None:
    admin = await admin_caller(world)
    with pytest.raises(errors.FailedPrecondition, match="cannot deactivate yourself"):
        await world.authn.patch_user(admin, "admin", active=False, admin=None)
    with pytest.raises(errors.FailedPrecondition):
        await world.authn.patch_user(admin, "admin", active=None, admin=False)
    assert (await world.authn.user("admin")).active


# -- sessions ----------------------------------------------------------------------------------


async def test_a_session_expires_after_its_lifetime(world: World) -> None:
    token = await world.login("admin", world.admin_password)
    world.now[0] += 3599
    await world.caller(token)  # now cached, with its expiry
    world.now[0] += 2
    with pytest.raises(errors.Unauthenticated, match="expired"):
        await world.authn.authenticate(token)
    with pytest.raises(errors.Unauthenticated, match="expired"):
        await world.authn.authenticate(token)


async def test_logout_ends_exactly_that_session(world: World) -> None:
    first = await world.login("admin", world.admin_password)
    second = await world.login("admin", world.admin_password)
    caller = await world.caller(first)
    await world.caller(second)
    await world.authn.logout(caller)
    with pytest.raises(errors.Unauthenticated, match="invalid or revoked"):
        await world.authn.authenticate(first)
    await world.caller(second)
    assert await world.sessions() == 1


async def test_a_password_change_ends_the_users_other_sessions(world: World) -> None:
    admin = await admin_caller(world)
    await world.authn.create_user("bob", "bob-password", admin=False)
    laptop = await world.login("bob", "bob-password")
    desktop = await world.login("bob", "bob-password")
    bob = await world.caller(desktop)
    await world.caller(laptop)
    await world.authn.set_password(bob, "bob", "new-bob-password")
    with pytest.raises(errors.Unauthenticated):
        await world.authn.authenticate(laptop)
    assert (await world.caller(desktop)).username == "bob"
    with pytest.raises(errors.Unauthenticated, match=REFUSED):
        await world.login("bob", "bob-password")
    await world.login("bob", "new-bob-password")
    # An admin setting it ends all of bob's sessions, the admin's own stays.
    await world.authn.set_password(admin, "bob", "third-bob-password")
    with pytest.raises(errors.Unauthenticated):
        await world.authn.authenticate(desktop)
    await world.caller(admin_token := await world.login("admin", world.admin_password))
    assert admin_token


async def test_granting_or_dropping_admin_rights_takes_effect_at_once(world: World) -> None:
    admin = await admin_caller(world)
    await world.authn.create_user("carol", "carol-password", admin=False)
    token = await world.login("carol", "carol-password")
    carol = await world.caller(token)
    assert not await world.authn.grants.roles(carol.id)
    await world.authn.patch_user(admin, "carol", active=None, admin=True)
    # Her open session holds ClusterAdmin at once (no cached answer outlives the change)...
    assert await world.caller(token) == carol
    assert await world.authn.grants.roles(carol.id) == {1}
    assert (await world.authn.user("carol")).admin
    await world.authn.patch_user(admin, "carol", active=None, admin=False)
    # ...and loses it at once.
    assert not await world.authn.grants.roles(carol.id)
    assert not (await world.authn.user("carol")).admin


async def test_a_weak_password_or_a_bad_name_is_refused_with_the_rule(world: World) -> None:
    admin = await admin_caller(world)
    with pytest.raises(errors.InvalidArgument, match="at least 8"):
        await world.authn.create_user("dave", "short", admin=False)
    with pytest.raises(errors.InvalidArgument, match="username"):
        await world.authn.create_user("-dave", "long-enough", admin=False)
    with pytest.raises(errors.InvalidArgument, match="username"):
        await world.authn.create_user("x" * 65, "long-enough", admin=False)
    with pytest.raises(errors.AlreadyExists):
        await world.authn.create_user("admin", "long-enough", admin=False)
    with pytest.raises(errors.InvalidArgument, match="at least 8"):
        await world.authn.set_password(admin, "admin", "short")
    await world.login("admin", world.admin_password)


# -- tokens ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        None,
        "",
        "x",
        "not-a-session-token-but-the-right-length-for-one-xxxxx",
        "é" * 20,
        "a" * 257,
        "a" * 1_000_000,
        "\x00\r\nSet-Cookie: x",
    ],
)
async def test_a_missing_malformed_or_unknown_token_is_unauthenticated(
    world: World, token: str | None
) -> None:
    before = await world.sessions()
    with pytest.raises(errors.Unauthenticated) as refused:
        await world.authn.authenticate(token)
    assert "det user login" in refused.value.message
    assert (token or "<none>") not in refused.value.message
    assert await world.sessions() == before


async def test_a_live_allocations_token_is_its_task_and_only_while_it_lives(
    world: World,
) -> None:
    caller = await world.authn.authenticate(TASK_TOKEN)
    assert isinstance(caller, TaskCaller) and caller.trial_id == 1
    world.tasks.live.clear()  # the allocation ended
    with pytest.raises(errors.Unauthenticated):
        await world.authn.authenticate(TASK_TOKEN)


async def test_the_agent_token_is_an_agent(world: World) -> None:
    assert isinstance(await world.authn.authenticate(AGENT_TOKEN), AgentCaller)
    assert world.authn.is_agent_token(AGENT_TOKEN)
    assert not world.authn.is_agent_token(AGENT_TOKEN + "x")
    assert not world.authn.is_agent_token("")
    assert not world.authn.is_agent_token(None)


async def test_a_session_token_is_not_an_agent_token(world: World) -> None:
    token = await world.login("admin", world.admin_password)
    assert not world.authn.is_agent_token(token)
