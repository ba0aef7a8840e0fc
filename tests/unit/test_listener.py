from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import statistics
import time
from asyncio import selector_events
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpclib.client
import grpclib.config
import grpclib.server
import pytest
import trustme
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import client, errors
from pydet.master import listener as listener_module
from pydet.master.listener import Limits, Listener, bind, server_tls_context


class _Master(v1.DeterminedBase):
    delay = 0.0

    async def get_master(self, message: v1.GetMasterRequest) -> v1.GetMasterResponse:
        await asyncio.sleep(self.delay)
        return v1.GetMasterResponse(version="x")


async def _slow(request: Request) -> PlainTextResponse:
    await asyncio.sleep(float(request.query_params.get("s", "0")))
    return PlainTextResponse("done")


@contextlib.asynccontextmanager
async def serving(
    limits: Limits | None = None, master: _Master | None = None
) -> AsyncIterator[Listener]:
    app = Starlette(routes=[Route("/slow", _slow)])
    listener = Listener(grpclib.server.Server([master or _Master()]), app, limits=limits)
    await listener.start(bind("127.0.0.1", 0))
    try:
        yield listener
    finally:
        await listener.close()


async def _is_closed(reader: asyncio.StreamReader, within: float) -> bool:
    """Whether the master ends the connection (EOF or reset) within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            while await reader.read(1024):
                pass  # what the master sent before closing (HTTP/2 settings, say)
            return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True


async def _connect(
    port: int, source: str = "127.0.0.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def _wait_for(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_small_rpcs_do_not_wait_for_delayed_acks() -> None:
    # With Nagle's algorithm on the master's sockets, each reply's trailing frames wait for
    # the client's delayed ACK: about 40 ms per call.
    async with serving() as listener:
        channel = grpclib.client.Channel("127.0.0.1", listener.port)
        try:
            stub = v1.DeterminedStub(channel)
            await stub.get_master(v1.GetMasterRequest())
            times = []
            for _ in range(15):
                began = time.perf_counter()
                await stub.get_master(v1.GetMasterRequest())
                times.append(time.perf_counter() - began)
            assert statistics.median(times) < 0.025, times
        finally:
            channel.close()


async def test_a_reply_leaves_the_master_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    # grpclib writes a reply's headers, message and trailers one by one; each write to an
    # idle socket is a system call of its own.
    async with serving() as listener:
        writes: list[bytes] = []
        write = selector_events._SelectorSocketTransport.write

        def seen(transport: Any, data: bytes) -> None:
            if transport.get_extra_info("sockname")[1] == listener.port:  # the master's end
                writes.append(bytes(data))
            write(transport, data)

        monkeypatch.setattr(selector_events._SelectorSocketTransport, "write", seen)
        channel = grpclib.client.Channel("127.0.0.1", listener.port)
        try:
            stub = v1.DeterminedStub(channel)
            await stub.get_master(v1.GetMasterRequest())  # the connection's settings
            for _ in range(3):
                writes.clear()
                assert (await stub.get_master(v1.GetMasterRequest())).version == "x"
                assert len(writes) == 1, writes
        finally:
            channel.close()


async def test_connections_over_the_per_address_cap_are_refused() -> None:
    async with serving(Limits(per_address=3)) as listener:
        held = [await _connect(listener.port) for _ in range(3)]
        await _wait_for(lambda: listener.connections == 3, 5)
        refused = await _connect(listener.port)
        assert await _is_closed(refused[0], 2)
        # Another address has a cap of its own, and so does this one once a slot frees.
        other = await _connect(listener.port, "127.0.0.2")
        assert not await _is_closed(other[0], 0.2)
        held[0][1].close()
        await _wait_for(lambda: listener.connections == 3, 5)
        again = await _connect(listener.port)
        assert not await _is_closed(again[0], 0.2)
        for _, writer in [*held[1:], other, again, refused]:
            writer.close()


async def test_connections_over_the_total_cap_are_refused() -> None:
    async with serving(Limits(per_address=10, total=4)) as listener:
        held = [await _connect(listener.port, f"127.0.0.{2 + i % 2}") for i in range(4)]
        await _wait_for(lambda: listener.connections == 4, 5)
        refused = await _connect(listener.port, "127.0.0.9")
        assert await _is_closed(refused[0], 2)
        for _, writer in [*held, refused]:
            writer.close()


async def test_silent_and_trickling_connections_are_closed() -> None:
    async with serving(Limits(first_request_timeout=0.4)) as listener:
        silent = await _connect(listener.port)
        trickling = await _connect(listener.port)
        # HTTP/2's preface, then no call: the idle timeout (minutes) is for clients that
        # made calls.
        preface_only = await _connect(listener.port)
        preface_only[1].write(
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
        )
        began = time.monotonic()
        # A request head sent a byte at a time never completes: it must not hold the slot.
        for byte in b"GET /slow HTTP/1.1\r\nHost: x\r\n":
            trickling[1].write(bytes([byte]))
            if time.monotonic() - began > 1.5:
                break
            await asyncio.sleep(0.05)
        assert await _is_closed(silent[0], 2)
        assert await _is_closed(trickling[0], 2)
        assert await _is_closed(preface_only[0], 2)
        await _wait_for(lambda: listener.connections == 0, 5)


async def test_a_slow_http_response_is_not_cut_by_the_request_timeout() -> None:
    async with serving(Limits(first_request_timeout=0.3)) as listener:
        reader, writer = await _connect(listener.port)
        writer.write(b"GET /slow?s=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(5):
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        writer.close()


async def test_idle_http2_connections_close_but_calls_in_flight_do_not() -> None:
    master = _Master()
    async with serving(Limits(idle_timeout=0.5), master) as listener:
        # Pings alone do not keep a connection open (gRPC's max_connection_idle).
        pinging = grpclib.client.Channel(
            "127.0.0.1",
            listener.port,
            config=grpclib.config.Configuration(
                _keepalive_time=0.1,
                _keepalive_permit_without_calls=True,
                _http2_max_pings_without_data=0,
                _http2_min_sent_ping_interval_without_data=0.1,
            ),
        )
        try:
            await v1.DeterminedStub(pinging).get_master(v1.GetMasterRequest())
            master.delay = 1.5
            slow = grpclib.client.Channel("127.0.0.1", listener.port)
            try:
                reply = await v1.DeterminedStub(slow).get_master(v1.GetMasterRequest())
                assert reply.version == "x"
                # The pinging channel went idle meanwhile and was closed; the slow one's
                # call finished, and it too is closed once idle.
                await _wait_for(lambda: listener.connections == 0, 5)
            finally:
                slow.close()
        finally:
            pinging.close()


async def test_a_tls_client_to_a_plain_master_gets_a_clear_error() -> None:
    async with serving() as listener:
        address = f"https://127.0.0.1:{listener.port}"
        async with client.session(address) as session:
            with pytest.raises(errors.FailedPrecondition, match="does it serve TLS"):
                await session.call(session.stub.get_master(v1.GetMasterRequest()))


async def test_tls_listener_serves_grpc_and_http(tmp_path: pathlib.Path) -> None:
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key, ca_file = tmp_path / "c.pem", tmp_path / "k.pem", tmp_path / "ca.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    listener = Listener(
        grpclib.server.Server([_Master()]),
        Starlette(routes=[Route("/slow", _slow)]),
        tls=server_tls_context(cert, key),
    )
    await listener.start(bind("127.0.0.1", 0))
    try:
        async with client.session(f"127.0.0.1:{listener.port}", cert_file=str(ca_file)) as s:
            reply = await s.call(s.stub.get_master(v1.GetMasterRequest()))
            assert reply.version == "x"
        ctx = client.tls_context(str(ca_file), alpn=())
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", listener.port, ssl=ctx, server_hostname="127.0.0.1"
        )
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(5):
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.close()
    finally:
        await listener.close()


async def test_a_master_on_a_public_address_without_tls_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pydet.master.listener")
    async with serving():
        pass
    assert not caplog.records
    monkeypatch.setattr(listener_module, "is_loopback", lambda host: False)
    async with serving() as listener:
        channel = grpclib.client.Channel("127.0.0.1", listener.port)
        await v1.DeterminedStub(channel).get_master(v1.GetMasterRequest())
        channel.close()
    (record,) = caplog.records
    assert "without TLS" in record.getMessage()


def test_loopback_addresses() -> None:
    assert listener_module.is_loopback("127.0.0.1")
    assert listener_module.is_loopback("::1")
    assert listener_module.is_loopback("localhost")
    assert not listener_module.is_loopback("0.0.0.0")
    assert not listener_module.is_loopback("10.0.0.1")
