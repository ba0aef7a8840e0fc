"""Conversions between the agent's dataclasses and the generated protobuf messages.

This is the only module of the agent that knows the shape of ``v1`` messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from determined.api.gen import v1
from pydet.agent.runtime import (
    BindMount,
    ContainerSpec,
    DeviceMapping,
    Event,
    Exited,
    KillOrder,
    Order,
    Output,
    Pulling,
    RunAs,
    RunningContainer,
    Started,
    StartOrder,
)
from pydet.agent.slots import SlotSpec


def hello(
    *,
    agent_id: str,
    hostname: str,
    address: str,
    slots: Sequence[SlotSpec],
    resource_pool: str,
    version: str,
    runtime: str,
    running: Sequence[RunningContainer],
    instance_id: str = "",
    clock: float = 0.0,
) -> v1.AgentMessage:
    return v1.AgentMessage(
        hello=v1.AgentHello(
            agent_id=agent_id,
            hostname=hostname,
            address=address,
            slots=[
                v1.AgentSlot(id=s.id, type=s.type, device=s.device, uuid=s.uuid, enabled=True)
                for s in slots
            ],
            resource_pool=resource_pool,
            version=version,
            runtime=runtime,
            instance_id=instance_id,
            clock=clock,
            running=[
                v1.RunningContainer(
                    container_id=r.container_id, allocation_id=r.allocation_id, pid=r.pid
                )
                for r in running
            ],
        )
    )


def event_message(event: Event) -> v1.AgentMessage:
    if isinstance(event, Pulling):
        return v1.AgentMessage(
            pulling=v1.ContainerPulling(
                container_id=event.container_id,
                allocation_id=event.allocation_id,
                image=event.image,
                timestamp=event.timestamp,
            )
        )
    if isinstance(event, Started):
        return v1.AgentMessage(
            started=v1.ContainerStarted(
                container_id=event.container_id,
                allocation_id=event.allocation_id,
                pid=event.pid,
                timestamp=event.timestamp,
            )
        )
    if isinstance(event, Output):
        return v1.AgentMessage(
            logs=v1.ContainerLogs(
                container_id=event.container_id,
                allocation_id=event.allocation_id,
                lines=[
                    v1.LogLine(timestamp=line.timestamp, stdtype=line.stdtype, text=line.text)
                    for line in event.lines
                ],
            )
        )
    return v1.AgentMessage(exited=exited(event))


def exited(event: Exited) -> v1.ContainerExited:
    return v1.ContainerExited(
        container_id=event.container_id,
        allocation_id=event.allocation_id,
        exit_code=event.exit_code,
        error=event.error,
        timestamp=event.timestamp,
    )


def start_order(msg: v1.StartContainer) -> StartOrder:
    return StartOrder(
        container_id=msg.container_id,
        allocation_id=msg.allocation_id,
        task_id=msg.task_id,
        argv=tuple(msg.argv),
        env=dict(msg.env),
        slot_ids=tuple(msg.slot_ids),
        spec=container_spec(msg.spec) if msg.spec is not None else ContainerSpec(),
        run_as=(
            None
            if msg.run_as is None
            else RunAs(msg.run_as.uid, msg.run_as.gid, msg.run_as.user, msg.run_as.group)
        ),
    )


def container_spec(msg: v1.ContainerSpec) -> ContainerSpec:
    return ContainerSpec(
        image=msg.image,
        force_pull=msg.force_pull,
        registry_auth=msg.registry_auth,
        bind_mounts=tuple(
            BindMount(m.host_path, m.container_path, m.read_only, m.propagation)
            for m in msg.bind_mounts
        ),
        shm_size=msg.shm_size,
        add_capabilities=tuple(msg.add_capabilities),
        drop_capabilities=tuple(msg.drop_capabilities),
        devices=tuple(DeviceMapping(d.host_path, d.container_path, d.mode) for d in msg.devices),
        labels=dict(msg.labels),
    )


def order(msg: v1.MasterMessage) -> Order | None:
    """The order a master message carries, or None for messages that are not orders."""
    if msg.start is not None:
        return start_order(msg.start)
    if msg.kill is not None:
        return KillOrder(container_id=msg.kill.container_id, grace_seconds=msg.kill.grace_seconds)
    return None
