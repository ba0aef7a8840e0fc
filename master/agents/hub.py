"""The ``Agents.Connect`` stream: each agent's registration, liveness and reports, kept in
the ``AgentTable`` and passed to the ``AgentEvents`` receiver the hub is built with."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from typing import Any

import betterproto2
import grpclib.const
import grpclib.server
from grpclib.exceptions import GRPCError

from determined.api.gen import v1
from determined.common import errors
from pydet.master.agents.table import Agent, AgentEvents, AgentTable, Slot

log = logging.getLogger(__name__)


class AgentHub:
    """Serves ``/v1.Agents/Connect``: registers agents in the table and passes what they
    report to ``events``."""

    def __init__(
        self, table: AgentTable, events: AgentEvents, *, cluster_id: str, version: str
    ) -> None:
        self._table = table
        self._events = events
        self._cluster_id = cluster_id
        self._version = version
        self._generations = itertools.count(1)

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        return {
            "/v1.Agents/Connect": grpclib.const.Handler(
                self._connect,
                grpclib.const.Cardinality.STREAM_STREAM,
                v1.AgentMessage,
                v1.MasterMessage,
            )
        }

    def _register(self, hello: v1.AgentHello, peer: str) -> Agent:
        if not hello.agent_id:
            raise GRPCError(grpclib.const.Status.INVALID_ARGUMENT, "the hello has no agent_id")
        agent = self._table.agents.get(hello.agent_id)
        if agent is None:
            agent = Agent(id=hello.agent_id, registered_time=time.time())
            self._table.agents[agent.id] = agent
        elif agent.outbox is not None:
            if hello.instance_id != agent.instance_id:
                # Another process claims a connected agent's id. Refused; it retries, and is
                # let in once the first one's connection is found dead (keepalive pings).
                raise GRPCError(
                    grpclib.const.Status.ALREADY_EXISTS,
                    f"agent {agent.id!r} is already connected from {agent.address} "
                    f"({agent.hostname or 'unknown host'}); give each agent its own --agent-id",
                )
            log.warning("agent %s reconnected; dropping its previous connection", agent.id)
            agent.hang_up()
        agent.instance_id = hello.instance_id
        agent.problems = problems_of(hello, peer)
        for problem in agent.problems:
            log.warning("agent %s: %s", agent.id, problem)
        in_use = {s.id: s.allocation_id for s in agent.slots.values()}
        enabled = {s.id: s.enabled for s in agent.slots.values()}
        agent.hostname = hello.hostname
        agent.address = hello.address or "127.0.0.1"
        agent.resource_pool = hello.resource_pool or "default"
        agent.runtime = hello.runtime or "process"
        agent.version = hello.version
        agent.slots = {
            s.id: Slot(
                id=s.id,
                type=s.type or "cpu",
                device=s.device,
                uuid=s.uuid,
                enabled=enabled.get(s.id, True),
                allocation_id=in_use.get(s.id, ""),
            )
            for s in hello.slots
        }
        agent.connected = True
        agent.generation = next(self._generations)
        agent.outbox = asyncio.Queue()
        for msg in agent.pending:
            agent.outbox.put_nowait(msg)
        agent.pending.clear()
        return agent

    async def _connect(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        first = await stream.recv_message()
        if first is None or first.hello is None:
            raise GRPCError(
                grpclib.const.Status.INVALID_ARGUMENT, "the first message must be hello"
            )
        hello: v1.AgentHello = first.hello
        agent = self._register(hello, _peer_host(stream))
        generation = agent.generation
        outbox = agent.outbox
        assert outbox is not None
        log.info(
            "agent %s connected from %s with %d slots", agent.id, agent.address, len(agent.slots)
        )
        await stream.send_message(
            v1.MasterMessage(
                welcome=v1.Welcome(
                    cluster_id=self._cluster_id, master_version=self._version, clock=time.time()
                )
            )
        )
        try:
            await self._events.agent_connected(agent, hello.running)
            async with asyncio.TaskGroup() as tg:
                sender = tg.create_task(self._send_loop(stream, outbox))
                await self._receive_loop(stream, agent)
                sender.cancel()
        except* (ConnectionError, grpclib.exceptions.StreamTerminatedError) as eg:
            log.info("agent %s stream ended: %s", agent.id, eg.exceptions[0])
        except* errors.ResourceExhausted as eg:
            # The master's disk is full (said once by the store): the agent reconnects and
            # sends again what was not acknowledged (its containers' exits).
            log.info(
                "agent %s: ending its stream until there is space: %s", agent.id, eg.exceptions[0]
            )
        finally:
            if agent.generation == generation:
                agent.connected = False
                agent.outbox = None
                log.info("agent %s disconnected", agent.id)
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._events.agent_disconnected(agent))

    async def _send_loop(
        self,
        stream: grpclib.server.Stream[Any, Any],
        outbox: asyncio.Queue[v1.MasterMessage | None],
    ) -> None:
        while True:
            msg = await outbox.get()
            if msg is None:
                raise ConnectionError("closed by the master")
            await stream.send_message(msg)

    async def _receive_loop(self, stream: grpclib.server.Stream[Any, Any], agent: Agent) -> None:
        events = self._events
        async for msg in stream:
            if msg.logs is not None:
                await events.container_logs(agent, msg.logs)
            elif msg.started is not None:
                await events.container_started(agent, msg.started)
            elif msg.pulling is not None:
                await events.container_pulling(agent, msg.pulling)
            elif msg.exited is not None:
                await events.container_exited(agent, msg.exited)
                agent.send(
                    v1.MasterMessage(
                        exit_acknowledged=v1.ExitAcknowledged(container_id=msg.exited.container_id)
                    )
                )
            else:
                kind, _ = betterproto2.which_one_of(msg, "msg")
                log.warning("agent %s sent an unexpected %s message", agent.id, kind or "empty")
        raise ConnectionError("the agent closed its stream")


# An agent's clock this far off the master's makes its log timestamps and timeouts misleading.
MAX_CLOCK_SKEW = 5.0
_LOOPBACK = ("127.", "::1", "localhost")


def problems_of(hello: v1.AgentHello, peer: str) -> list[str]:
    """What is wrong with an agent's setup, seen from its hello and the address it connects
    from: said in the master's log and in `det agent list`, never a reason to refuse it."""
    problems = []
    if hello.clock:
        skew = hello.clock - time.time()
        if abs(skew) > MAX_CLOCK_SKEW:
            problems.append(
                f"its clock is {abs(skew):.0f} s {'ahead of' if skew > 0 else 'behind'} the "
                "master's: log times and timeouts will be off; synchronize it (NTP)"
            )
    address = hello.address or "127.0.0.1"
    if address.startswith(_LOOPBACK) and peer and not peer.startswith(_LOOPBACK):
        problems.append(
            f"it gives {address} as its address but connects from {peer}: containers on other "
            f"hosts cannot reach it; start it with --address {peer}"
        )
    return problems


def _peer_host(stream: grpclib.server.Stream[Any, Any]) -> str:
    try:
        addr = stream.peer.addr()
    except Exception:  # a transport without a peer (in-memory tests)
        return ""
    return str(addr[0]) if addr else ""
