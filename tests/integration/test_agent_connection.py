"""The agent daemon against a fake master: the stream, reconnects, resends, shutdown.

The fake master is a minimal grpclib server implementing ``v1.AgentsBase`` on a loopback
port; it records every message and sends whatever orders the test queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpclib.const
import grpclib.exceptions
import grpclib.server
import pytest

from determined.api.gen import v1
from pydet.agent.config import AgentConfig
from pydet.agent.daemon import Daemon
from pydet.agent.outbox import Outbox
from pydet.agent.slots import artificial

WAIT = 20.0


class FakeMaster(v1.AgentsBase):
    def __init__(
        self,
        *,
        ack: bool = True,
        reject: list[grpclib.exceptions.GRPCError] | None = None,
        clock_offset: float = 0.0,
    ):
        self.ack = ack
        self.clock_offset = clock_offset
        self.reject = list(reject or [])
        self.received: list[v1.AgentMessage] = []
        self.orders: asyncio.Queue[v1.MasterMessage] = asyncio.Queue()
        self.sessions = 0
        self.streams_ended = 0

    async def connect(
        self, messages: AsyncIterator[v1.AgentMessage]
    ) -> AsyncIterator[v1.MasterMessage]:
        hello = await messages.__anext__()
        self.received.append(hello)
        self.sessions += 1
        if self.reject:
            raise self.reject.pop(0)
        yield v1.MasterMessage(
            welcome=v1.Welcome(
                cluster_id="test-cluster",
                master_version="t",
                clock=time.time() + self.clock_offset,
            )
        )
        reader = asyncio.create_task(self._read(messages))
        try:
            while True:
                order = asyncio.create_task(self.orders.get())
                await asyncio.wait({order, reader}, return_when=asyncio.FIRST_COMPLETED)
                if not order.done():
                    order.cancel()
                    reader.result()
                    self.streams_ended += 1
                    return
                yield order.result()
        finally:
            reader.cancel()

    async def _read(self, messages: AsyncIterator[v1.AgentMessage]) -> None:
        async for msg in messages:
            self.received.append(msg)
            if msg.exited is not None and self.ack:
                ack = v1.ExitAcknowledged(container_id=msg.exited.container_id)
                self.orders.put_nowait(v1.MasterMessage(exit_acknowledged=ack))

    def send(self, **order: object) -> None:
        self.orders.put_nowait(v1.MasterMessage(**order))  # type: ignore[arg-type]

    def start(self, cid: str, *argv: str, **kwargs: object) -> None:
        self.send(
            start=v1.StartContainer(
                container_id=cid,
                allocation_id=f"alloc-{cid}",
                task_id="t",
                argv=list(argv),
                **kwargs,  # type: ignore[arg-type]
            )
        )

    def kill(self, cid: str, grace: float = 10) -> None:
        self.send(kill=v1.KillContainer(container_id=cid, grace_seconds=grace))

    def of(self, cid: str) -> list[v1.AgentMessage]:
        """Every message about one container, in arrival order."""
        return [m for m in self.received if _container_of(m) == cid]

    def lines(self, cid: str) -> list[str]:
        return [line.text for m in self.of(cid) if m.logs is not None for line in m.logs.lines]

    def exits(self, cid: str) -> list[v1.ContainerExited]:
        return [m.exited for m in self.of(cid) if m.exited is not None]

    def hellos(self) -> list[v1.AgentHello]:
        return [m.hello for m in self.received if m.hello is not None]

    async def wait_for(self, what: Callable[[], object], timeout: float = WAIT) -> None:
        async with asyncio.timeout(timeout):
            while not what():
                await asyncio.sleep(0.01)


def _container_of(msg: v1.AgentMessage) -> str | None:
    for part in (msg.started, msg.logs, msg.exited):
        if part is not None:
            return part.container_id
    return None


class _TrackingServer(grpclib.server.Server):
    """grpclib's server, remembering its connections so that a stop can cut them."""

    def __init__(self, handlers: list[FakeMaster]) -> None:
        super().__init__(handlers)
        self.protocols: list[Any] = []

    def _protocol_factory(self) -> Any:
        protocol = super()._protocol_factory()
        self.protocols.append(protocol)
        return protocol

    def cut_connections(self) -> None:
        for protocol in self.protocols:
            if hasattr(protocol, "connection"):
                protocol.connection.close()


class Server:
    """A fake master on a fixed loopback port that can be stopped and started again.

    A stop is a crash as the agent sees it: the connections are cut, not ended.
    """

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._server: _TrackingServer | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, master: FakeMaster) -> FakeMaster:
        self._server = _TrackingServer([master])
        await self._server.start("127.0.0.1", self.port, reuse_address=True)
        return master

    async def stop(self) -> None:
        if self._server is not None:
            self._server.cut_connections()
            self._server.close()
            await self._server.wait_closed()
            self._server = None


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        await s.stop()


def make_config(server: Server, tmp_path: Path, **overrides: object) -> AgentConfig:
    values: dict[str, object] = {
        "master": server.address,
        "agent_id": "agent-1",
        "slots": 2,
        "resource_pool": "pool-a",
        "runtime": "process",
        "work_dir": tmp_path / "work",
        "address": "10.1.2.3",
        "log_level": "DEBUG",
    }
    values.update(overrides)
    return AgentConfig(**values)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running_agent(server: Server, tmp_path: Path, **kwargs: object) -> AsyncIterator[Daemon]:
    cfg = make_config(server, tmp_path)
    daemon = Daemon(cfg, slots=artificial(2), min_backoff=0.05, max_backoff=0.3, **kwargs)  # type: ignore[arg-type]
    task = asyncio.create_task(daemon.run())
    try:
        yield daemon
    finally:
        await daemon.close()
        await task


def py(code: str) -> list[str]:
    return ["python3", "-c", textwrap.dedent(code)]


async def test_hello_comes_first_and_announces_the_slots(server: Server, tmp_path: Path) -> None:
    master = await server.start(FakeMaster())
    async with running_agent(server, tmp_path) as daemon:
        await master.wait_for(lambda: master.received)
        await master.wait_for(lambda: daemon.connection.connected)
        hello = master.received[0].hello
        assert hello is not None
        assert (hello.agent_id, hello.address, hello.resource_pool, hello.runtime) == (
            "agent-1",
            "10.1.2.3",
            "pool-a",
            "process",
        )
        assert hello.hostname == socket.gethostname()
        assert hello.version
        assert [(s.id, s.type, s.device, s.enabled) for s in hello.slots] == [
            ("0", "cpu", "cpu", True),
            ("1", "cpu", "cpu", True),
        ]
        assert hello.running == []
        assert daemon.connection.cluster_id == "test-cluster"
        # Its clock, and an id of this process that a reconnect repeats.
        assert abs(hello.clock - time.time()) < WAIT
        assert len(hello.instance_id) == 32


async def test_a_clock_off_the_masters_is_warned_about(
    server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    master = await server.start(FakeMaster(clock_offset=120))
    with caplog.at_level(logging.WARNING, logger="pydet.agent.connection"):
        async with running_agent(server, tmp_path) as daemon:
            await master.wait_for(lambda: daemon.connection.connected)
    assert "this host's clock is 120 s behind the master's" in caplog.text


async def test_start_order_reports_started_logs_and_exit_in_order(
    server: Server, tmp_path: Path
) -> None:
    master = await server.start(FakeMaster())
    code = """
        import os, sys
        for i in range(1200):
            print(f"out {i}")
        print("to stderr", file=sys.stderr)
        print(os.environ["DET_AGENT_ID"], os.environ["FROM_MASTER"], os.environ["DET_MASTER"])
        sys.exit(5)
    """
    async with running_agent(server, tmp_path):
        master.start("c1", *py(code), env={"FROM_MASTER": "yes"}, slot_ids=["1"])
        await master.wait_for(lambda: master.exits("c1"))
        msgs = master.of("c1")
        assert msgs[0].started is not None and msgs[0].started.pid > 0
        assert msgs[0].started.allocation_id == "alloc-c1"
        assert msgs[-1].exited is not None
        assert all(m.logs is not None for m in msgs[1:-1])
        assert all(m.logs is not None and len(m.logs.lines) <= 500 for m in msgs[1:-1])
        lines = master.lines("c1")
        assert [x for x in lines if x.startswith("out ")] == [f"out {i}" for i in range(1200)]
        assert f"agent-1 yes {server.address}" in lines
        stderr = [
            line.text
            for m in msgs
            if m.logs is not None
            for line in m.logs.lines
            if line.stdtype == "stderr"
        ]
        assert stderr == ["to stderr"]
        exited = msgs[-1].exited
        assert (exited.exit_code, exited.error, exited.allocation_id) == (5, "", "alloc-c1")


async def test_bad_orders_become_exits_and_the_agent_carries_on(
    server: Server, tmp_path: Path
) -> None:
    master = await server.start(FakeMaster())
    async with running_agent(server, tmp_path) as daemon:
        master.start("missing", "no-such-program-abc")
        master.start("empty")
        master.start("badslot", "true", slot_ids=["9"])
        master.kill("never-started")
        for cid in ("missing", "empty", "badslot"):
            await master.wait_for(functools.partial(master.exits, cid))
            [exited] = master.exits(cid)
            assert exited.exit_code in (1, 127) and exited.error, cid
            assert [m.started for m in master.of(cid) if m.started is not None] == []
        assert master.exits("missing")[0].exit_code == 127
        master.start("fine", "true")
        await master.wait_for(lambda: master.exits("fine"))
        assert master.exits("fine")[0].exit_code == 0
        assert daemon.connection.connected


async def test_kill_order_stops_the_container(server: Server, tmp_path: Path) -> None:
    master = await server.start(FakeMaster())
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """
    async with running_agent(server, tmp_path):
        master.start("c", *py(code))
        await master.wait_for(lambda: "ready" in master.lines("c"))
        master.kill("c", grace=0.3)
        await master.wait_for(lambda: master.exits("c"), timeout=5)
        assert master.exits("c")[0].exit_code == 128 + signal.SIGKILL


async def test_unacknowledged_exit_is_resent_after_the_master_restarts(
    server: Server, tmp_path: Path
) -> None:
    forgetful = await server.start(FakeMaster(ack=False))
    async with running_agent(server, tmp_path) as daemon:
        forgetful.start("c", *py("print('bye'); raise SystemExit(3)"))
        await forgetful.wait_for(lambda: forgetful.exits("c"))
        await server.stop()
        master = await server.start(FakeMaster(ack=True))
        await master.wait_for(lambda: master.exits("c"))
        # Right after the hello, before anything else.
        assert master.received[0].hello is not None
        assert master.received[0].hello.running == []
        assert master.received[1].exited is not None
        assert (master.received[1].exited.container_id, master.received[1].exited.exit_code) == (
            "c",
            3,
        )
        # Acknowledged now: a further reconnect does not send it again.
        await master.wait_for(lambda: daemon.outbox.unacked_count == 0)
        await server.stop()
        third = await server.start(FakeMaster())
        await third.wait_for(lambda: daemon.connection.connected and third.received)
        await asyncio.sleep(0.3)
        assert third.exits("c") == []


async def test_containers_keep_running_through_an_outage_and_their_logs_arrive_after(
    server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pydet.agent")
    first = await server.start(FakeMaster())
    code = """
        import itertools, time
        for i in itertools.count():
            print(f"tick {i}", flush=True)
            time.sleep(0.02)
    """
    async with running_agent(server, tmp_path):
        first.start("ticker", *py(code))
        await first.wait_for(lambda: "tick 3" in first.lines("ticker"))
        pid = next(m.started.pid for m in first.of("ticker") if m.started is not None)
        await server.stop()
        seen_before = len(first.lines("ticker"))
        await asyncio.sleep(1.0)  # the agent retries a few times meanwhile
        second = await server.start(FakeMaster())
        await second.wait_for(lambda: second.hellos())
        running = second.hellos()[0].running
        assert [(r.container_id, r.allocation_id, r.pid) for r in running] == [
            ("ticker", "alloc-ticker", pid)
        ]
        # Output written while no master listened arrives now, with nothing lost.
        await second.wait_for(lambda: len(second.lines("ticker")) > 40)
        ticks = first.lines("ticker")[:seen_before] + second.lines("ticker")
        numbers = [int(t.split()[1]) for t in ticks]
        assert numbers == list(range(len(numbers)))
        assert first.exits("ticker") == [] and second.exits("ticker") == []
        second.kill("ticker", grace=5)
        await second.wait_for(lambda: second.exits("ticker"))
        assert second.exits("ticker")[0].exit_code == 128 + signal.SIGTERM
    lost = [r for r in caplog.records if "lost the master" in r.getMessage()]
    assert len(lost) == 1, [r.getMessage() for r in caplog.records]
    assert any("reconnected to the master" in r.getMessage() for r in caplog.records)


async def test_output_beyond_the_buffer_limit_drops_the_oldest_lines_with_a_notice(
    server: Server, tmp_path: Path
) -> None:
    first = await server.start(FakeMaster())
    go, done = tmp_path / "go", tmp_path / "done"
    code = f"""
        import os, time
        print("ready", flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.01)
        for i in range(1000):
            print(f"line {{i}}")
        open({str(done)!r}, "w").close()
        time.sleep(60)
    """
    async with running_agent(server, tmp_path, outbox=Outbox(max_lines=100)) as daemon:
        first.start("chatty", *py(code))
        await first.wait_for(lambda: "ready" in first.lines("chatty"))
        await server.stop()
        await first.wait_for(lambda: not daemon.connection.connected)
        go.touch()
        await first.wait_for(done.exists)
        await asyncio.sleep(0.2)  # the agent reads the last lines from the pipe
        second = await server.start(FakeMaster())
        await second.wait_for(lambda: "line 999" in second.lines("chatty"))
        notice, *kept = second.lines("chatty")
        assert "900 earlier log line(s) were dropped" in notice
        assert kept == [f"line {i}" for i in range(900, 1000)]


async def test_a_refused_agent_retries_and_says_why(
    server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pydet.agent")
    taken = grpclib.exceptions.GRPCError(
        grpclib.const.Status.ALREADY_EXISTS, "agent agent-1 is already connected"
    )
    master = await server.start(FakeMaster(reject=[taken, taken, taken]))
    async with running_agent(server, tmp_path) as daemon:
        await master.wait_for(lambda: daemon.connection.connected)
        assert master.sessions == 4
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    refusals = [m for m in messages if "refused agent id 'agent-1'" in m]
    assert len(refusals) == 1, messages
    assert "already connected" in refusals[0]


async def test_agent_starts_before_the_master_and_connects_when_it_comes(
    server: Server, tmp_path: Path
) -> None:
    async with running_agent(server, tmp_path) as daemon:
        await asyncio.sleep(0.5)
        assert not daemon.connection.connected
        master = await server.start(FakeMaster())
        await master.wait_for(lambda: daemon.connection.connected)


async def test_stopping_the_agent_stops_containers_and_reports_their_exits(
    server: Server, tmp_path: Path
) -> None:
    master = await server.start(FakeMaster())
    stubborn = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """
    cfg = make_config(server, tmp_path)
    daemon = Daemon(cfg, slots=artificial(2), stop_grace_seconds=0.5)
    task = asyncio.create_task(daemon.run())
    master.start("a", *py(stubborn))
    master.start("b", "sleep", "60")
    await master.wait_for(lambda: "ready" in master.lines("a") and master.of("b"))
    daemon.request_stop()
    async with asyncio.timeout(WAIT):
        await task
    assert master.exits("a")[0].exit_code == 128 + signal.SIGKILL
    assert master.exits("b")[0].exit_code == 128 + signal.SIGTERM
    assert master.streams_ended == 1  # the stream was ended, not cut
    assert daemon.runtime.running() == []
    await daemon.close()  # idempotent


def _agent_process(server: Server, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pydet.agent",
            "--master",
            server.address,
            "--agent-id",
            "cli-agent",
            "--slots",
            "1",
            "--work-dir",
            str(tmp_path / "work"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


async def _wait_process(proc: subprocess.Popen[str], timeout: float = WAIT) -> int:
    async with asyncio.timeout(timeout):
        while proc.poll() is None:
            await asyncio.sleep(0.02)
    return proc.returncode


async def test_det_agent_exits_0_on_sigterm_after_stopping_its_containers(
    server: Server, tmp_path: Path
) -> None:
    master = await server.start(FakeMaster())
    proc = _agent_process(server, tmp_path)
    try:
        await master.wait_for(lambda: master.hellos())
        assert [s.id for s in master.hellos()[0].slots] == ["0"]
        master.start("job", "sleep", "60")
        await master.wait_for(lambda: master.of("job"))
        proc.send_signal(signal.SIGTERM)
        assert await _wait_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        output = proc.communicate()[0]
    assert master.exits("job")[0].exit_code == 128 + signal.SIGTERM, output
    assert "Traceback" not in output


async def test_det_agent_second_signal_exits_at_once(server: Server, tmp_path: Path) -> None:
    master = await server.start(FakeMaster())
    pidfile = tmp_path / "stubborn.pid"
    stubborn = f"""
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """
    proc = _agent_process(server, tmp_path)
    try:
        await master.wait_for(lambda: master.hellos())
        master.start("stubborn", *py(stubborn))
        await master.wait_for(lambda: pidfile.exists() and pidfile.read_text())
        proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.5)
        assert proc.poll() is None  # waiting out the container's grace period
        proc.send_signal(signal.SIGINT)
        assert await _wait_process(proc, timeout=5) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    container = int(pidfile.read_text())
    async with asyncio.timeout(5):
        while _alive(container):
            await asyncio.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slots", "-2"], "slots: must be >= 0"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--runtime", "docker"], "cannot reach the Docker engine"),
    ],
)
def test_det_agent_bad_flags_exit_2_with_one_line(args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.agent", "--master", "127.0.0.1:1", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DET_MASTER": "", "DOCKER_HOST": "unix:///nonexistent.sock"},
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert proc.stderr.startswith("det-agent: ")


def test_det_agent_config_file_unknown_key(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("slots: 1\nslotz: 2\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.agent", "--config-file", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "slotz: unknown key" in proc.stderr and "Traceback" not in proc.stderr
