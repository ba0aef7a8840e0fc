"""No client can exhaust the master's file descriptors by holding connections open.

2,000 idle TCP connections from several loopback addresses are held against a real
master while `det experiment list` keeps answering; connections over the per-address cap
are refused; the idle ones are closed once the (here shortened) first-request timeout has
passed; an agent's long-lived stream outlives the (shortened) idle timeout.
"""

from __future__ import annotations

import contextlib
import pathlib
import resource
import selectors
import socket
import time
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster

HOLD = 2000
SOURCES = [f"127.0.0.{i}" for i in range(2, 10)]  # 250 connections each
PER_ADDRESS = 300
EXTRA = 60  # from SOURCES[0]: 50 fit under its cap, 10 do not
FIRST_REQUEST_TIMEOUT = 15.0
IDLE_TIMEOUT = 3.0
MASTER_CONFIG = f"""
security:
  max_connections_per_address: {PER_ADDRESS}
  first_request_timeout: {FIRST_REQUEST_TIMEOUT}
  idle_connection_timeout: {IDLE_TIMEOUT}
"""


@pytest.fixture
def fd_room() -> Iterator[None]:
    """Room for the test's own sockets under this process's open-file limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = HOLD + EXTRA + 512
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the open-file hard limit ({hard}) is below the {needed} this test needs")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _open(port: int, source: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(5)
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return sock


def _ended(sock: socket.socket) -> bool:
    """Whether the master ended the connection (EOF or reset); the socket is readable."""
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def _closed_within(socks: list[socket.socket], seconds: float) -> set[socket.socket]:
    """The sockets among ``socks`` that the master ends within ``seconds``."""
    ended: set[socket.socket] = set()
    with selectors.DefaultSelector() as sel:
        for sock in socks:
            sel.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + seconds
        while len(ended) < len(socks):
            left = max(0.0, deadline - time.monotonic())
            for key, _ in sel.select(timeout=left):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                sel.unregister(sock)
                if _ended(sock):
                    ended.add(sock)
            if left == 0:
                break
    return ended


def test_idle_connections_cannot_starve_the_master(fd_room: None, tmp_path: pathlib.Path) -> None:
    cluster = Cluster(tmp_path, master_config=MASTER_CONFIG)
    held: list[socket.socket] = []
    extra: list[socket.socket] = []
    try:
        cluster.start_master()
        cluster.start_agent()
        began = time.monotonic()
        for i in range(HOLD):
            assert time.monotonic() - began < 60, f"only {i} connections opened in 60 s"
            held.append(_open(cluster.port, SOURCES[i % len(SOURCES)]))
        opened = time.monotonic()

        for _ in range(3):
            t = time.monotonic()
            out = cluster.det("experiment", "list", timeout=30).stdout
            elapsed = time.monotonic() - t
            print(f"det experiment list answered in {elapsed:.2f} s beside {HOLD} idle ones")
            assert elapsed < 5, "det experiment list was slow"
            assert "ID" in out

        extra = [_open(cluster.port, SOURCES[0]) for _ in range(EXTRA)]
        refused = _closed_within(extra, 3)
        assert len(refused) == EXTRA - (PER_ADDRESS - HOLD // len(SOURCES))
        assert not _closed_within(held, 0), "an idle connection was closed too early"

        # The agent's stream (a call in flight, pings every 10 s) outlived the idle timeout.
        assert time.monotonic() - opened > IDLE_TIMEOUT
        assert [a["connected"] for a in cluster.agents_json()] == [True]
        assert "lost the master" not in (tmp_path / "agent-0.log").read_text()

        left = FIRST_REQUEST_TIMEOUT - (time.monotonic() - opened)
        kept = [s for s in held + extra if s not in refused]
        closed = _closed_within(kept, left + 5)
        assert len(closed) == len(kept), f"{len(kept) - len(closed)} idle connections stayed"
        assert time.monotonic() - opened > FIRST_REQUEST_TIMEOUT - 1
        cluster.det("experiment", "list", timeout=30)
    except BaseException:
        print(cluster.dump_logs())
        raise
    finally:
        for sock in held + extra:
            with contextlib.suppress(OSError):
                sock.close()
        cluster.close()
