"""``determined.api.channel``, the blocking gRPC client tasks use, against a real master and
against peers that misbehave (silent, hanging up)."""

from __future__ import annotations

import os
import pathlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from determined.api import channel, lite
from determined.common import client, context, errors
from tests.cluster import Cluster, cluster_fixture

CONFIG = (
    '{"entrypoint": "true", "max_restarts": 0,'
    ' "searcher": {"name": "single", "metric": "x", "max_length": 1}}'
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("channel"), agents=0)


def stub_for(cluster: Cluster) -> tuple[channel.Channel, lite.Stub]:
    ch = client.blocking_channel(cluster.address)
    return ch, lite.stub(ch.unary, metadata=client.metadata(cluster.token))


def test_megabytes_go_both_ways_past_the_flow_control_windows(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "blob.bin").write_bytes(os.urandom(3_000_000))  # incompressible
    packed = context.pack_context(tmp_path)
    ch, stub = stub_for(cluster)
    try:
        created = stub.create_experiment(
            lite.CreateExperimentRequest(config=CONFIG, context=packed, activate=True), timeout=60
        )
        got = stub.get_experiment_context(
            lite.GetExperimentContextRequest(experiment_id=created.experiment.id), timeout=60
        )
        assert got.context == packed
        # The connection is reused for the next call.
        assert stub.get_master(lite.GetMasterRequest(), timeout=10).cluster_name
    finally:
        ch.close()


def test_the_masters_errors_arrive_with_their_status(cluster: Cluster) -> None:
    ch, stub = stub_for(cluster)
    try:
        with pytest.raises(GRPCError) as caught:
            stub.get_experiment(lite.GetExperimentRequest(experiment_id=10**6), timeout=10)
        assert caught.value.status is Status.NOT_FOUND
        assert isinstance(client.translate(caught.value, cluster.address), errors.NotFound)
        anonymous = lite.stub(ch.unary)
        with pytest.raises(GRPCError) as caught:
            anonymous.get_experiments(lite.GetExperimentsRequest(), timeout=10)
        assert caught.value.status is Status.UNAUTHENTICATED
    finally:
        ch.close()


@pytest.fixture
def silent_peer() -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """A listener that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    yield server, accepted
    server.close()
    for conn in accepted:
        conn.close()


def test_a_call_that_gets_no_answer_times_out(
    silent_peer: tuple[socket.socket, list[socket.socket]],
) -> None:
    server, _ = silent_peer
    ch = channel.Channel("127.0.0.1", server.getsockname()[1])
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        ch.unary(
            "/v1.Determined/GetMaster", lite.GetMasterRequest(), lite.GetMasterResponse, timeout=0.3
        )
    assert time.monotonic() - began < 5
    ch.close()


def test_closing_the_channel_ends_a_call_waiting_for_its_answer(
    silent_peer: tuple[socket.socket, list[socket.socket]],
) -> None:
    server, _ = silent_peer
    ch = channel.Channel("127.0.0.1", server.getsockname()[1])
    failures: list[BaseException] = []

    def long_poll() -> None:
        try:
            ch.unary("/v1.Determined/GetMaster", lite.GetMasterRequest(), lite.GetMasterResponse)
        except BaseException as e:
            failures.append(e)

    caller = threading.Thread(target=long_poll)
    caller.start()
    time.sleep(0.3)
    ch.close()
    caller.join(timeout=5)
    assert not caller.is_alive()
    assert failures and isinstance(failures[0], OSError)


def test_a_peer_that_hangs_up_is_unavailable_not_a_crash(
    silent_peer: tuple[socket.socket, list[socket.socket]],
) -> None:
    server, accepted = silent_peer
    ch = channel.Channel("127.0.0.1", server.getsockname()[1])
    hang_up = threading.Timer(0.2, lambda: [c.close() for c in accepted])
    hang_up.start()
    with pytest.raises(ConnectionError) as caught:
        ch.unary(
            "/v1.Determined/GetMaster", lite.GetMasterRequest(), lite.GetMasterResponse, timeout=10
        )
    hang_up.join()
    assert isinstance(client.translate(caught.value, "127.0.0.1:1"), errors.Unavailable)
    ch.close()


def test_a_server_stream_ends_cleanly_or_with_the_masters_error(cluster: Cluster) -> None:
    ch = client.blocking_channel(cluster.address)
    stub = lite.stub(ch.unary, stream=ch.stream, metadata=client.metadata(cluster.token))
    try:
        # A task without lines: the stream ends, with no message and status OK.
        assert list(stub.task_logs(lite.TaskLogsRequest(task_id="1.1"), timeout=10)) == []
        with pytest.raises(GRPCError) as caught:
            list(stub.task_logs(lite.TaskLogsRequest(task_id="no-such-task"), timeout=10))
        assert caught.value.status is Status.NOT_FOUND
        assert caught.value.message == "task no-such-task not found"
        # The connection survives both for the next call.
        assert stub.get_master(lite.GetMasterRequest(), timeout=10).cluster_name
    finally:
        ch.close()
