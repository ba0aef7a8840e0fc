"""Access tokens: a user's long-lived bearer tokens for scripts and CI (``det token``).

A token is random, begins with ``PREFIX`` (so that the master, the CLI and secret scanners
tell it from a session token), and is shown once, when it is made; the store keeps its
SHA-256 digest, its user, description, creation and expiry times, and when it was revoked.
It acts as its user, with the user's roles, until it expires or is revoked, or while its
user is deactivated; a refused token says which of these it is.

Lifespans are Determined's: a Go duration (``72h``, ``30m``, ``2s``), ``-1`` for the longest
allowed, or the master's default (``security.token``: ``default_lifespan_days`` and
``max_lifespan_days``, 30 days each; -1 means Go's longest duration, 106751 days).
"""

from __future__ import annotations

import datetime
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from determined.api.gen import v1
from determined.common import errors, timestamps
from pydet.master.auth import passwords
from pydet.master.auth.callers import UserCaller
from pydet.master.store.db import Database, Row

log = logging.getLogger(__name__)

PREFIX = "det_at_"
DAY = 24 * 3600.0
# Determined's cap: the longest Go duration, in whole days.
MAX_ALLOWED_DAYS = 106751
DEFAULT_DAYS = 30
MAX_DESCRIPTION = 1000

_GO_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


@dataclass(frozen=True)
class Lifespans:
    """``security.token`` of the master's config, in days (-1: the longest allowed)."""

    default_days: int = DEFAULT_DAYS
    max_days: int = DEFAULT_DAYS

    @property
    def default(self) -> float:
        return _days(self.default_days) * DAY

    @property
    def longest(self) -> float:
        return _days(self.max_days) * DAY


def _days(days: int) -> int:
    return MAX_ALLOWED_DAYS if days == -1 else days


def go_duration(text: str) -> float:
    """Seconds in a Go duration string ("1h30m", "2s", "-5m"); ``InvalidArgument`` if it
    is not one."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    total, pos = 0.0, 0
    for part in _GO_PART.finditer(body):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _GO_UNITS[part.group(2)]
        pos = part.end()
    if not body or pos != len(body):
        raise errors.InvalidArgument(
            f"lifespan: {text!r} is not a duration (a number and a unit, as in 72h, 30m or 2s;"
            " -1 for the longest allowed)"
        )
    return sign * total


def lifespan_seconds(text: str | None, lifespans: Lifespans) -> float:
    """How long a new token lasts, from the request's ``lifespan``."""
    if text is None:
        return lifespans.default
    if text.strip() == "-1":
        return lifespans.longest
    seconds = go_duration(text)
    if seconds <= 0:
        raise errors.InvalidArgument(
            f"lifespan: {text!r} must be more than 0 (or -1 for the longest allowed)"
        )
    if seconds > lifespans.longest:
        raise errors.InvalidArgument(
            f"lifespan: {text!r} is longer than the master allows ({_days(lifespans.max_days)}"
            " days, security.token.max_lifespan_days)"
        )
    return seconds


def _utc(seconds: float) -> str:
    when = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


_COLUMNS = "t.id, t.user_id, u.username, t.description, t.created_at, t.expires_at, t.revoked_at"


def token_info(row: Row) -> v1.TokenInfo:
    revoked_at = row["revoked_at"]
    return v1.TokenInfo(
        id=int(row["id"]),
        user_id=int(row["user_id"]),
        username=str(row["username"]),
        expiry=timestamps.to_datetime(float(row["expires_at"])),
        created_at=timestamps.to_datetime(float(row["created_at"])),
        token_type=v1.TokenType.ACCESS_TOKEN,
        revoked=revoked_at is not None,
        revoked_at=None if revoked_at is None else timestamps.to_datetime(float(revoked_at)),
        description=str(row["description"]),
    )


class AccessTokens:
    def __init__(
        self,
        db: Database,
        *,
        lifespans: Lifespans | None = None,
        clock: Callable[[], float] = time.time,
        forget: Callable[[int], None] = lambda token_id: None,
    ) -> None:
        self._db = db
        self._lifespans = lifespans or Lifespans()
        self._clock = clock
        # Told when a token stops working before its time (revoked), so that no cached
        # answer outlives it.
        self._forget = forget

    async def create(
        self, user_id: int, *, lifespan: str | None, description: str, by: str
    ) -> v1.PostAccessTokenResponse:
        if len(description) > MAX_DESCRIPTION:
            raise errors.InvalidArgument(f"description: at most {MAX_DESCRIPTION} characters")
        seconds = lifespan_seconds(lifespan, self._lifespans)
        user = await self._db.fetch_one("SELECT username FROM users WHERE id = ?", (user_id,))
        if user is None:
            raise errors.NotFound(f"user {user_id} not found")
        token = PREFIX + passwords.new_token()
        now = self._clock()
        token_id = await self._db.execute(
            "INSERT INTO access_tokens (user_id, token_digest, description, created_at,"
            " expires_at) VALUES (?, ?, ?, ?, ?)",
            (user_id, passwords.token_digest(token), description, now, now + seconds),
        )
        log.info(
            "%s created access token %d for %s (expires %s)",
            by,
            token_id,
            user["username"],
            _utc(now + seconds),
        )
        return v1.PostAccessTokenResponse(token=token, token_id=token_id)

    async def infos(
        self,
        *,
        user_id: int | None,
        token_ids: list[int],
        show_inactive: bool,
        offset: int = 0,
        limit: int = 0,
    ) -> list[v1.TokenInfo]:
        """Tokens by id; only ``user_id``'s when given, only working ones unless
        ``show_inactive``."""
        where: list[str] = ["1 = 1"]
        params: list[object] = []
        if user_id is not None:
            where.append("t.user_id = ?")
            params.append(user_id)
        if token_ids:
            where.append(f"t.id IN ({', '.join('?' for _ in token_ids)})")
            params.extend(token_ids)
        if not show_inactive:
            where.append("t.revoked_at IS NULL AND t.expires_at > ?")
            params.append(self._clock())
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM access_tokens t JOIN users u ON u.id = t.user_id"
            f" WHERE {' AND '.join(where)} ORDER BY t.id LIMIT ? OFFSET ?",
            (*params, limit if limit > 0 else -1, max(offset, 0)),
        )
        return [token_info(r) for r in rows]

    async def info(self, token_id: int) -> v1.TokenInfo:
        row = await self._db.fetch_one(
            f"SELECT {_COLUMNS} FROM access_tokens t JOIN users u ON u.id = t.user_id"
            " WHERE t.id = ?",
            (token_id,),
        )
        if row is None:
            raise errors.NotFound(f"access token {token_id} not found")
        return token_info(row)

    async def patch(
        self, token_id: int, *, description: str | None, revoke: bool, by: str
    ) -> v1.TokenInfo:
        """Change a working token's description, or revoke it (at once, for good)."""
        info = await self.info(token_id)
        now = self._clock()
        if info.revoked:
            raise errors.FailedPrecondition(
                f"access token {token_id} was revoked at"
                f" {_utc(timestamps.to_seconds(info.revoked_at) or 0.0)}; it cannot be changed"
            )
        expiry = timestamps.to_seconds(info.expiry) or 0.0
        if expiry <= now:
            raise errors.FailedPrecondition(
                f"access token {token_id} expired at {_utc(expiry)}; it cannot be changed"
            )
        if description is not None:
            if len(description) > MAX_DESCRIPTION:
                raise errors.InvalidArgument(f"description: at most {MAX_DESCRIPTION} characters")
            await self._db.execute(
                "UPDATE access_tokens SET description = ? WHERE id = ?", (description, token_id)
            )
        if revoke:
            await self._db.execute(
                "UPDATE access_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now, token_id),
            )
            self._forget(token_id)
            log.info("%s revoked access token %d of %s", by, token_id, info.username)
        return await self.info(token_id)

    async def caller(self, token: str) -> tuple[UserCaller, float]:
        """The user a working token acts as, and when it expires; ``Unauthenticated``
        saying why for a token that does not work."""
        digest = passwords.token_digest(token)
        row = await self._db.fetch_one(
            "SELECT t.id, t.expires_at, t.revoked_at, u.id AS user_id, u.username, u.active"
            " FROM access_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_digest = ?",
            (digest,),
        )
        if row is None:
            raise errors.Unauthenticated(
                "unknown access token: not one this master made, or mistyped; det token create"
                " makes one"
            )
        token_id = int(row["id"])
        if row["revoked_at"] is not None:
            raise errors.Unauthenticated(
                f"access token {token_id} was revoked at {_utc(float(row['revoked_at']))};"
                " det token create makes a new one"
            )
        expires_at = float(row["expires_at"])
        if expires_at <= self._clock():
            raise errors.Unauthenticated(
                f"access token {token_id} expired at {_utc(expires_at)}; det token create"
                " makes a new one"
            )
        if not row["active"]:
            raise errors.Unauthenticated(
                f"access token {token_id} belongs to user {row['username']}, who is deactivated"
            )
        caller = UserCaller(
            id=int(row["user_id"]),
            username=str(row["username"]),
            session=digest,
            access_token=token_id,
        )
        return caller, expires_at
