from __future__ import annotations

from determined.api.gen import v1
from pydet.agent import wire
from pydet.agent.runtime import (
    BindMount,
    ContainerSpec,
    Exited,
    KillOrder,
    LogLine,
    Output,
    Pulling,
    RunningContainer,
    Started,
    StartOrder,
)
from pydet.agent.slots import SlotSpec


def roundtrip(msg: v1.AgentMessage) -> v1.AgentMessage:
    # What the master decodes: the bytes on the wire, not the object.
    return v1.AgentMessage.FromString(msg.SerializeToString())


def test_hello_carries_slots_and_running_containers() -> None:
    msg = roundtrip(
        wire.hello(
            agent_id="a1",
            hostname="host",
            address="10.0.0.5",
            slots=[SlotSpec("0", "cuda", "H100", "GPU-1")],
            resource_pool="pool",
            version="0.1.0",
            runtime="process",
            running=[RunningContainer("c1", "al1", 42)],
        )
    )
    hello = msg.hello
    assert hello is not None
    assert (hello.agent_id, hello.hostname, hello.address, hello.resource_pool) == (
        "a1",
        "host",
        "10.0.0.5",
        "pool",
    )
    assert [(s.id, s.type, s.device, s.uuid, s.enabled) for s in hello.slots] == [
        ("0", "cuda", "H100", "GPU-1", True)
    ]
    assert [(r.container_id, r.allocation_id, r.pid) for r in hello.running] == [("c1", "al1", 42)]


def test_events_become_agent_messages() -> None:
    started = roundtrip(wire.event_message(Started("c", "a", 7, 1.5))).started
    assert started is not None and (started.container_id, started.pid) == ("c", 7)
    logs = roundtrip(wire.event_message(Output("c", "a", (LogLine(2.0, "stderr", "hi"),)))).logs
    assert logs is not None
    assert [(x.timestamp, x.stdtype, x.text) for x in logs.lines] == [(2.0, "stderr", "hi")]
    exited = roundtrip(wire.event_message(Exited("c", "a", 137, "", 3.0))).exited
    assert exited is not None and (exited.exit_code, exited.error) == (137, "")
    pulling = roundtrip(wire.event_message(Pulling("c", "a", "reg/img:1", 0.5))).pulling
    assert pulling is not None
    assert (pulling.container_id, pulling.allocation_id, pulling.image) == ("c", "a", "reg/img:1")


def test_master_orders_become_dataclasses() -> None:
    start = v1.MasterMessage(
        start=v1.StartContainer(
            container_id="c",
            allocation_id="a",
            task_id="t",
            argv=["python3", "train.py"],
            env={"K": "V"},
            slot_ids=["0"],
            spec=v1.ContainerSpec(
                image="img", bind_mounts=[v1.BindMount(host_path="/h", container_path="/c")]
            ),
        )
    )
    order = wire.order(v1.MasterMessage.FromString(start.SerializeToString()))
    assert order == StartOrder(
        container_id="c",
        allocation_id="a",
        task_id="t",
        argv=("python3", "train.py"),
        env={"K": "V"},
        slot_ids=("0",),
        spec=ContainerSpec(image="img", bind_mounts=(BindMount("/h", "/c"),)),
    )
    bare = wire.order(v1.MasterMessage(start=v1.StartContainer(container_id="c")))
    assert isinstance(bare, StartOrder) and bare.spec == ContainerSpec()
    kill = wire.order(v1.MasterMessage(kill=v1.KillContainer(container_id="c", grace_seconds=2)))
    assert kill == KillOrder("c", 2.0)
    assert wire.order(v1.MasterMessage(welcome=v1.Welcome())) is None
