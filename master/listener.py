"""One port for everything: gRPC (HTTP/2 with prior knowledge) and HTTP/1.1 for browsers.

Users configure a single master address. Each accepted connection is sniffed: a
connection that opens with the HTTP/2 client preface is handed to grpclib's protocol,
anything else to uvicorn's HTTP/1.1 protocol serving the Starlette gateway. With TLS the
sniffing happens after the handshake. Only this module touches the two libraries'
protocol classes.

The listener also keeps any one client from exhausting the master's file descriptors: it
accepts connections itself, so that it counts each one (per client address and in all)
before any byte is read, and a sweep closes connections that stay quiet too long.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import pathlib
import resource
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

import grpclib.protocol
import grpclib.server
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from determined.common import errors

log = logging.getLogger(__name__)

_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# A connection asked to close that has not gone after this long is cut (a peer that stops
# reading would otherwise keep it open while its unsent bytes wait).
_CLOSE_GRACE = 5.0
# Kernel keepalive probes find peers that vanished without closing (power loss, a cut
# cable): the first after a minute of silence, then every 10 s, given up after 6 misses.
_KEEPALIVE = {"TCP_KEEPIDLE": 60, "TCP_KEEPINTVL": 10, "TCP_KEEPCNT": 6}
# File descriptors kept back from connections: the database, logs, checkpoints.
_RESERVED_FDS = 1024


@dataclass(frozen=True)
class Limits:
    """How many connections the master holds, and how long it waits for a quiet one.

    ``first_request_timeout`` bounds the time from accept to the first request (the TLS
    handshake, then a gRPC call's headers or a whole HTTP/1.1 request head), and any later
    wait between HTTP/1.1 requests. An HTTP/2 connection with no call in flight (pings do
    not count, as in gRPC's ``max_connection_idle``) is closed after ``idle_timeout``;
    streams and long polls in flight keep it open. ``total`` 0 takes it from the
    file-descriptor limit.
    """

    per_address: int = 256
    total: int = 0
    first_request_timeout: float = 10.0
    idle_timeout: float = 300.0


def raise_fd_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, e)
    return _soft_fd_limit()


def _soft_fd_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def default_total(fd_limit: int) -> int:
    """Connections allowed in all: the open-file limit less what the master needs besides."""
    return max(16, fd_limit - min(_RESERVED_FDS, fd_limit // 4))


def server_tls_context(cert: pathlib.Path, key: pathlib.Path) -> ssl.SSLContext:
    """The master's TLS context from PEM files, with a message naming what is wrong."""
    for what, path in (("cert", cert), ("key", key)):
        try:
            path.read_bytes()
        except OSError as e:
            raise errors.FailedPrecondition(
                f"security.tls.{what}: cannot read {path}: {e.strerror or e}"
            ) from None

    def no_password() -> bytes:
        # Without a callback OpenSSL would prompt on the terminal and block the start.
        raise errors.FailedPrecondition(
            f"security.tls.key: {key} is encrypted; give the master an unencrypted key "
            "that only its user can read"
        )

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key, password=no_password)
    except ssl.SSLError as e:
        if e.reason == "KEY_VALUES_MISMATCH":
            msg = f"security.tls: the key {key} does not belong to the certificate {cert}"
        else:
            msg = (
                f"security.tls: cannot load the certificate {cert} with the key {key} "
                f"({e.reason or e}); both must be PEM files"
            )
        raise errors.FailedPrecondition(msg) from None
    # The server's order wins: browsers, which offer h2 first, get HTTP/1.1 (the gateway),
    # while gRPC clients offer only h2 and get it. The sniffer still decides per connection.
    ctx.set_alpn_protocols(["http/1.1", "h2"])
    return ctx


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class _Coalescing(asyncio.Transport):
    """A transport that sends everything written in one turn of the event loop at once.

    grpclib writes each frame as soon as it is built: a unary reply is three writes
    (headers, data, trailers), and each write to an idle socket is a system call that, on
    loopback, also runs the peer's receive path. Sending a turn's writes together costs one
    call per connection and per turn. Everything else goes to the wrapped transport.
    """

    def __init__(self, inner: asyncio.Transport) -> None:
        super().__init__()
        self._inner = inner
        self._pending: list[bytes] = []
        self._loop = asyncio.get_running_loop()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self._inner.is_closing():
            self._inner.write(b"".join(pending))

    def get_write_buffer_size(self) -> int:
        return self._inner.get_write_buffer_size() + sum(map(len, self._pending))

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._inner.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._inner.set_write_buffer_limits(high, low)

    def can_write_eof(self) -> bool:
        return self._inner.can_write_eof()

    def write_eof(self) -> None:
        self._flush()
        self._inner.write_eof()

    def close(self) -> None:
        self._flush()
        self._inner.close()

    def abort(self) -> None:
        self._pending = []
        self._inner.abort()

    def is_closing(self) -> bool:
        return self._inner.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._inner.get_extra_info(name, default)

    def is_reading(self) -> bool:
        return self._inner.is_reading()

    def pause_reading(self) -> None:
        self._inner.pause_reading()

    def resume_reading(self) -> None:
        self._inner.resume_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._inner.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._inner.get_protocol()


class _Sniffer(asyncio.Protocol):
    """One connection: buffers its first bytes, then forwards to the right protocol.

    It stays the transport's protocol for the connection's whole life, so that the
    listener learns when the connection ends and can tell whether it is busy.
    """

    def __init__(self, listener: Listener, host: str, accepted: float) -> None:
        self._listener = listener
        self.host = host
        self._transport: asyncio.Transport | None = None
        self._buffer = b""
        self._target: asyncio.Protocol | None = None
        # Since when nothing happened that keeps the connection open; what was seen last.
        self._quiet_since = accepted
        self._seen: object = None
        self._closing_since: float | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if self._target is not None:
            self._target.data_received(data)
            self._reclaim()
            return
        self._buffer += data
        n = min(len(self._buffer), len(_H2_PREFACE))
        if self._buffer[:n] != _H2_PREFACE[:n]:
            self._become(self._listener.http_protocol())
        elif n == len(_H2_PREFACE):
            self._become(self._listener.grpc_protocol(), coalesce=True)

    def _become(self, target: asyncio.Protocol, *, coalesce: bool = False) -> None:
        assert self._transport is not None
        self._target = target
        target.connection_made(_Coalescing(self._transport) if coalesce else self._transport)
        buffered, self._buffer = self._buffer, b""
        target.data_received(buffered)
        self._reclaim()

    def _reclaim(self) -> None:
        """An HTTP/1.1 request upgraded to a WebSocket: uvicorn made the WebSocket protocol
        the transport's; it becomes this connection's target instead, so that the sniffer
        still sees the connection's end and counts it."""
        transport = self._transport
        if transport is None:
            return
        protocol = transport.get_protocol()
        if protocol is not self and isinstance(protocol, asyncio.Protocol):
            self._target = protocol
            transport.set_protocol(self)

    def eof_received(self) -> bool | None:
        if self._target is not None:
            return self._target.eof_received()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._listener.forget(self)
        if self._target is not None:
            self._target.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._target is not None:
            self._target.pause_writing()

    def resume_writing(self) -> None:
        if self._target is not None:
            self._target.resume_writing()

    def _activity(self) -> tuple[bool, object]:
        """Whether a call or request is in flight, and a marker that changes with each new
        one (several may start and end between two sweeps); None before the first."""
        target = self._target
        if isinstance(target, grpclib.protocol.H2Protocol):
            processor = getattr(target, "processor", None)
            if processor is None:
                return False, None
            return bool(processor.streams), target.connection.streams_started or None
        if isinstance(target, H11Protocol):
            cycle = target.cycle
            return cycle is not None and not cycle.response_complete, cycle
        if target is not None:
            return True, target  # a WebSocket: in use while it is open
        return False, None

    def sweep(self, now: float, limits: Limits) -> None:
        """Close the connection if it stayed quiet past its limit."""
        transport = self._transport
        if transport is None:
            return  # a TLS handshake in progress: its own timeout applies
        if self._closing_since is not None:
            if now - self._closing_since > _CLOSE_GRACE:
                transport.abort()
            return
        busy, seen = self._activity()
        if busy or seen != self._seen:
            self._seen = seen
            self._quiet_since = now
            return
        quiet = now - self._quiet_since
        if isinstance(self._target, grpclib.protocol.H2Protocol) and seen is not None:
            if quiet > limits.idle_timeout:
                log.debug("closing an idle HTTP/2 connection from %s", self.host)
                self.close(now)
        elif quiet > limits.first_request_timeout:
            log.debug("closing a connection from %s that sent no request", self.host)
            if self._target is None:
                transport.abort()  # nothing was written that would need flushing
            else:
                self.close(now)

    def close(self, now: float) -> None:
        if self._transport is not None and self._closing_since is None:
            self._closing_since = now
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    @property
    def sniffing(self) -> bool:
        return self._target is None


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


def _tune(sock: socket.socket) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in _KEEPALIVE.items():
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def _refuse(sock: socket.socket) -> None:
    """Close with a reset: the client learns at once, and no TIME_WAIT is left here."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Listener:
    """Serves a grpclib server and an ASGI app on one bound socket."""

    def __init__(
        self,
        grpc_server: grpclib.server.Server,
        app: Any,
        *,
        limits: Limits | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._grpc = grpc_server
        # WebSockets (the task proxy's: a notebook's kernels, a shell's tunnel) with wsproto;
        # the sniffer takes an upgraded connection's WebSocket protocol as its target.
        self._config = uvicorn.Config(
            app,
            lifespan="off",
            log_config=None,
            access_log=False,
            ws="wsproto",
            ws_max_size=64 * 1024 * 1024,
        )
        self._config.load()
        self._state = ServerState()
        self._limits = limits or Limits()
        self._total = self._limits.total
        self._tls = tls
        self._sock: socket.socket | None = None
        self._port = 0
        self._conns: set[_Sniffer] = set()
        self._per_host: dict[str, int] = {}
        self._capped_hosts: set[str] = set()
        self._full = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._handshakes: set[asyncio.Task[None]] = set()

    def http_protocol(self) -> asyncio.Protocol:
        return H11Protocol(config=self._config, server_state=self._state, app_state={})

    def grpc_protocol(self) -> asyncio.Protocol:
        # grpclib has no public hook for serving a connection it did not accept.
        return self._grpc._protocol_factory()

    @property
    def connections(self) -> int:
        """Connections held now (those still in their TLS handshake included)."""
        return len(self._conns)

    async def start(self, sock: socket.socket) -> None:
        self._sock = sock
        self._port = int(sock.getsockname()[1])
        if self._total <= 0:
            self._total = default_total(_soft_fd_limit())
        host = str(sock.getsockname()[0])
        if self._tls is None and not is_loopback(host):
            log.warning(
                "the master listens on %s:%d without TLS: passwords, session tokens and the "
                "agent token cross the network in the clear. Set security.tls {cert, key} in "
                "the master config, or listen on 127.0.0.1 only (--host)",
                host,
                self._port,
            )
        loop = asyncio.get_running_loop()
        for coro in (self._accept(), self._sweep()):
            self._tasks.add(loop.create_task(coro))

    @property
    def port(self) -> int:
        assert self._sock is not None
        return self._port

    def _admit(self, host: str) -> bool:
        if len(self._conns) >= self._total:
            if not self._full:
                log.warning(
                    "%d connections are open, the most the master accepts "
                    "(security.max_connections); refusing new ones",
                    len(self._conns),
                )
            self._full = True
            return False
        self._full = False
        if self._per_host.get(host, 0) >= self._limits.per_address:
            if host not in self._capped_hosts:
                self._capped_hosts.add(host)
                log.warning(
                    "%s holds %d connections, the most one address may "
                    "(security.max_connections_per_address); refusing more from it",
                    host,
                    self._limits.per_address,
                )
            return False
        return True

    def forget(self, conn: _Sniffer) -> None:
        """Stop counting a connection that ended (idempotent)."""
        if conn not in self._conns:
            return
        self._conns.discard(conn)
        left = self._per_host[conn.host] - 1
        if left:
            self._per_host[conn.host] = left
        else:
            del self._per_host[conn.host]
        if left < self._limits.per_address:
            self._capped_hosts.discard(conn.host)

    async def _accept(self) -> None:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, addr = await loop.sock_accept(self._sock)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("cannot accept a connection: %s; retrying shortly", e.strerror)
                    await asyncio.sleep(0.5)
                continue
            host = str(addr[0]) if isinstance(addr, tuple) else str(addr)
            if not self._admit(host):
                _refuse(sock)
                continue
            try:
                _tune(sock)
            except OSError:
                sock.close()  # the peer is already gone
                continue
            conn = _Sniffer(self, host, loop.time())
            self._conns.add(conn)
            self._per_host[host] = self._per_host.get(host, 0) + 1
            task = loop.create_task(self._connect(sock, conn))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _connect(self, sock: socket.socket, conn: _Sniffer) -> None:
        loop = asyncio.get_running_loop()
        try:
            if self._tls is None:
                await loop.connect_accepted_socket(lambda: conn, sock)
            else:
                await loop.connect_accepted_socket(
                    lambda: conn,
                    sock,
                    ssl=self._tls,
                    ssl_handshake_timeout=self._limits.first_request_timeout,
                    ssl_shutdown_timeout=_CLOSE_GRACE,
                )
        except Exception as e:
            if not isinstance(e, OSError):
                log.warning("a connection from %s failed", conn.host, exc_info=e)
            else:
                log.debug("a connection from %s failed before its first byte: %s", conn.host, e)
            self.forget(conn)
            sock.close()
        except asyncio.CancelledError:
            self.forget(conn)
            sock.close()
            raise

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        shortest = min(self._limits.first_request_timeout, self._limits.idle_timeout)
        interval = max(0.05, min(1.0, shortest / 4))
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for conn in list(self._conns):
                conn.sweep(now, self._limits)

    async def close(self) -> None:
        """Stop accepting, finish HTTP responses in flight, cancel gRPC calls."""
        if self._sock is None:
            return
        sock, self._sock = self._sock, None
        tasks = [*self._tasks, *self._handshakes]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        sock.close()
        for conn in list(self._conns):
            if conn.sniffing:
                conn.abort()
        for h11 in list(self._state.connections):
            h11.shutdown()
        for handler in list(self._grpc._handlers):
            handler.close()
        for handler in list(self._grpc._handlers):
            await handler.wait_closed()
        for task in list(self._state.tasks):
            task.cancel()
        await asyncio.sleep(0)
