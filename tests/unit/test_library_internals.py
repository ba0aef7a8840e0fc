"""The private parts of grpclib and uvicorn that pydet relies on, checked by name.

master/listener.py serves grpclib and uvicorn on one port through attributes those
libraries do not promise to keep; pyproject.toml pins both to the versions checked here.
When an upgrade moves one of these, this test says what and where, instead of the master
failing at its first connection.
"""

from __future__ import annotations

import asyncio
import inspect
import socket

import grpclib
import grpclib.config
import grpclib.server
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.server import ServerState

_UPGRADE = "update master/listener.py for it, then the version pin in pyproject.toml"


async def test_grpclib_server_can_serve_a_connection_it_did_not_accept() -> None:
    server = grpclib.server.Server([])
    assert callable(getattr(server, "_protocol_factory", None)), (
        f"grpclib {grpclib.__version__} has no Server._protocol_factory, which the master "
        f"uses to hand it a sniffed connection; {_UPGRADE}"
    )
    assert isinstance(getattr(server, "_handlers", None), set), (
        f"grpclib {grpclib.__version__} has no Server._handlers set, which the master closes "
        f"on shutdown; {_UPGRADE}"
    )


async def test_grpclib_connection_shows_its_calls_in_flight() -> None:
    # The listener's idle sweep reads H2Protocol.processor.streams (calls in flight) and
    # .connection.streams_started (calls started so far).
    server = grpclib.server.Server([])
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_accepted_socket(server._protocol_factory, sock=ours)
    try:
        processor = getattr(protocol, "processor", None)
        assert processor is not None and isinstance(getattr(processor, "streams", None), dict), (
            f"grpclib {grpclib.__version__}'s H2Protocol has no processor.streams; {_UPGRADE}"
        )
        assert isinstance(getattr(protocol.connection, "streams_started", None), int), (
            f"grpclib {grpclib.__version__}'s Connection has no streams_started; {_UPGRADE}"
        )
    finally:
        transport.close()
        theirs.close()


def test_grpclib_keepalive_settings_are_accepted() -> None:
    # agent/connection.py pings the master with these (grpclib's underscore-named options).
    grpclib.config.Configuration(
        _keepalive_time=10.0,
        _keepalive_timeout=20.0,
        _http2_max_pings_without_data=0,
        _http2_min_sent_ping_interval_without_data=10.0,
    )


def test_uvicorn_h11_protocol_can_be_built_per_connection() -> None:
    params = inspect.signature(H11Protocol).parameters
    missing = {"config", "server_state", "app_state"} - set(params)
    assert not missing, (
        f"uvicorn {uvicorn.__version__}'s H11Protocol no longer takes {sorted(missing)}; "
        + _UPGRADE
    )
    state = ServerState()
    for name in ("connections", "tasks"):
        assert hasattr(state, name), (
            f"uvicorn {uvicorn.__version__}'s ServerState has no {name!r}; {_UPGRADE}"
        )
    assert callable(getattr(H11Protocol, "shutdown", None)), (
        f"uvicorn {uvicorn.__version__}'s H11Protocol has no shutdown(); {_UPGRADE}"
    )
    # The idle sweep reads H11Protocol.cycle and the cycle's response_complete.
    assert "self.cycle" in inspect.getsource(H11Protocol), (
        f"uvicorn {uvicorn.__version__}'s H11Protocol has no cycle; {_UPGRADE}"
    )
    assert "self.response_complete" in inspect.getsource(RequestResponseCycle.__init__), (
        f"uvicorn {uvicorn.__version__}'s RequestResponseCycle has no response_complete; "
        + _UPGRADE
    )
