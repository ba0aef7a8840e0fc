"""Blocking gRPC calls over HTTP/2 (unary, and server streams), for code inside tasks and the
CLI's quickest commands.

grpclib (with h2 and asyncio) is ~0.1 s of imports, and a task's launcher makes one call; the
Core API makes a few per trial. This is the client side of the few parts of HTTP/2 (RFC 9113)
and gRPC's wire protocol that unary calls need, on blocking sockets: each connection carries
one call at a time (the calling thread reads until its stream ends), and a ``Channel`` keeps
idle connections for the next call, opening another when all are busy (a long poll holds
one). Header blocks are coded by ``hpack`` (h2's own HPACK, a dependency of grpclib).

Failures are grpclib's exceptions, so callers handle one set: ``GRPCError`` for a status the
master answered with, ``StreamTerminatedError`` for a reset stream or a connection the master
is closing, and ``ConnectionError``/``OSError`` for one that could not be made or was lost;
``TimeoutError`` when the deadline passes.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import hpack
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

if TYPE_CHECKING:
    import ssl

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PING, _GOAWAY, _WINDOW_UPDATE, _CONTINUATION = (
    0,
    1,
    3,
    4,
    6,
    7,
    8,
    9,
)
_END_STREAM = _ACK = 0x1
_END_HEADERS, _PADDED, _PRIORITY = 0x4, 0x8, 0x20
_SETTINGS_INITIAL_WINDOW_SIZE, _SETTINGS_MAX_FRAME_SIZE = 0x4, 0x5
_MAX_WINDOW = _STREAM_ID_MASK = (1 << 31) - 1
_DEFAULT_WINDOW = 65535
_REFUSED_STREAM = 0x7
# A frame's 9-byte header: the 24-bit length and the type byte as one word, flags, stream id.
_FRAME_HEADER = struct.Struct(">I B I")
# What we receive: the biggest windows there are (a context is up to ~95 MiB), topped up
# on the connection once half of it was used.
_OUR_SETTINGS = struct.pack(">HIHI", 0x2, 0, _SETTINGS_INITIAL_WINDOW_SIZE, _MAX_WINDOW)


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + stream.to_bytes(4) + payload


class _Reply:
    """What one call's stream has received so far."""

    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.data = bytearray()
        self.block = bytearray()  # a header block that CONTINUATION frames still extend
        self.ends_with_block = False
        self.done = False


class _Connection:
    """One HTTP/2 connection that carries one call at a time."""

    def __init__(self, sock: socket.socket, authority: str, scheme: str) -> None:
        self._sock = sock
        self._authority = authority
        self._scheme = scheme
        self._encoder = hpack.Encoder()
        self._decoder = hpack.Decoder()
        self._next_stream = 1
        self._send_window = _DEFAULT_WINDOW  # the connection's, for our DATA
        self._initial_window = _DEFAULT_WINDOW  # a new stream's, as the master set it
        self._stream_window = 0
        self._max_frame = 16384
        self._received = 0  # DATA bytes since the connection window was last topped up
        self._buffer = bytearray()
        self.usable = True
        sock.sendall(
            _PREFACE
            + _frame(_SETTINGS, 0, 0, _OUR_SETTINGS)
            + _frame(_WINDOW_UPDATE, 0, 0, (_MAX_WINDOW - _DEFAULT_WINDOW).to_bytes(4))
        )

    def close(self) -> None:
        self.usable = False
        # shutdown() first: it wakes a thread blocked reading this socket; close() alone
        # would leave it waiting.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def call(
        self, path: str, payload: bytes, metadata: Mapping[str, str], deadline: float | None
    ) -> bytes:
        """The reply's message; raises as the module docstring says."""
        stream, reply = self._send(path, payload, metadata, deadline)
        while not reply.done:
            self._pump(stream, reply, deadline)
        return _message(reply.headers, bytes(reply.data))

    def stream(
        self, path: str, payload: bytes, metadata: Mapping[str, str], deadline: float | None
    ) -> Iterator[bytes]:
        """The messages of a server stream as they arrive; at its end, its status raises as
        a unary call's would."""
        stream, reply = self._send(path, payload, metadata, deadline)
        while True:
            while len(reply.data) >= 5:
                size = int.from_bytes(reply.data[1:5])
                if len(reply.data) < 5 + size:
                    break
                if reply.data[0] != 0:
                    raise GRPCError(Status.INTERNAL, "the reply holds a compressed message")
                message = bytes(reply.data[5 : 5 + size])
                del reply.data[: 5 + size]
                yield message
            if reply.done:
                break
            self._pump(stream, reply, deadline)
        _status(reply.headers)
        if reply.data:
            raise GRPCError(Status.INTERNAL, "the stream ended inside a message")

    def _send(
        self, path: str, payload: bytes, metadata: Mapping[str, str], deadline: float | None
    ) -> tuple[int, _Reply]:
        """Open a stream and send the request on it."""
        stream = self._next_stream
        self._next_stream += 2
        if self._next_stream >= _MAX_WINDOW:
            self.usable = False
        headers = [
            (":method", "POST"),
            (":scheme", self._scheme),
            (":path", path),
            (":authority", self._authority),
            ("te", "trailers"),
            ("content-type", "application/grpc"),
        ]
        if deadline is not None:
            left = max(0, int((deadline - time.monotonic()) * 1000))
            headers.append(("grpc-timeout", f"{left}m"))
        headers += metadata.items()
        self._set_deadline(deadline)
        self._sock.sendall(_frame(_HEADERS, _END_HEADERS, stream, self._encoder.encode(headers)))
        self._stream_window = self._initial_window
        reply = _Reply()
        body = memoryview(b"\x00" + len(payload).to_bytes(4) + payload)
        while body and not reply.done:
            n = min(len(body), self._max_frame, self._send_window, self._stream_window)
            if n <= 0:
                self._pump(stream, reply, deadline)  # out of window: wait for more
                continue
            chunk, body = body[:n], body[n:]
            self._send_window -= n
            self._stream_window -= n
            self._sock.sendall(_frame(_DATA, 0 if body else _END_STREAM, stream, bytes(chunk)))
        return stream, reply

    def _pump(self, stream: int, reply: _Reply, deadline: float | None) -> None:
        """Read and act on one frame."""
        head = self._read_exactly(9, deadline)
        length_type, flags, sid = _FRAME_HEADER.unpack(head)
        length, kind = length_type >> 8, length_type & 0xFF
        sid &= _STREAM_ID_MASK
        payload = self._read_exactly(length, deadline)
        if sid == 0:
            self._connection_frame(kind, flags, payload)
        elif sid != stream:
            pass  # the tail of an earlier stream (there is none: calls end their streams)
        elif kind == _DATA:
            reply.data += _unpad(flags, payload)
            self._top_up(length)
            reply.done = bool(flags & _END_STREAM)
        elif kind in (_HEADERS, _CONTINUATION):
            if kind == _HEADERS:
                reply.ends_with_block = bool(flags & _END_STREAM)
                payload = _unpad(flags, payload)[5 if flags & _PRIORITY else 0 :]
            reply.block += payload
            if flags & _END_HEADERS:
                decoded = self._decoder.decode(bytes(reply.block))
                reply.headers += [(str(k), str(v)) for k, v in decoded]
                reply.block.clear()
                reply.done = reply.ends_with_block
        elif kind == _WINDOW_UPDATE:
            self._stream_window += int.from_bytes(payload[:4]) & _MAX_WINDOW
        elif kind == _RST_STREAM:
            code = int.from_bytes(payload[:4])
            if code == _REFUSED_STREAM:
                raise ConnectionRefusedError("the master refused the call; try again")
            raise StreamTerminatedError(f"the master reset the call (HTTP/2 error {code})")

    def _connection_frame(self, kind: int, flags: int, payload: bytes) -> None:
        if kind == _SETTINGS and not flags & _ACK:
            for i in range(0, len(payload) - 5, 6):
                key, value = struct.unpack_from(">HI", payload, i)
                if key == _SETTINGS_INITIAL_WINDOW_SIZE:
                    self._stream_window += value - self._initial_window
                    self._initial_window = value
                elif key == _SETTINGS_MAX_FRAME_SIZE:
                    self._max_frame = value
            self._sock.sendall(_frame(_SETTINGS, _ACK, 0))
        elif kind == _PING and not flags & _ACK:
            self._sock.sendall(_frame(_PING, _ACK, 0, payload))
        elif kind == _WINDOW_UPDATE:
            self._send_window += int.from_bytes(payload[:4]) & _MAX_WINDOW
        elif kind == _GOAWAY:
            self.usable = False
            last = int.from_bytes(payload[:4]) & _MAX_WINDOW
            if last < self._next_stream - 2:
                raise ConnectionResetError("the master is closing the connection; try again")

    def _top_up(self, n: int) -> None:
        self._received += n
        if self._received >= _MAX_WINDOW // 2:
            self._sock.sendall(_frame(_WINDOW_UPDATE, 0, 0, self._received.to_bytes(4)))
            self._received = 0

    def _set_deadline(self, deadline: float | None) -> None:
        if deadline is None:
            self._sock.settimeout(None)
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self._sock.settimeout(left)

    def _read_exactly(self, n: int, deadline: float | None) -> bytes:
        buf = self._buffer
        while len(buf) < n:
            self._set_deadline(deadline)
            chunk = self._sock.recv(max(65536, n - len(buf)))
            if not chunk:
                self.usable = False
                raise ConnectionResetError("the master closed the connection")
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out


def _unpad(flags: int, payload: bytes) -> bytes:
    if flags & _PADDED:
        return payload[1 : len(payload) - payload[0]]
    return payload


def _status(headers: list[tuple[str, str]]) -> None:
    """Raise the ``GRPCError`` a reply's trailers carry, unless they say OK."""
    fields = dict(headers)
    status = fields.get(":status", "200")
    grpc_status = fields.get("grpc-status")
    if grpc_status is None:
        if status != "200":
            raise GRPCError(Status.UNAVAILABLE if status == "503" else Status.UNKNOWN, status)
        raise GRPCError(Status.UNKNOWN, "the reply has no grpc-status")
    code = Status(int(grpc_status))
    if code is not Status.OK:
        message = fields.get("grpc-message")
        if message and "%" in message:
            from urllib.parse import unquote

            message = unquote(message)
        raise GRPCError(code, message)


def _message(headers: list[tuple[str, str]], data: bytes) -> bytes:
    """The one message of a unary reply, or the ``GRPCError`` its trailers carry."""
    _status(headers)
    if len(data) < 5 or data[0] != 0:
        raise GRPCError(Status.INTERNAL, "the reply holds no uncompressed message")
    size = int.from_bytes(data[1:5])
    if len(data) != 5 + size:
        raise GRPCError(Status.INTERNAL, "the reply is not one whole message")
    return data[5:]


class Channel:
    """Blocking unary calls to one master; thread-safe, connections opened as needed."""

    def __init__(self, host: str, port: int, *, tls: ssl.SSLContext | None = None) -> None:
        self._host = host
        self._port = port
        self._tls = tls
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._lock = threading.Lock()
        self._closed = False

    def unary(
        self,
        path: str,
        request: Any,
        reply_type: Any,
        *,
        timeout: float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Any:
        """Call ``path`` with ``request`` (anything with ``SerializeToString``); the reply,
        as ``reply_type.FromString`` reads it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        conn = self._take(deadline)
        try:
            payload = conn.call(path, request.SerializeToString(), metadata or {}, deadline)
        except BaseException:
            conn.close()  # mid-call: whatever it still holds would confuse the next call
            self._give_back(conn)
            raise
        self._give_back(conn)
        try:
            return reply_type.FromString(payload)
        except ValueError as e:
            raise GRPCError(Status.INTERNAL, f"malformed reply: {e}") from None

    def stream(
        self,
        path: str,
        request: Any,
        reply_type: Any,
        *,
        timeout: float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Iterator[Any]:
        """Call the server-streaming ``path`` with ``request``; its replies as they arrive,
        each as ``reply_type.FromString`` reads it. The connection is held until the stream
        ends or the iterator is closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        conn = self._take(deadline)
        done = False
        try:
            for payload in conn.stream(path, request.SerializeToString(), metadata or {}, deadline):
                try:
                    reply = reply_type.FromString(payload)
                except ValueError as e:
                    raise GRPCError(Status.INTERNAL, f"malformed reply: {e}") from None
                yield reply
            done = True
        finally:
            if not done:
                conn.close()  # mid-stream: the rest of it would confuse the next call
            self._give_back(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = self._idle + list(self._busy)
            self._idle.clear()
        for conn in conns:
            conn.close()

    def _take(self, deadline: float | None) -> _Connection:
        with self._lock:
            if self._closed:
                raise ConnectionAbortedError("the channel is closed")
            while self._idle:
                conn = self._idle.pop()
                if conn.usable:
                    self._busy.add(conn)
                    return conn
                conn.close()
        conn = self._connect(deadline)
        with self._lock:
            self._busy.add(conn)
        return conn

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            self._busy.discard(conn)
            if conn.usable and not self._closed:
                self._idle.append(conn)
            else:
                conn.close()

    def _connect(self, deadline: float | None) -> _Connection:
        timeout = None if deadline is None else max(0.001, deadline - time.monotonic())
        sock = socket.create_connection((self._host, self._port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._host)
            authority = f"{self._host}:{self._port}"
            return _Connection(sock, authority, "https" if self._tls else "http")
        except BaseException:
            sock.close()
            raise
