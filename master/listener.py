"""One port for everything: gRPC (HTTP/2 with prior knowledge) and HTTP/1.1 for browsers.

Users configure a single master address. Each accepted connection is sniffed: a
connection that opens with the HTTP/2 client preface is handed to grpclib's protocol,
anything else to uvicorn's HTTP/1.1 protocol serving the Starlette gateway. Only this
module touches the two libraries' protocol classes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import grpclib.server
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from determined.common import errors

log = logging.getLogger(__name__)

_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class _Sniffer(asyncio.Protocol):
    """Buffers the first bytes of a connection, then becomes the right protocol."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._transport: asyncio.Transport | None = None
        self._buffer = b""
        self._target: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self._target is not None:
            self._target.data_received(data)
            return
        self._buffer += data
        n = min(len(self._buffer), len(_H2_PREFACE))
        if self._buffer[:n] != _H2_PREFACE[:n]:
            self._become(self._listener.http_protocol())
        elif n == len(_H2_PREFACE):
            self._become(self._listener.grpc_protocol())

    def _become(self, target: asyncio.Protocol) -> None:
        assert self._transport is not None
        self._target = target
        self._transport.set_protocol(target)
        target.connection_made(self._transport)
        buffered, self._buffer = self._buffer, b""
        target.data_received(buffered)

    def eof_received(self) -> bool | None:
        if self._target is not None:
            return self._target.eof_received()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._target is not None:
            self._target.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._target is not None:
            self._target.pause_writing()

    def resume_writing(self) -> None:
        if self._target is not None:
            self._target.resume_writing()


def bind(host: str, port: int) -> socket.socket:
    """Bind the master's port, with a clear error when something else holds it."""
    # IPPROTO_TCP explicitly: asyncio and grpclib only set TCP_NODELAY on sockets that say
    # so, and Nagle's algorithm would hold each small reply for the peer's delayed ACK.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise errors.FailedPrecondition(
            f"cannot listen on {host}:{port}: {e.strerror}; "
            "is another master running? Choose another port with --port"
        ) from None
    sock.listen(1024)
    sock.setblocking(False)
    return sock


class Listener:
    """Serves a grpclib server and an ASGI app on one bound socket."""

    def __init__(self, grpc_server: grpclib.server.Server, app: Any) -> None:
        self._grpc = grpc_server
        self._config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False)
        self._config.load()
        self._state = ServerState()
        self._server: asyncio.Server | None = None

    def http_protocol(self) -> asyncio.Protocol:
        return H11Protocol(config=self._config, server_state=self._state, app_state={})

    def grpc_protocol(self) -> asyncio.Protocol:
        # grpclib has no public hook for serving a connection it did not accept.
        return self._grpc._protocol_factory()

    async def start(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Sniffer(self), sock=sock)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop accepting, finish HTTP responses in flight, cancel gRPC calls."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        for conn in list(self._state.connections):
            conn.shutdown()
        for handler in list(self._grpc._handlers):
            handler.close()
        for handler in list(self._grpc._handlers):
            await handler.wait_closed()
        for task in list(self._state.tasks):
            task.cancel()
        await asyncio.sleep(0)
