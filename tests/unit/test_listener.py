from __future__ import annotations

import statistics
import time

import grpclib.client
import grpclib.server
from starlette.applications import Starlette

from determined.api.gen import v1
from master.listener import Listener, bind


class _Master(v1.DeterminedBase):
    async def get_master(self, message: v1.GetMasterRequest) -> v1.GetMasterResponse:
        return v1.GetMasterResponse(version="x")


async def test_small_rpcs_do_not_wait_for_delayed_acks() -> None:
    # With Nagle's algorithm on the master's sockets, each reply's trailing frames wait for
    # the client's delayed ACK: about 40 ms per call.
    listener = Listener(grpclib.server.Server([_Master()]), Starlette())
    await listener.start(bind("127.0.0.1", 0))
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
        await listener.close()
