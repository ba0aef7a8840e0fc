"""The CLI's credentials: session tokens cached per master, and how a command gets one.

Tokens live in ``$XDG_CONFIG_HOME/pydet/auth.json`` (default ``~/.config/pydet``), mode
0600, keyed by master address, with the user who logged in last as the active one. A command
uses, in order: the user named by ``det -u NAME``, else ``DET_USER``, else the active user;
that user's cached token, else a login with ``DET_PASS`` (for scripts, as Determined's CLI
accepts) or, for ``-u``, a password prompt. With none of these it stops with "not logged in
to MASTER: run det user login".
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any, cast

from determined.api.gen import v1
from determined.common import client, errors

DEFAULT_USER = "admin"

# Set by `det -u NAME` for this invocation.
_selected: str | None = None


def select_user(name: str | None) -> None:
    global _selected
    _selected = name


def store_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "pydet" / "auth.json"


_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def master_key(address: str) -> str:
    """One key per master: localhost, 127.0.0.1 and ::1 are the same machine's master."""
    host, port = client.parse_address(address)
    return f"{'localhost' if host in _LOOPBACK else host}:{port}"


def _load() -> dict[str, Any]:
    try:
        doc = json.loads(store_path().read_text())
    except (OSError, ValueError):
        return {"masters": {}}
    if not isinstance(doc, dict) or not isinstance(doc.get("masters"), dict):
        return {"masters": {}}
    return cast(dict[str, Any], doc)


def _save(doc: dict[str, Any]) -> None:
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    # A leftover file of that name keeps its mode through O_TRUNC: start from a new one.
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2)
    tmp.replace(path)


def _entry(doc: dict[str, Any], address: str) -> dict[str, Any]:
    key = master_key(address)
    found = doc["masters"].get(key)
    entry: dict[str, Any] = found if isinstance(found, dict) else {}
    doc["masters"][key] = entry
    if not isinstance(entry.get("tokens"), dict):
        entry["tokens"] = {}
    return entry


def remember(address: str, username: str, token: str, *, active: bool) -> None:
    """Cache a session; ``active`` makes its user the default for later commands."""
    doc = _load()
    entry = _entry(doc, address)
    entry["tokens"][username] = token
    if active or "active_user" not in entry:
        entry["active_user"] = username
    _save(doc)


def forget(address: str, username: str) -> None:
    doc = _load()
    entry = _entry(doc, address)
    entry["tokens"].pop(username, None)
    if entry.get("active_user") == username:
        entry.pop("active_user", None)
    _save(doc)


def cached_token(address: str, username: str) -> str | None:
    token = _entry(_load(), address)["tokens"].get(username)
    return token if isinstance(token, str) and token else None


def active_user(address: str) -> str | None:
    user = _entry(_load(), address).get("active_user")
    return user if isinstance(user, str) and user else None


def wanted_user(address: str) -> str | None:
    """Who this command runs as: -u, else DET_USER, else the last user to log in here."""
    return _selected or os.environ.get("DET_USER") or active_user(address)


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
) -> v1.LoginResponse:
    """Log in and cache the session; ``active`` (det user login) makes the user the default,
    while a login for ``-u`` or ``DET_USER`` leaves the default alone."""
    resp = await session.call(
        session.stub.login(v1.LoginRequest(username=username, password=password))
    )
    remember(session.address, username, resp.token, active=active)
    session.token = resp.token
    return resp


async def _not_logged_in(session: client.Session) -> errors.DetError:
    """Why there is no session: not logged in, unless the master is not even there."""
    try:
        await session.call(session.stub.get_master(v1.GetMasterRequest()))
    except errors.Unavailable as e:
        return e
    except errors.DetError:
        pass
    return not_logged_in(session.address)


async def authenticate(session: client.Session) -> None:
    """Give ``session`` a token: a cached one, or a new login when a password is at hand."""
    username = wanted_user(session.address)
    token = cached_token(session.address, username) if username is not None else None
    if username is None or (
        token is None and _selected is None and os.environ.get("DET_PASS") is None
    ):
        raise await _not_logged_in(session)
    if token is None:
        token = (await login(session, username, read_password(username))).token
    session.token = token


async def refresh(session: client.Session) -> bool:
    """After the master refused the cached token: drop it, and log in again if a password
    is at hand without asking (DET_PASS). Whether the session has a new token."""
    username = wanted_user(session.address)
    if username is None:
        return False
    with contextlib.suppress(OSError):
        forget(session.address, username)
    if os.environ.get("DET_PASS") is None:
        return False
    session.token = (await login(session, username, os.environ["DET_PASS"])).token
    return True
