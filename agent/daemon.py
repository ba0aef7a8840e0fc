"""The agent daemon: a runtime, an outbox and the connection to the master, wired together.

``run()`` serves until ``request_stop()`` (or ``close()``); then it stops taking orders,
stops its containers (SIGTERM, SIGKILL after ``STOP_GRACE_SECONDS``), reports their exits
if the master is connected, and ends the stream.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any

import determined
from determined.api.gen import v1
from determined.common import client
from pydet.agent import wire
from pydet.agent.config import AgentConfig
from pydet.agent.connection import MAX_BACKOFF, MIN_BACKOFF, Connection
from pydet.agent.outbox import Outbox
from pydet.agent.process_runtime import ProcessRuntime
from pydet.agent.runtime import Exited, KillOrder, Order, Runtime, StartOrder
from pydet.agent.slots import SlotSpec

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 10.0
# On shutdown: how long the stream may take to flush and end before it is cut.
CLOSE_STREAM_SECONDS = 5.0


class Daemon:
    def __init__(
        self,
        config: AgentConfig,
        *,
        slots: Sequence[SlotSpec],
        runtime: Runtime | None = None,
        outbox: Outbox | None = None,
        stop_grace_seconds: float = STOP_GRACE_SECONDS,
        min_backoff: float = MIN_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
    ) -> None:
        self.config = config
        self.slots = list(slots)
        self._runtime: Runtime = runtime or ProcessRuntime(
            work_dir=config.work_dir,
            agent_id=config.agent_id,
            master=config.master,
            slots=self.slots,
            master_cert_file=config.master_cert_file,
        )
        self._outbox = outbox or Outbox(on_sent=self._runtime.lines_sent)
        self._stop_grace = stop_grace_seconds
        self.connection = Connection(
            master=config.master,
            agent_id=config.agent_id,
            hello=self._hello,
            outbox=self._outbox,
            on_order=self._on_order,
            token=config.token,
            master_cert_file=config.master_cert_file,
            min_backoff=min_backoff,
            max_backoff=max_backoff,
        )
        self._hostname = socket.gethostname()
        # Why the last hello could not find this host's address (said once, not per retry).
        self._address_problem: str | None = None
        self._instance_id = uuid.uuid4().hex
        self._accepting = True
        self._stop = asyncio.Event()
        self._done = asyncio.Event()
        self._running = False
        self._tasks: asyncio.TaskGroup | None = None
        # Orders run one at a time, in arrival order, in a task of their own: a broken
        # stream must not cancel a start halfway, and a kill must find the container that
        # an earlier start created.
        self._orders: asyncio.Queue[Order | None] = asyncio.Queue()
        self._start_lock = asyncio.Lock()

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def outbox(self) -> Outbox:
        """What waits to be sent to the master."""
        return self._outbox

    async def run(self) -> None:
        if self._running or self._done.is_set():
            raise RuntimeError("Daemon.run() can only be called once")
        self._running = True
        log.info(
            "agent %s: %d %s slot(s), %s runtime, work dir %s, master %s",
            self.config.agent_id,
            len(self.slots),
            self.slots[0].type if self.slots else "cpu",
            self._runtime.name,
            self.config.work_dir,
            self.config.master,
        )
        try:
            async with asyncio.TaskGroup() as tg:
                self._tasks = tg
                tg.create_task(self._serve_orders(), name="orders")
                connection = tg.create_task(self.connection.run(), name="connection")
                await self._stop.wait()
                await self._shutdown(connection)
                self._orders.put_nowait(None)
        finally:
            self._tasks = None
            await self._runtime.close()
            self._done.set()

    def request_stop(self) -> None:
        """Begin an orderly shutdown; ``run`` returns when it is done. Safe from signals."""
        self._stop.set()

    def kill_now(self) -> None:
        """Force-kill every container at once (a second signal: no time to be orderly)."""
        self._runtime.kill_now()

    async def close(self) -> None:
        """Stop (if running) and wait until everything is released; idempotent."""
        self._stop.set()
        if self._running:
            await self._done.wait()
        elif not self._done.is_set():
            self._done.set()
            await self._runtime.close()

    async def _shutdown(self, connection: asyncio.Task[None]) -> None:
        self._accepting = False
        async with self._start_lock:  # a start under way finishes, and is stopped below
            running = self._runtime.running()
        if running:
            log.info(
                "stopping %d container(s) (SIGTERM, SIGKILL after %.0f s)",
                len(running),
                self._stop_grace,
            )
            async with asyncio.TaskGroup() as tg:
                for c in running:
                    tg.create_task(
                        self._guard(self._runtime.kill(c.container_id, self._stop_grace))
                    )
        if not await self.connection.close(timeout=CLOSE_STREAM_SECONDS):
            log.warning("the master did not end the stream in time; closing it")
            connection.cancel()
        await asyncio.wait([connection])
        if self._outbox.unacked_count:
            log.warning(
                "%d container exit(s) were not acknowledged by the master",
                self._outbox.unacked_count,
            )
        log.info("agent %s stopped", self.config.agent_id)

    def _hello(self) -> v1.AgentMessage:
        return wire.hello(
            agent_id=self.config.agent_id,
            hostname=self._hostname,
            address=self._address(),
            slots=self.slots,
            resource_pool=self.config.resource_pool,
            version=determined.__version__,
            runtime=self._runtime.name,
            running=self._runtime.running(),
            instance_id=self._instance_id,
            clock=time.time(),
        )

    def _address(self) -> str:
        if self.config.address:
            return self.config.address
        try:
            address = address_towards(self.config.master)
        except OSError as e:
            problem = e.strerror or str(e)
            # A master name that does not resolve is the connection's to say, once.
            if problem != self._address_problem and not isinstance(e, socket.gaierror):
                log.warning(
                    "cannot find this host's address towards %s (%s); using 127.0.0.1",
                    self.config.master,
                    problem,
                )
            self._address_problem = problem
            return "127.0.0.1"
        self._address_problem = None
        return address

    def _on_order(self, order: Order) -> None:
        self._orders.put_nowait(order)

    async def _serve_orders(self) -> None:
        while (order := await self._orders.get()) is not None:
            if isinstance(order, KillOrder):
                assert self._tasks is not None
                kill = self._runtime.kill(order.container_id, order.grace_seconds)
                self._tasks.create_task(self._guard(kill))
                continue
            async with self._start_lock:
                if not self._accepting:
                    self._refuse(order, "the agent is shutting down")
                    continue
                try:
                    await self._runtime.start(order, self._outbox.put)
                except Exception as e:
                    log.exception("starting container %s failed", order.container_id)
                    self._refuse(order, f"the agent could not start the container: {e}")

    def _refuse(self, order: StartOrder, error: str) -> None:
        log.warning("not starting container %s: %s", order.container_id, error)
        self._outbox.put(Exited(order.container_id, order.allocation_id, 1, error, time.time()))

    async def _guard(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run one container's chore; a failure is logged, never fatal to the daemon."""
        try:
            await coro
        except Exception:
            log.exception("a container operation failed")


def address_towards(master: str) -> str:
    """This host's address on its route to the master: the one its peers on that network
    reach it by. Connecting a UDP socket only picks the route and source; nothing is sent.
    Asked when the agent greets the master, so the master's name has just resolved. Raises
    ``OSError`` when the name does not resolve or there is no route."""
    host, port = client.parse_address(master)
    family, kind, proto, _, target = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, kind, proto) as s:
        s.connect(target)
        return str(s.getsockname()[0])
