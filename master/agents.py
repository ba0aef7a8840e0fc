"""Agents: the table of known agents with their slots, and the ``Agents.Connect`` stream.

The table is what the rest of the master reads and gives orders through; the hub serves the
stream and keeps the table up to date. What a container's events mean (trials, allocations)
is decided by the ``AgentEvents`` receiver the hub is built with, so this module never
imports the domain.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import betterproto2
import grpclib.const
import grpclib.server
from grpclib.exceptions import GRPCError

from determined.api.gen import v1

log = logging.getLogger(__name__)


class AgentEvents(Protocol):
    async def agent_connected(
        self, agent: Agent, running: Sequence[v1.RunningContainer]
    ) -> None: ...
    async def agent_disconnected(self, agent: Agent) -> None: ...
    async def container_pulling(self, agent: Agent, msg: v1.ContainerPulling) -> None: ...
    async def container_started(self, agent: Agent, msg: v1.ContainerStarted) -> None: ...
    async def container_logs(self, agent: Agent, msg: v1.ContainerLogs) -> None: ...
    async def container_exited(self, agent: Agent, msg: v1.ContainerExited) -> None: ...


@dataclass
class Slot:
    id: str
    type: str
    device: str
    uuid: str
    enabled: bool = True
    allocation_id: str = ""


@dataclass
class Agent:
    id: str
    hostname: str = ""
    address: str = ""
    resource_pool: str = "default"
    runtime: str = "process"
    version: str = ""
    slots: dict[str, Slot] = field(default_factory=dict)
    registered_time: float = 0.0
    enabled: bool = True
    draining: bool = False
    connected: bool = False
    # Containers the master believes are on this agent.
    containers: set[str] = field(default_factory=set)
    # The live connection's outbox; None while disconnected.
    outbox: asyncio.Queue[v1.MasterMessage | None] | None = None
    generation: int = 0
    # Orders that could not be delivered while disconnected (kills), sent on reconnect.
    pending: list[v1.MasterMessage] = field(default_factory=list)
    # The connected agent process (its hello's instance_id).
    instance_id: str = ""
    # What is wrong with its setup, as shown by `det agent list` (see problems_of).
    problems: list[str] = field(default_factory=list)

    def free_slots(self) -> list[str]:
        return [s.id for s in self.slots.values() if s.enabled and not s.allocation_id]

    def send(self, msg: v1.MasterMessage) -> None:
        if self.outbox is not None:
            self.outbox.put_nowait(msg)
        else:
            self.pending.append(msg)

    def to_proto(self) -> v1.Agent:
        return v1.Agent(
            id=self.id,
            address=self.address,
            slots=[
                v1.Slot(
                    id=s.id,
                    type=s.type,
                    device=s.device,
                    uuid=s.uuid,
                    # Disabling an agent disables its slots, as `det slot list` shows them.
                    enabled=s.enabled and self.enabled,
                    allocation_id=s.allocation_id,
                )
                for s in self.slots.values()
            ],
            resource_pool=self.resource_pool,
            registered_time=self.registered_time,
            enabled=self.enabled,
            draining=self.draining,
            connected=self.connected,
            runtime=self.runtime,
            version=self.version,
            problems=list(self.problems),
            container_ids=sorted(self.containers),
        )


class AgentTable:
    """Every agent the master knows of, connected or not, by id."""

    def __init__(self) -> None:
        self.agents: dict[str, Agent] = {}

    def connected(self) -> list[Agent]:
        return [a for a in self.agents.values() if a.connected]

    def get_or_add(self, agent_id: str) -> Agent:
        """The agent, known from now on if it was not (an agent named by a restored
        allocation before it has reconnected)."""
        agent = self.agents.get(agent_id)
        if agent is None:
            agent = self.agents[agent_id] = Agent(id=agent_id)
        return agent


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
            agent.outbox.put_nowait(None)
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
                raise ConnectionError("superseded by a newer connection")
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
