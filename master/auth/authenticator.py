"""Authentication: users, their sessions, the first admin, and what a token stands for.

Every call but Login presents a token. A user's session token is random; the store keeps
only its SHA-256 digest, with an expiry. A task presents its allocation's token, valid while
the allocation lives (the task manager knows it). An agent presents the cluster's agent
token. ``authenticate`` turns a token into a caller or raises ``Unauthenticated``; what the
caller may then do is ``authz``'s business.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import pathlib
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from determined.api.gen import v1
from determined.common import errors, timestamps
from pydet.master import queries
from pydet.master.auth import passwords
from pydet.master.auth.callers import AgentCaller, Caller, TaskCaller, UserCaller
from pydet.master.auth.throttle import LoginThrottle
from pydet.master.store.db import Database

log = logging.getLogger(__name__)

ADMIN = "admin"
ADMIN_PASSWORD_FILE = "admin-password"
AGENT_TOKEN_FILE = "agent-token"
# Determined's default session lifetime.
SESSION_LIFETIME = 7 * 24 * 3600.0
# Sessions kept per user; logging in once more ends the oldest.
MAX_SESSIONS_PER_USER = 100
# Longer is not a token of ours; refused before any lookup.
MAX_TOKEN_LENGTH = 256
_USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_CACHE_ENTRIES = 10_000
# Addresses (with the user they tried) whose slowdown was logged, at most.
_THROTTLED_LOGGED = 1_000
# KDF runs at once; each takes ~16 MiB, so a login flood cannot take the master's memory.
_CONCURRENT_HASHES = 2


class TaskTokens(Protocol):
    def task_caller(self, token: str) -> TaskCaller | None:
        """The live allocation whose token this is, as a caller; None if there is none."""


def write_secret_file(path: pathlib.Path, text: str) -> None:
    """Write a secret readable by its owner only (mode 0600 from the first byte)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    tmp.replace(path)


def read_secret_file(path: pathlib.Path, what: str) -> str:
    try:
        text = path.read_text().strip()
    except OSError as e:
        raise errors.FailedPrecondition(f"cannot read the {what} {path}: {e.strerror}") from None
    if not text:
        raise errors.FailedPrecondition(f"the {what} {path} is empty")
    return text


def load_or_create_agent_token(path: pathlib.Path) -> str:
    """The cluster's agent token from ``path``, generated there (0600) on first start."""
    if not path.exists():
        write_secret_file(path, secrets.token_urlsafe(32))
        log.info("generated the agent token in %s (pass it to agents with --token-file)", path)
    return read_secret_file(path, "agent token file")


def load_or_create_signing_key(path: pathlib.Path) -> str:
    """The webhook signing key kept in ``path``, generated there (0600) on first start."""
    if not path.exists():
        write_secret_file(path, secrets.token_hex(32))
        log.info("generated the webhook signing key in %s", path)
    return read_secret_file(path, "webhook signing key file")


def check_username(name: str) -> str:
    if not _USERNAME.match(name):
        raise errors.InvalidArgument(
            "username: 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter "
            "or digit"
        )
    return name


class Authenticator:
    def __init__(
        self,
        db: Database,
        *,
        tasks: TaskTokens,
        agent_token: str,
        session_lifetime: float = SESSION_LIFETIME,
        throttle: LoginThrottle | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._tasks = tasks
        self._agent_token = agent_token
        self._lifetime = session_lifetime
        self._throttle = throttle or LoginThrottle()
        # (address, user) -> the delay last logged for it; bounded.
        self._throttled: OrderedDict[str, float] = OrderedDict()
        self._clock = clock
        self._hashing = asyncio.Semaphore(_CONCURRENT_HASHES)
        # digest -> (caller, expires_at): sessions checked recently, so that a call costs
        # no database read. Ended sessions are removed from it as they end.
        self._cache: dict[str, tuple[UserCaller, float]] = {}

    # -- the first start ---------------------------------------------------------------------

    async def bootstrap(self, data_dir: pathlib.Path) -> None:
        """Create the ``admin`` user with a generated password if there are no users."""
        await self._dummy_hash()
        row = await self._db.fetch_one("SELECT COUNT(*) AS n FROM users")
        if row is not None and int(row["n"]) > 0:
            return
        password = secrets.token_urlsafe(18)
        path = data_dir / ADMIN_PASSWORD_FILE
        write_secret_file(path, password)
        await self._db.execute(
            "INSERT INTO users (username, password_hash, admin, active, modified_at)"
            " VALUES (?, ?, 1, 1, ?)",
            (ADMIN, await self._hash(password), self._clock()),
        )
        log.info("created user %r; its password is in %s", ADMIN, path)

    async def _dummy_hash(self) -> str:
        # Made once, in a thread: made on the event loop at the first unknown name, it
        # would stall the master and make that refusal slower than a wrong password's.
        return await asyncio.to_thread(passwords.dummy_hash)

    async def _hash(self, password: str) -> str:
        async with self._hashing:
            return await asyncio.to_thread(passwords.hash_password, password)

    async def _verify(self, password: str, stored: str) -> bool:
        async with self._hashing:
            return await asyncio.to_thread(passwords.verify_password, password, stored)

    # -- tokens -------------------------------------------------------------------------------

    async def authenticate(self, token: str | None) -> Caller:
        """The caller a token stands for; ``Unauthenticated`` for a missing or bad one."""
        if not token:
            raise errors.Unauthenticated("no credentials: log in first (det user login)")
        if len(token) > MAX_TOKEN_LENGTH or not token.isascii():
            raise errors.Unauthenticated("malformed token: log in again (det user login)")
        task = self._tasks.task_caller(token)
        if task is not None:
            return task
        if hmac.compare_digest(token.encode(), self._agent_token.encode()):
            return AgentCaller()
        return await self._session(token)

    async def _session(self, token: str) -> UserCaller:
        digest = passwords.token_digest(token)
        now = self._clock()
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > now:
            return cached[0]
        row = await self._db.fetch_one(
            "SELECT s.expires_at, u.id, u.username, u.admin, u.active FROM sessions s"
            " JOIN users u ON u.id = s.user_id WHERE s.token_digest = ?",
            (digest,),
        )
        if row is None:
            ended = await self._db.fetch_one(
                "SELECT id FROM allocations WHERE token = ? AND state != 'RUNNING'", (token,)
            )
            if ended is not None:
                raise errors.Unauthenticated(
                    f"the task token of allocation {ended['id']}, which has ended: a task's "
                    "token is good only while the task runs"
                )
        if row is None or not row["active"]:
            raise errors.Unauthenticated(
                "invalid or revoked session: log in again (det user login)"
            )
        if float(row["expires_at"]) <= now:
            self._cache.pop(digest, None)
            raise errors.Unauthenticated("the session has expired: log in again (det user login)")
        caller = UserCaller(
            id=int(row["id"]),
            username=str(row["username"]),
            admin=bool(row["admin"]),
            session=digest,
        )
        if len(self._cache) >= _CACHE_ENTRIES:
            self._cache.clear()
        self._cache[digest] = (caller, float(row["expires_at"]))
        return caller

    def _log_throttled(self, address: str, username: str, delay: float, failures: int) -> None:
        """A line when an address's logins are slowed further than they were (not one per
        attempt: a flood of guesses does not flood the log)."""
        key = f"{address}\0{username[:64]}"
        if self._throttled.get(key, 0.0) >= delay:
            return
        self._throttled.pop(key, None)
        self._throttled[key] = delay
        while len(self._throttled) > _THROTTLED_LOGGED:
            self._throttled.popitem(last=False)
        log.warning(
            "slowing logins from %s (for %r) to one every %g s after %d failures from there",
            address,
            username[:64],
            delay,
            failures,
        )

    def is_agent_token(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(
            (token or "").encode(), self._agent_token.encode()
        )

    # -- sessions ----------------------------------------------------------------------------

    async def login(self, username: str, password: str, address: str) -> v1.LoginResponse:
        refused = errors.Unauthenticated("invalid username or password")
        if len(username) > 64 or len(password) > passwords.MAX_LENGTH:
            raise refused
        keys = (f"user:{username}", f"addr:{address}")
        # Guessing is slowed per address, and per user across addresses; but a user's
        # count slows only addresses that have failed themselves, so that guesses at a
        # user from elsewhere never keep the user, typing the right password from an
        # address that has not failed, waiting.
        failed_here = self._throttle.failures(keys[1])
        delay = self._throttle.delay(keys if failed_here else keys[1:])
        # Counted as a failure until the password proves right: attempts sent all at once
        # then wait as long as attempts sent one after another.
        self._throttle.failed(keys)
        if delay:
            self._log_throttled(address, username, delay, failed_here)
            await asyncio.sleep(delay)
        row = await self._db.fetch_one("SELECT * FROM users WHERE username = ?", (username,))
        stored = str(row["password_hash"]) if row is not None else await self._dummy_hash()
        ok = await self._verify(password, stored)
        if row is None or not ok:
            log.info("refused a login for %r from %s", username[:64], address)
            raise refused
        self._throttle.forgive(keys)
        if not row["active"]:
            raise errors.PermissionDenied(
                f"user {username} is deactivated; an admin can run det user activate {username}"
            )
        self._throttle.succeeded(keys[0])
        token = passwords.new_token()
        now = self._clock()
        # The user's expired sessions go, and at most MAX_SESSIONS_PER_USER stay, so that
        # logging in again and again cannot grow the store without bound.
        await self._db.transaction(
            [
                (
                    "DELETE FROM sessions WHERE user_id = ? AND (expires_at <= ? OR token_digest"
                    " NOT IN (SELECT token_digest FROM sessions WHERE user_id = ?"
                    " ORDER BY created_at DESC LIMIT ?))",
                    (int(row["id"]), now, int(row["id"]), MAX_SESSIONS_PER_USER - 1),
                ),
                (
                    "INSERT INTO sessions (token_digest, user_id, created_at, expires_at)"
                    " VALUES (?, ?, ?, ?)",
                    (passwords.token_digest(token), int(row["id"]), now, now + self._lifetime),
                ),
            ]
        )
        self._uncache(int(row["id"]))
        log.info("user %s logged in from %s", username, address)
        return v1.LoginResponse(token=token, user=await self.user(username))

    async def logout(self, caller: UserCaller) -> None:
        self._cache.pop(caller.session, None)
        await self._db.execute("DELETE FROM sessions WHERE token_digest = ?", (caller.session,))

    def _uncache(self, user_id: int, *, keep: str = "") -> None:
        """Forget a user's checked sessions: the next call reads the store again."""
        for digest, (cached, _) in list(self._cache.items()):
            if cached.id == user_id and digest != keep:
                del self._cache[digest]

    def forget_cached_sessions(self, user_id: int) -> None:
        """Read the user's sessions from the store again at their next call (after a change
        to the user, such as a new name, that their callers carry)."""
        self._uncache(user_id)

    async def _end_sessions(self, user_id: int, *, keep: str = "") -> None:
        self._uncache(user_id, keep=keep)
        await self._db.execute(
            "DELETE FROM sessions WHERE user_id = ? AND token_digest != ?", (user_id, keep)
        )

    # -- users -------------------------------------------------------------------------------

    async def me(self, caller: UserCaller) -> v1.User:
        return await self.user(caller.username)

    async def user(self, username: str) -> v1.User:
        row = await queries.user(self._db, username)
        if row is None:
            raise errors.NotFound(f"user {username} not found")
        return user_message(row)

    async def users(self) -> list[v1.User]:
        return [user_message(r) for r in await queries.users(self._db)]

    async def create_user(self, username: str, password: str, *, admin: bool) -> v1.User:
        check_username(username)
        passwords.check_strength(password)
        if await self._db.fetch_one("SELECT id FROM users WHERE username = ?", (username,)):
            raise errors.AlreadyExists(f"user {username} already exists")
        await self._db.execute(
            "INSERT INTO users (username, password_hash, admin, active, modified_at)"
            " VALUES (?, ?, ?, 1, ?)",
            (username, await self._hash(password), int(admin), self._clock()),
        )
        log.info("created user %s (admin: %s)", username, admin)
        return await self.user(username)

    async def set_password(self, caller: UserCaller, username: str, password: str) -> None:
        """Change a password; the user's other sessions end (the caller's own one stays)."""
        passwords.check_strength(password)
        target = await self.user(username)
        await self._db.execute(
            "UPDATE users SET password_hash = ?, modified_at = ? WHERE id = ?",
            (await self._hash(password), self._clock(), target.id),
        )
        await self._end_sessions(target.id, keep=caller.session)
        log.info("%s changed the password of %s", caller.username, username)

    async def patch_user(
        self, caller: UserCaller, username: str, *, active: bool | None, admin: bool | None
    ) -> v1.User:
        target = await self.user(username)
        if target.id == caller.id and (active is False or admin is False):
            raise errors.FailedPrecondition(
                "you cannot deactivate yourself or drop your own admin rights"
            )
        if active is not None:
            await self._db.execute(
                "UPDATE users SET active = ?, modified_at = ? WHERE id = ?",
                (int(active), self._clock(), target.id),
            )
            if not active:
                await self._end_sessions(target.id)
        if admin is not None:
            await self._db.execute(
                "UPDATE users SET admin = ?, modified_at = ? WHERE id = ?",
                (int(admin), self._clock(), target.id),
            )
            await self._end_sessions(target.id)
        log.info(
            "%s updated user %s (active=%s admin=%s)", caller.username, username, active, admin
        )
        return await self.user(username)


def user_message(row: queries.UserRow) -> v1.User:
    """A user as the API shows it."""
    return v1.User(
        id=row.id,
        username=row.username,
        admin=row.admin,
        active=row.active,
        modified_at=timestamps.to_datetime(row.modified_at),
    )
