"""How every caller (CLI, harness, agent) reaches the master: one address, one channel.

``DET_MASTER`` is ``host:port`` (an ``http://`` prefix is tolerated); the master serves gRPC
and HTTP on that one port. gRPC failures are turned back into the shared error hierarchy
so callers handle one kind of exception.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import grpclib.client
import grpclib.exceptions

from determined.api.gen import v1
from determined.common import errors, wire

DEFAULT_MASTER = "localhost:8080"
TOKEN_METADATA_KEY = "x-det-token"

T = TypeVar("T")


def master_address(explicit: str | None = None) -> str:
    """The master address from an explicit flag, else ``DET_MASTER``, else the default."""
    return explicit or os.environ.get("DET_MASTER") or DEFAULT_MASTER


def parse_address(address: str) -> tuple[str, int]:
    text = address.strip()
    for prefix in ("http://", "https://", "grpc://"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.rstrip("/")
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, "8080"
    host = host.strip("[]") or "localhost"
    try:
        port_no = int(port)
    except ValueError:
        raise errors.InvalidArgument(
            f"bad master address {address!r}: expected host:port, e.g. localhost:8080"
        ) from None
    return host, port_no


def open_channel(address: str) -> grpclib.client.Channel:
    host, port = parse_address(address)
    return grpclib.client.Channel(host, port, codec=wire.WireCodec())


def metadata(token: str | None) -> dict[str, str]:
    return {TOKEN_METADATA_KEY: token} if token else {}


def translate(exc: BaseException, address: str) -> errors.DetError | None:
    """The shared error for a failed call, or None if ``exc`` is not an RPC failure."""
    if isinstance(exc, grpclib.exceptions.GRPCError):
        cls = errors.BY_GRPC_STATUS.get(exc.status.name, errors.DetError)
        if exc.status.name == "UNAVAILABLE":
            return errors.Unavailable(f"the master at {address} is unavailable: {exc.message}")
        return cls(exc.message or exc.status.name)
    if isinstance(exc, (ConnectionError, OSError, grpclib.exceptions.StreamTerminatedError)):
        return errors.Unavailable(
            f"cannot reach the master at {address} ({exc.__class__.__name__}: {exc}); "
            "is it running? Set DET_MASTER or pass -m/--master to choose another address"
        )
    return None


async def call(awaitable: Awaitable[T], address: str) -> T:
    """Await one RPC, raising the shared error hierarchy instead of transport errors."""
    try:
        return await awaitable
    except Exception as e:
        translated = translate(e, address)
        if translated is None:
            raise
        raise translated from None


class Session:
    """A channel and stub to one master, with the caller's token on every call."""

    def __init__(self, address: str | None = None, *, token: str | None = None) -> None:
        self.address = master_address(address)
        self.token = token
        self._channel: grpclib.client.Channel | None = None

    @property
    def stub(self) -> v1.DeterminedStub:
        if self._channel is None:
            self._channel = open_channel(self.address)
        return v1.DeterminedStub(self._channel, metadata=metadata(self.token))

    async def call(self, awaitable: Awaitable[T]) -> T:
        return await call(awaitable, self.address)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


@contextlib.asynccontextmanager
async def session(
    address: str | None = None, *, token: str | None = None
) -> AsyncIterator[Session]:
    s = Session(address, token=token)
    try:
        yield s
    finally:
        s.close()
