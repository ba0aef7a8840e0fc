"""Who is logged in to which master: the session cache the CLI and the Python SDK share.

Tokens live in ``$XDG_CONFIG_HOME/pydet/auth.json`` (default ``~/.config/pydet``), mode
0600, keyed by master address, with the user who logged in last as the active one. ``det
user login`` (and ``det token login``) writes it; ``det`` commands and
``determined.experimental.client`` read it, so a script run after ``det user login`` needs
no password. Scripts may set ``DET_USER`` and ``DET_USER_TOKEN`` (an access token) instead.
Only the standard library is imported here: training code may import the SDK, and the
harness stays light.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from determined.common import errors

if TYPE_CHECKING:
    from determined.common import client

DEFAULT_USER = "admin"


def store_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "pydet" / "auth.json"


_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def master_key(address: str) -> str:
    """One key per master: localhost, 127.0.0.1 and ::1 are the same machine's master."""
    from determined.common import client

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


def cached_users(address: str) -> list[str]:
    """The users with a session cached for the master at ``address``."""
    tokens = _entry(_load(), address)["tokens"]
    return sorted(name for name, token in tokens.items() if isinstance(token, str) and token)


def active_user(address: str) -> str | None:
    user = _entry(_load(), address).get("active_user")
    return user if isinstance(user, str) and user else None


ACCESS_TOKEN_PREFIX = "det_at_"


def is_access_token(token: str | None) -> bool:
    """Whether ``token`` is an access token (``det token create``), not a session's."""
    return bool(token) and str(token).startswith(ACCESS_TOKEN_PREFIX)


def env_token(selected: str | None = None) -> str | None:
    """``DET_USER_TOKEN``, as Determined's CLI and SDK honour it: the token of ``DET_USER``,
    used when that user has no cached session, unless another user is asked for (``det -u``,
    ``login(user=...)``). Without ``DET_USER`` it is used as the only credential at hand:
    the master knows whose it is."""
    token = os.environ.get("DET_USER_TOKEN")
    if not token:
        return None
    env_user = os.environ.get("DET_USER")
    if selected is not None and selected != env_user:
        return None
    return token


def wanted_user(address: str, selected: str | None = None) -> str | None:
    """Who to act as: ``selected`` (``det -u``, ``login(user=...)``), else ``DET_USER``,
    else the last user to log in to this master."""
    return selected or os.environ.get("DET_USER") or active_user(address)


async def login(
    session: client.Session, username: str, password: str, *, active: bool = False
) -> str:
    """Log in, cache the session and give its token to ``session``; ``active`` makes the user
    the default for later commands, while a login for ``-u`` or ``DET_USER`` leaves the
    default alone. Returns the token."""
    from determined.api.gen import v1

    resp = await session.call(
        session.stub.login(v1.LoginRequest(username=username, password=password))
    )
    remember(session.address, username, resp.token, active=active)
    session.token = resp.token
    return str(resp.token)


async def why_not_logged_in(session: client.Session, how: str) -> errors.DetError:
    """Why there is no session: not logged in (``how`` says what to do), unless the master
    is not even there."""
    from determined.api.gen import v1

    try:
        await session.call(session.stub.get_master(v1.GetMasterRequest()))
    except errors.Unavailable as e:
        return e
    except errors.DetError:
        pass
    return errors.Unauthenticated(f"not logged in to {session.address}: {how}")
