"""The door of the gRPC API: every call is authenticated and authorized before its handler
sees the request, and the shared errors become gRPC statuses here and nowhere else.

``Guarded`` wraps a grpclib servicer (anything with ``__mapping__``). For each call it reads
the token from the ``x-det-token`` metadata, turns it into a caller (``auth``), and checks
the first request message against the RPC's rule (``authz``) as the handler receives it. The
caller is available to handlers through ``current_caller()``.
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpclib.const
import grpclib.server
from grpclib.exceptions import GRPCError

from determined.common import errors
from determined.common.client import TOKEN_METADATA_KEY
from pydet.master.auth import rules as authz
from pydet.master.auth.authenticator import Authenticator
from pydet.master.auth.callers import Caller

log = logging.getLogger(__name__)

AGENT_RPCS = frozenset({"/v1.Agents/Connect"})

_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("caller", default=None)
_peer: contextvars.ContextVar[str] = contextvars.ContextVar("peer", default="")


def current_caller() -> Caller:
    """The authenticated caller of the RPC being handled."""
    caller = _caller.get()
    if caller is None:
        raise errors.Unauthenticated("no credentials: log in first (det user login)")
    return caller


def current_peer() -> str:
    """The client address of the RPC being handled ("" when unknown)."""
    return _peer.get()


def token_of(metadata: Any) -> str | None:
    value = metadata.get(TOKEN_METADATA_KEY) if metadata is not None else None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    return value if isinstance(value, str) else None


class _CheckedStream:
    """A server stream whose first received message is authorized before it is returned."""

    def __init__(
        self, stream: grpclib.server.Stream[Any, Any], check: Callable[[Any], Awaitable[None]]
    ) -> None:
        self._stream = stream
        self._check: Callable[[Any], Awaitable[None]] | None = check

    async def recv_message(self) -> Any:
        message = await self._stream.recv_message()
        if self._check is not None:
            if message is None:
                # Nothing to check the rule against: the handler must not run without one.
                raise errors.InvalidArgument("the call carried no request message")
            check, self._check = self._check, None
            await check(message)
        return message

    def __aiter__(self) -> _CheckedStream:
        return self

    async def __anext__(self) -> Any:
        message = await self.recv_message()
        if message is None:
            raise StopAsyncIteration
        return message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Guarded:
    """A servicer whose every handler is behind authentication and authorization."""

    def __init__(self, servicer: Any, auth: Authenticator, lookup: authz.Lookup) -> None:
        self._servicer = servicer
        self._auth = auth
        self._lookup = lookup

    async def _authenticate(self, rpc: str, token: str | None) -> Caller:
        if rpc in AGENT_RPCS and not self._auth.is_agent_token(token):
            peer = current_peer() or "an unknown address"
            log.warning("refused an agent from %s: missing or wrong agent token", peer)
            raise errors.Unauthenticated(
                "missing or wrong agent token: start det-agent with --token-file naming the "
                "master's agent token file (security.agent_token_file)"
            )
        return await self._auth.authenticate(token)

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        mapping: dict[str, grpclib.const.Handler] = self._servicer.__mapping__()
        return {
            path: handler._replace(func=self._wrap(path, handler.func))
            for path, handler in mapping.items()
        }

    def _wrap(
        self, rpc: str, func: Callable[[Any], Awaitable[None]]
    ) -> Callable[[grpclib.server.Stream[Any, Any]], Awaitable[None]]:
        @functools.wraps(func)
        async def guarded(stream: grpclib.server.Stream[Any, Any]) -> None:
            peer = stream.peer.addr() if stream.peer is not None else None
            _peer.set(str(peer[0]) if peer else "")
            try:
                if rpc in authz.OPEN:
                    await func(stream)
                    return
                caller = await self._authenticate(rpc, token_of(stream.metadata))
                _caller.set(caller)

                async def check(message: Any) -> None:
                    await authz.authorize(rpc, caller, message, self._lookup)

                await func(_CheckedStream(stream, check))
            except errors.DetError as e:
                raise GRPCError(grpclib.const.Status[e.grpc_status], e.message) from None

        return guarded
