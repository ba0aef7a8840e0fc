"""The CLI's credentials: session tokens cached per master, and how a command gets one.

The cache itself (``$XDG_CONFIG_HOME/pydet/auth.json``) is ``determined.common.credentials``,
shared with the Python SDK. A command
uses, in order: the user named by ``det -u NAME``, else ``DET_USER``, else the active user;
that user's cached token, else ``DET_USER_TOKEN`` (an access token, as Determined's CLI
honours it), else a login with ``DET_PASS`` (for scripts, as Determined's CLI accepts) or,
for ``-u``, a password prompt. With none of these it stops with "not logged in to MASTER:
run det user login".
"""

from __future__ import annotations

import contextlib
import getpass
import os
import sys

from determined.common import client, credentials, errors

# The session cache lives in the harness, where the Python SDK shares it.
from determined.common.credentials import DEFAULT_USER as DEFAULT_USER
from determined.common.credentials import active_user as active_user
from determined.common.credentials import cached_token as cached_token
from determined.common.credentials import cached_users as cached_users
from determined.common.credentials import forget as forget
from determined.common.credentials import master_key as master_key
from determined.common.credentials import remember as remember
from determined.common.credentials import store_path as store_path

# Set by `det -u NAME` for this invocation.
_selected: str | None = None


def select_user(name: str | None) -> None:
    global _selected
    _selected = name


def wanted_user(address: str) -> str | None:
    """Who this command runs as: -u, else DET_USER, else the last user to log in here."""
    return credentials.wanted_user(address, _selected)


def password_at_hand() -> bool:
    """Whether a login may be tried without a cached session: DET_PASS, or ``-u`` (which
    asks for the password)."""
    return _selected is not None or os.environ.get("DET_PASS") is not None


def not_logged_in(address: str, why: str = "") -> errors.Unauthenticated:
    return errors.Unauthenticated(
        f"not logged in to {address}{f' ({why})' if why else ''}: run det user login"
    )


def read_password(username: str) -> str:
    """DET_PASS when set (scripts), else a prompt without echo."""
    env = os.environ.get("DET_PASS")
    if env is not None:
        return env
    if not sys.stdin.isatty():
        raise errors.Unauthenticated(
            f"a password for {username} is needed and there is no terminal to ask it on: "
            "set DET_PASS or run det user login first"
        )
    return getpass.getpass(f"Password for user '{username}': ")


async def login(
    session: client.Session, username: str, password: str, *, active: bool = False
) -> str:
    """Log in and cache the session (see ``credentials.login``); returns the token."""
    return await credentials.login(session, username, password, active=active)


async def authenticate(session: client.Session) -> None:
    """Give ``session`` a token: a cached one, ``DET_USER_TOKEN``, or a new login when a
    password is at hand."""
    username = wanted_user(session.address)
    token = cached_token(session.address, username) if username is not None else None
    if token is None:
        token = credentials.env_token(_selected)
        if token is not None:
            session.token = token
            return
    if username is None or (
        token is None and _selected is None and os.environ.get("DET_PASS") is None
    ):
        raise await credentials.why_not_logged_in(session, "run det user login")
    if token is None:
        token = await login(session, username, read_password(username))
    session.token = token


async def refresh(session: client.Session) -> bool:
    """After the master refused the token: drop it if it was cached, and log in again if a
    password is at hand without asking (DET_PASS). Whether the session has a new token."""
    if session.token is not None and session.token == credentials.env_token(_selected):
        return False  # the script's own DET_USER_TOKEN: nothing to refresh it from
    username = wanted_user(session.address)
    if username is None:
        return False
    with contextlib.suppress(OSError):
        forget(session.address, username)
    if os.environ.get("DET_PASS") is None:
        return False
    session.token = await login(session, username, os.environ["DET_PASS"])
    return True


def why_refused(token: str | None, refusal: errors.Unauthenticated) -> str:
    """Why the master refused the token, in the words a user needs: an access token's own
    reason (revoked, expired, its user deactivated), else that the session ended."""
    if credentials.is_access_token(token):
        return refusal.message
    return "the session has expired or was revoked"
