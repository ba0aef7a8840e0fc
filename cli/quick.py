"""The CLI's light calls, for the commands whose whole run should cost little more than the
interpreter's start (`det cmd run`): the same gRPC calls through ``determined.api.lite`` on a
blocking channel (``determined.api.channel``), which import in a few tens of milliseconds
where the generated API and grpclib's asyncio client take several hundred.

Credentials are every command's (``auth``): ``-u``, ``DET_USER`` or the active user; the
cached session, else a login with ``DET_PASS``. A refused session is renewed and the call
made again only while the master has answered nothing, as ``rpc.run`` does.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from determined.api import lite as v1
from determined.common import client, credentials, errors
from pydet.cli import auth


class Session:
    def __init__(self, master: str | None) -> None:
        self.address = client.master_address(master)
        self._channel = client.blocking_channel(self.address)
        self._token: str | None = None
        self.answered = 0

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._channel.close()

    def _stub(self) -> v1.Stub:
        return v1.stub(
            self._channel.unary,
            stream=self._channel.stream,
            metadata=client.metadata(self._token),
        )

    def _translated(self, e: Exception) -> Exception:
        found = client.translate(e, self.address)
        return e if found is None else found

    def login(self) -> None:
        """Take the cached session, or log in with the password at hand."""
        username = auth.wanted_user(self.address)
        token = credentials.cached_token(self.address, username) if username else None
        if username is None or (token is None and not auth.password_at_hand()):
            raise auth.not_logged_in(self.address)
        self._token = token or self._login(username, auth.read_password(username))

    def _login(self, username: str, password: str) -> str:
        self._token = None
        request = v1.LoginRequest(username=username, password=password)
        try:
            token = str(self._stub().login(request).token)
        except Exception as e:
            raise self._translated(e) from None
        credentials.remember(self.address, username, token, active=False)
        return token

    def _renewed(self) -> bool:
        """After the master refused the session: a new one, if nothing was answered yet
        and a password is at hand without asking."""
        username = auth.wanted_user(self.address)
        if self.answered or username is None or os.environ.get("DET_PASS") is None:
            return False
        with contextlib.suppress(OSError):
            credentials.forget(self.address, username)
        self._token = self._login(username, os.environ["DET_PASS"])
        return True

    def call(self, name: str, message: Any) -> Any:
        for attempt in (1, 2):
            try:
                reply = getattr(self._stub(), name)(message)
            except Exception as e:
                found = self._translated(e)
                if isinstance(found, errors.Unauthenticated) and attempt == 1 and self._renewed():
                    continue
                raise found from None
            self.answered += 1
            return reply
        raise AssertionError("unreachable")

    def stream(self, name: str, message: Any) -> Iterator[Any]:
        try:
            for reply in getattr(self._stub(), name)(message):
                self.answered += 1
                yield reply
        except Exception as e:
            raise self._translated(e) from None
