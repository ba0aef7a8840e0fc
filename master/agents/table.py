"""The table of known agents with their slots: what the rest of the master reads and gives
orders through. ``hub`` serves the agents' stream and keeps it up to date; what a
container's events mean (trials, allocations) is decided by the ``AgentEvents`` receiver
the hub is built with, so this package never imports the domain.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from determined.api.gen import v1
from determined.common import timestamps


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

    def hang_up(self) -> None:
        """Close its connection from the master's side (it has been superseded, or the
        machine it ran on is gone); the hub then handles it as any disconnect."""
        if self.outbox is not None:
            self.outbox.put_nowait(None)

    def send(self, msg: v1.MasterMessage) -> None:
        if self.outbox is not None:
            self.outbox.put_nowait(msg)
        else:
            self.pending.append(msg)

    def to_proto(self) -> v1.Agent:
        """The agent as Determined's API shows it."""
        # A slot knows its allocation, not which of the allocation's containers holds it.
        containers = {
            s.allocation_id: v1.Container(parent=s.allocation_id, state=v1.ContainerState.RUNNING)
            for s in self.slots.values()
            if s.allocation_id
        }
        slots = {s.id: self._slot(s, containers.get(s.allocation_id)) for s in self.slots.values()}
        return v1.Agent(
            id=self.id,
            addresses=[self.address] if self.address else [],
            slots=slots,
            containers={
                c: v1.Container(id=c, state=v1.ContainerState.RUNNING)
                for c in sorted(self.containers)
            },
            resource_pools=[self.resource_pool],
            registered_time=timestamps.to_datetime(self.registered_time or None),
            enabled=self.enabled,
            draining=self.draining,
            slot_stats=_slot_stats(slots.values()),
            connected=self.connected,
            runtime=self.runtime,
            version=self.version,
            problems=list(self.problems),
        )

    def _slot(self, s: Slot, used_by: v1.Container | None) -> v1.Slot:
        device = v1.Device(
            id=int(s.id) if s.id.isdigit() else 0,
            brand=s.device,
            uuid=s.uuid,
            type=_DEVICE_TYPES.get(s.type, v1.DeviceType.UNSPECIFIED),
        )
        return v1.Slot(
            id=s.id,
            device=device,
            # Disabling an agent disables its slots, as `det slot list` shows them.
            enabled=s.enabled and self.enabled,
            draining=self.draining,
            container=used_by,
            allocation_id=s.allocation_id,
        )


_DEVICE_TYPES = {"cpu": v1.DeviceType.CPU, "cuda": v1.DeviceType.CUDA}


def _slot_stats(slots: Iterable[v1.Slot]) -> v1.SlotStats:
    """Determined's SlotStats: slots counted by device type and by brand."""
    stats = v1.SlotStats()
    for s in slots:
        assert s.device is not None
        for by, key in (
            (stats.type_stats, s.device.type.proto_name),
            (stats.brand_stats, s.device.brand),
        ):
            found = by.setdefault(str(key), v1.DeviceStats())
            found.total += 1
            found.disabled += 0 if s.enabled else 1
            found.draining += 1 if s.draining else 0
            if s.container is not None:
                state = str(s.container.state.proto_name)
                found.states[state] = found.states.get(state, 0) + 1
    return stats


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
