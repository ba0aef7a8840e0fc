"""HTTP/1.1 to a task's web server, for the gateway's proxy: connections kept open per
address and used again, each request written whole in one write, and each response's body
handed on in the pieces the socket delivered them in.

A connection is an asyncio protocol rather than a stream reader: ``data_received`` only
queues what came, a reader takes everything queued at once, and reading from the task
pauses while more than a few megabytes wait for the client. A download through the proxy
then costs the master one pass over each piece and no await per piece while data waits
(aiohttp's client, used before, gave a third of a direct download's speed away).

Only what the proxy needs is spoken: a request with its whole body, and responses framed
by Content-Length, chunked encoding or the connection's end (RFC 9112, section 6).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

# Reading from a task pauses while this much waits for its client, and resumes once what
# waits was taken.
_HIGH_WATER = 4 * 1024 * 1024
# What one receive may take from the task's socket.
_READ_SIZE = 1024 * 1024
# The most a response's status line and headers may take.
_MAX_HEAD = 64 * 1024
# Idle connections kept per task address, and how long one is kept unused.
_MAX_IDLE = 8
_IDLE_SECONDS = 30.0
# A request on a connection used before may find that the task just closed it; these
# methods are sent again on a new one (the task never saw them).
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class UpstreamError(Exception):
    """The task's server could not be reached, or broke its answer off."""


class _Closed(UpstreamError):
    """The connection ended before the response's first byte."""


class _Connection(asyncio.Protocol):
    """One connection to a task's server: what it received, queued until read."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._chunks: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._paused = False
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self.expiry: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if hasattr(transport, "max_size"):
            # asyncio's selector transport receives 256 KiB at most per call; larger reads
            # make a download fewer pieces, each with its turn of the loop and its write.
            transport.max_size = _READ_SIZE

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._queued += len(data)
        if self._queued > _HIGH_WATER and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._ended = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    @property
    def usable(self) -> bool:
        """Still open, with nothing unread (an idle connection the task closed is not)."""
        t = self._transport
        return not self._ended and not self._chunks and t is not None and not t.is_closing()

    def write(self, data: bytes) -> None:
        assert self._transport is not None
        self._transport.write(data)

    async def read(self, timeout: float) -> list[bytes]:
        """Everything received and not yet read, waiting up to ``timeout`` seconds for
        something when nothing is; [] at the connection's end."""
        if not self._chunks and not self._ended:
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            # One timer per wait, none while data is queued: a download's pieces mostly are.
            timer = loop.call_later(timeout, self._time_out, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        chunks = list(self._chunks)
        self._chunks.clear()
        self._queued = 0
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return chunks

    @staticmethod
    def _time_out(waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_exception(TimeoutError())

    def unread(self, data: bytes) -> None:
        if data:
            self._chunks.appendleft(data)
            self._queued += len(data)

    def close(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None
        if self._transport is not None:
            self._transport.close()


@dataclass
class Response:
    """A task's answer: its status and headers, and its body to read (once) with ``body``.

    The connection goes back to its pool once the whole body was read, and is closed when
    it was not (``close``, also safe after a complete read)."""

    status: int
    headers: list[tuple[str, str]]
    _conn: _Connection
    _framing: int | str  # a length, "chunked", or "close" (the body ends with the connection)
    _reusable: bool
    _give_back: Callable[[_Connection], None]
    _read_timeout: float
    _done: bool = field(default=False, init=False)

    async def _read(self) -> list[bytes]:
        try:
            return await self._conn.read(self._read_timeout)
        except TimeoutError:
            raise UpstreamError(f"the task sent nothing for {self._read_timeout:g}s") from None

    async def body(self) -> AsyncIterator[bytes]:
        """The body, piece by piece as it arrives (chunked encoding decoded)."""
        if self._framing == "chunked":
            async for piece in self._chunked():
                yield piece
        elif self._framing == "close":
            while chunks := await self._read():
                for chunk in chunks:
                    yield chunk
        else:
            assert isinstance(self._framing, int)
            left = self._framing
            while left > 0:
                chunks = await self._read()
                if not chunks:
                    raise UpstreamError(
                        f"the task ended its answer {left} bytes short of its Content-Length"
                    )
                for i, chunk in enumerate(chunks):
                    if len(chunk) >= left:
                        if len(chunk) > left or i + 1 < len(chunks):
                            # More than it declared: dropped, and the connection with it.
                            self._reusable = False
                        yield chunk if len(chunk) == left else chunk[:left]
                        left = 0
                        break
                    left -= len(chunk)
                    yield chunk
        self._done = True
        self.close()

    async def _chunked(self) -> AsyncIterator[bytes]:
        buffer = bytearray()
        pending: collections.deque[bytes] = collections.deque()

        async def more() -> None:
            chunks = await self._read()
            if not chunks:
                raise UpstreamError("the task ended its chunked answer early")
            pending.extend(chunks)

        async def line() -> bytes:
            while (end := buffer.find(b"\r\n")) < 0:
                if len(buffer) > _MAX_HEAD:
                    raise UpstreamError("the task sent a chunk header that never ends")
                if not pending:
                    await more()
                buffer.extend(pending.popleft())
            text = bytes(buffer[:end])
            del buffer[: end + 2]
            return text

        while True:
            size_text = (await line()).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise UpstreamError(f"the task sent a bad chunk size {size_text!r}") from None
            if size == 0:
                while await line():  # trailers, up to their empty line
                    pass
                for chunk in reversed(pending):
                    self._conn.unread(chunk)
                if buffer:
                    self._conn.unread(bytes(buffer))
                self._reusable = self._reusable and not buffer and not pending
                return
            while size > 0:
                if not buffer:
                    if not pending:
                        await more()
                    buffer.extend(pending.popleft())
                piece = bytes(buffer[:size])
                del buffer[:size]
                size -= len(piece)
                yield piece
            if await line():
                raise UpstreamError("the task sent a chunk longer than its size")

    def close(self) -> None:
        if self._done and self._reusable and self._conn.usable:
            self._give_back(self._conn)
        else:
            self._conn.close()
        self._done = True
        self._reusable = False


def _framing(method: str, status: int, headers: list[tuple[str, str]]) -> int | str:
    """How the body ends (RFC 9112, 6.3): a length (0: no body), "chunked" or "close"."""
    if method == "HEAD" or 100 <= status < 200 or status in (204, 304):
        return 0
    codings = [v for k, v in headers if k.lower() == "transfer-encoding"]
    if codings:
        last = ",".join(codings).split(",")[-1].strip().lower()
        return "chunked" if last == "chunked" else "close"
    lengths = {v.strip() for k, v in headers if k.lower() == "content-length"}
    if not lengths:
        return "close"
    (length,) = lengths if len(lengths) == 1 else (None,)
    if length is None or not length.isdigit():
        raise UpstreamError(f"the task sent a bad Content-Length {sorted(lengths)}")
    return int(length)


def _parse_head(head: bytes) -> tuple[str, int, list[tuple[str, str]]]:
    """The HTTP version, status and headers of a response head (without its blank line)."""
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise UpstreamError(f"the task did not answer in HTTP/1.1: {status_line[:80]!r}")
    headers = []
    for text in lines:
        name, sep, value = text.partition(":")
        if not sep or not name or name != name.strip() or text[0] in " \t":
            raise UpstreamError(f"the task sent a bad header line {text[:80]!r}")
        headers.append((name, value.strip(" \t")))
    return version, int(code), headers


class Upstreams:
    """Connections to the tasks' servers, kept open per address between requests."""

    def __init__(self, *, connect_timeout: float = 10.0, read_timeout: float = 300.0) -> None:
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._idle: dict[str, list[_Connection]] = {}

    async def request(
        self,
        address: str,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
    ) -> Response:
        """Send ``method target`` to ``address`` (host:port) and read its answer's head.

        ``target`` is the request target as the client sent it (path and query, still
        percent-encoded); ``headers`` must not carry Host or framing headers."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {address}"]
        lines += [f"{name}: {value}" for name, value in headers]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        message = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        while True:
            conn = self._take(address)
            reused = conn is not None
            if conn is None:
                conn = await self._connect(address)
            conn.write(message)
            try:
                return await self._response(address, conn, method)
            except _Closed:
                conn.close()
                if not (reused and method in _IDEMPOTENT):
                    raise
            except BaseException:
                conn.close()
                raise

    async def _connect(self, address: str) -> _Connection:
        host, _, port = address.rpartition(":")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, conn = await loop.create_connection(_Connection, host.strip("[]"), int(port))
        except TimeoutError:
            raise UpstreamError(f"no connection within {self._connect_timeout:g}s") from None
        except OSError as e:
            raise UpstreamError(e.strerror or str(e)) from None
        return conn

    async def _response(self, address: str, conn: _Connection, method: str) -> Response:
        buffer = b""
        answered = False
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    raise UpstreamError(f"the task's answer has a head over {_MAX_HEAD} bytes")
                try:
                    chunks = await conn.read(self._read_timeout)
                except TimeoutError:
                    raise UpstreamError(f"no answer within {self._read_timeout:g}s") from None
                if not chunks:
                    if buffer or answered:
                        raise UpstreamError("the task closed the connection within its answer")
                    raise _Closed("the task closed the connection without answering")
                buffer += b"".join(chunks)
                continue
            answered = True
            head, buffer = buffer[:end], buffer[end + 4 :]
            version, status, headers = _parse_head(head)
            if 100 <= status < 200:
                continue  # 100 Continue, 103 Early Hints: the answer follows
            conn.unread(buffer)
            connection = {
                token.strip().lower()
                for k, v in headers
                if k.lower() == "connection"
                for token in v.split(",")
            }
            framing = _framing(method, status, headers)
            keep_alive = version == "HTTP/1.1" and "close" not in connection
            return Response(
                status=status,
                headers=headers,
                _conn=conn,
                _framing=framing,
                _reusable=keep_alive and framing != "close",
                _give_back=lambda c: self._give_back(address, c),
                _read_timeout=self._read_timeout,
            )

    def _take(self, address: str) -> _Connection | None:
        idle = self._idle.get(address)
        while idle:
            conn = idle.pop()
            if conn.expiry is not None:
                conn.expiry.cancel()
                conn.expiry = None
            if conn.usable:
                return conn
            conn.close()
        return None

    def _give_back(self, address: str, conn: _Connection) -> None:
        idle = self._idle.setdefault(address, [])
        if len(idle) >= _MAX_IDLE:
            conn.close()
            return
        idle.append(conn)
        conn.expiry = asyncio.get_running_loop().call_later(
            _IDLE_SECONDS, self._expire, address, conn
        )

    def _expire(self, address: str, conn: _Connection) -> None:
        idle = self._idle.get(address, [])
        with contextlib.suppress(ValueError):
            idle.remove(conn)
        if not idle:
            self._idle.pop(address, None)
        conn.expiry = None
        conn.close()

    def close(self) -> None:
        """Close every idle connection (idempotent)."""
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
