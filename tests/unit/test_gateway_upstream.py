"""The proxy's HTTP/1.1 client (``master/gateway/upstream.py``) against h11 as its oracle:
h11 reads the requests it writes, and writes, as a server, the answers it must read back,
whatever pieces the socket cuts them into. The connection runs on an in-memory transport."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pydet.master.gateway import upstream
from pydet.master.gateway.upstream import UpstreamError, Upstreams


class _Transport(asyncio.Transport):
    """What the client writes goes to an h11 server; ``answer`` makes that server's answer,
    which the test hands to the connection (``delivered``: the last one)."""

    def __init__(self, conn: upstream._Connection) -> None:
        super().__init__()
        self.conn = conn
        self.server = h11.Connection(h11.SERVER)
        self.requests: list[tuple[h11.Request, bytes]] = []
        self.closed = False
        self.paused = False
        self.delivered = b""
        self._body = b""
        self._request: h11.Request | None = None

    def write(self, data: Any) -> None:
        self.server.receive_data(bytes(data))
        while True:
            event = self.server.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request, self._body = event, b""
            elif isinstance(event, h11.Data):
                self._body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert self._request is not None
                self.requests.append((self._request, self._body))

    def answer(self, *events: Any) -> bytes:
        """The bytes h11 writes for ``events``, ready for the next request afterwards."""
        out = b"".join(self.server.send(e) or b"" for e in events)
        if self.server.our_state is h11.DONE and self.server.their_state is h11.DONE:
            self.server.start_next_cycle()
        return out

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


class _Upstreams(Upstreams):
    """Connections on in-memory transports; ``opened`` lists them."""

    def __init__(self) -> None:
        super().__init__(read_timeout=5.0)
        self.opened: list[_Transport] = []

    async def _connect(self, address: str) -> upstream._Connection:
        conn = upstream._Connection()
        transport = _Transport(conn)
        conn.connection_made(transport)
        self.opened.append(transport)
        return conn


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


async def _exchange(
    ups: _Upstreams,
    method: str,
    answer: list[Any] | bytes,
    cuts: list[int],
    body: bytes = b"",
) -> tuple[upstream.Response, bytes]:
    """A request, its ``answer`` (h11's events, or bytes followed by the connection's end)
    delivered in pieces, and the body read back."""
    started = asyncio.create_task(
        ups.request("10.0.0.1:2950", method, "/proxy/t/a%20b?x=1", [("Accept", "*/*")], body)
    )
    await asyncio.sleep(0)
    transport = ups.opened[-1]
    raw = answer if isinstance(answer, bytes) else transport.answer(*answer)
    for piece in _cut(raw, cuts):
        transport.conn.data_received(piece)
    if isinstance(answer, bytes):
        transport.conn.eof_received()
    response = await started
    got = b"".join([piece async for piece in response.body()])
    transport.delivered = raw
    return response, got


def _h11_reads(raw: bytes, eof: bool) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """What h11, as the client of a GET, reads from ``raw``: status, headers and body."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(raw)
    if eof:
        client.receive_data(b"")
    status, headers, body = 0, [], b""
    while (event := client.next_event()) is not h11.NEED_DATA:
        if isinstance(event, h11.Response):
            status, headers = event.status_code, list(event.headers)
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            break
    return status, headers, body


bodies = st.binary(max_size=3000)
cut_points = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(body=bodies, cuts=cut_points, framing=st.sampled_from(["length", "chunked", "close"]))
def test_any_answer_reads_back_as_h11_reads_it(body: bytes, cuts: list[int], framing: str) -> None:
    async def run() -> None:
        ups = _Upstreams()
        headers = [("Content-Type", "application/octet-stream"), ("Set-Cookie", "a=1")]
        headers.append(("Set-Cookie", "b=2"))
        answer: list[Any] | bytes
        if framing == "close":
            # h11 frames by the connection's end only for HTTP/1.0 peers: written by hand.
            answer = b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
            answer += b"Connection: close\r\n\r\n" + body
        else:
            if framing == "length":
                headers.append(("Content-Length", str(len(body))))
            else:
                headers.append(("Transfer-Encoding", "chunked"))
            data = [h11.Data(data=body[i : i + 700]) for i in range(0, len(body), 700)]
            answer = [h11.Response(status_code=200, headers=headers), *data, h11.EndOfMessage()]
        response, got = await _exchange(ups, "GET", answer, cuts)
        raw = ups.opened[0].delivered
        status, h11_headers, h11_body = _h11_reads(raw, eof=isinstance(answer, bytes))
        assert (response.status, got) == (status, h11_body) == (200, body)
        assert [(k.lower().encode(), v.encode()) for k, v in response.headers] == h11_headers
        # What h11 read is the request as sent: the target untouched, Host, the header.
        ((request, _),) = ups.opened[0].requests
        assert request.target == b"/proxy/t/a%20b?x=1"
        assert (b"host", b"10.0.0.1:2950") in list(request.headers)
        # Kept open for the next request only when the answer's framing allows it.
        assert (ups._take("10.0.0.1:2950") is not None) == (framing != "close")

    asyncio.run(run())


async def test_a_connection_serves_the_next_request_and_a_body_goes_whole() -> None:
    ups = _Upstreams()
    ok = [h11.Response(status_code=201, headers=[("Content-Length", "2")]), h11.Data(data=b"ok")]
    response, got = await _exchange(ups, "POST", [*ok, h11.EndOfMessage()], [], body=b"x" * 10)
    assert (response.status, got) == (201, b"ok")
    response, got = await _exchange(ups, "PUT", [*ok, h11.EndOfMessage()], [1], body=b"")
    assert len(ups.opened) == 1
    bodies = [body for _, body in ups.opened[0].requests]
    assert bodies == [b"x" * 10, b""]


async def test_head_and_no_content_answers_have_no_body() -> None:
    ups = _Upstreams()
    head = h11.Response(status_code=200, headers=[("Content-Length", "5000")])
    response, got = await _exchange(ups, "HEAD", [head, h11.EndOfMessage()], [])
    assert (response.status, got) == (200, b"")
    empty = h11.Response(status_code=204, headers=[])
    response, got = await _exchange(ups, "DELETE", [empty, h11.EndOfMessage()], [3])
    assert (response.status, got) == (204, b"")
    assert len(ups.opened) == 1


async def test_an_interim_answer_is_skipped() -> None:
    ups = _Upstreams()
    answer = [
        h11.InformationalResponse(status_code=100, headers=[]),
        h11.Response(status_code=200, headers=[("Content-Length", "3")]),
        h11.Data(data=b"abc"),
        h11.EndOfMessage(),
    ]
    response, got = await _exchange(ups, "POST", answer, [5, 40], body=b"{}")
    assert (response.status, got) == (200, b"abc")


async def test_a_short_answer_is_an_error_and_its_connection_is_not_kept() -> None:
    ups = _Upstreams()
    task = asyncio.create_task(ups.request("10.0.0.1:1", "GET", "/", []))
    await asyncio.sleep(0)
    conn = ups.opened[0].conn
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    conn.eof_received()
    response = await task
    with pytest.raises(UpstreamError, match="7 bytes short"):
        async for _ in response.body():
            pass
    response.close()
    assert ups.opened[0].closed and ups._take("10.0.0.1:1") is None


async def test_a_reused_connection_the_task_closed_is_retried_on_a_new_one() -> None:
    ups = _Upstreams()
    ok = [h11.Response(status_code=200, headers=[("Content-Length", "0")]), h11.EndOfMessage()]
    await _exchange(ups, "GET", ok, [])
    first = ups.opened[0]
    task = asyncio.create_task(ups.request("10.0.0.1:2950", "GET", "/again", []))
    await asyncio.sleep(0)
    first.conn.connection_lost(None)  # the task had closed it while idle
    await asyncio.sleep(0)
    second = ups.opened[1]
    second.conn.data_received(second.answer(*ok))
    response = await task
    assert response.status == 200
    assert [r.target for r, _ in second.requests] == [b"/again"]


async def test_a_post_on_a_connection_that_closed_is_not_sent_twice() -> None:
    ups = _Upstreams()
    ok = [h11.Response(status_code=200, headers=[("Content-Length", "0")]), h11.EndOfMessage()]
    await _exchange(ups, "GET", ok, [])
    task = asyncio.create_task(ups.request("10.0.0.1:2950", "POST", "/run", [], b"{}"))
    await asyncio.sleep(0)
    ups.opened[0].conn.connection_lost(None)
    with pytest.raises(UpstreamError, match="without answering"):
        await task
    assert len(ups.opened) == 1


async def test_reading_from_the_task_pauses_while_its_client_lags() -> None:
    ups = _Upstreams()
    size = 3 * upstream._HIGH_WATER
    task = asyncio.create_task(ups.request("10.0.0.1:2950", "GET", "/big", []))
    await asyncio.sleep(0)
    transport = ups.opened[0]
    transport.conn.data_received(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
    response = await task
    piece = b"z" * (1024 * 1024)
    for _ in range(upstream._HIGH_WATER // len(piece) + 1):
        transport.conn.data_received(piece)
    assert transport.paused
    body = response.body()
    assert len(await anext(body)) == len(piece)
    assert not transport.paused
    await body.aclose()
    response.close()


def test_bad_heads_are_refused_with_what_was_wrong() -> None:
    with pytest.raises(UpstreamError, match=r"did not answer in HTTP/1\.1"):
        upstream._parse_head(b"SSH-2.0-OpenSSH_9.6")
    with pytest.raises(UpstreamError, match="bad header line"):
        upstream._parse_head(b"HTTP/1.1 200 OK\r\n folded")
    with pytest.raises(UpstreamError, match="bad Content-Length"):
        upstream._framing("GET", 200, [("Content-Length", "1"), ("Content-Length", "2")])
