"""What a pool's provisioner gives the scale decider each tick: its instances grouped by what
their agents (in the master's agent table) are doing, and the instances the queue needs
(master/provisioner/provisioner.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from determined.common import timestamps
from pydet.master.agents.table import Agent, AgentTable, Slot
from pydet.master.provisioner.decider import Instance, InstanceState
from pydet.master.provisioner.provider import AgentSetup
from pydet.master.provisioner.provisioner import Provisioner
from pydet.master.provisioner.settings import CommandSettings, ProviderSettings
from pydet.master.tasks.task_list import TaskList, TaskRequest, UnknownJob

S = InstanceState
NOW = 10_000.0


class NoProvider:
    async def list_instances(self) -> list[Instance]:
        raise AssertionError("not listed here")

    async def launch(self, agent_id: str, startup: str) -> Instance:
        raise AssertionError("not launched here")

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        raise AssertionError("not terminated here")


def agent(agent_id: str, *, pool: str = "gpu", busy: bool = False, **kw: Any) -> Agent:
    slots = {f"{agent_id}/{n}": Slot(f"{agent_id}/{n}", "cuda", str(n), "") for n in range(4)}
    for slot in slots.values():
        slot.allocation_id = "alloc" if busy else ""
    containers = {"container"} if busy else set()
    return Agent(agent_id, resource_pool=pool, slots=slots, containers=containers, **kw)


def provisioner(agents: list[Agent], instances: list[Instance]) -> tuple[Provisioner, TaskList]:
    table = AgentTable()
    table.agents.update((a.id, a) for a in agents)
    tasks = TaskList(db=None, agents=table, logs=None)  # type: ignore[arg-type]
    settings = ProviderSettings(
        type="command",
        max_instances=10,
        command=CommandSettings(launch=("l",), terminate=("t",), list=("ls",), slots=4),
    )
    p = Provisioner("gpu", settings, NoProvider(), table, tasks, AgentSetup("m:8080", "t"))
    p.status.instances = {i.id: i for i in instances}
    p.status.listed = True
    return p, tasks


INSTANCES = [
    Instance("i-busy", S.RUNNING, 100.0, "a-busy"),
    Instance("i-idle", S.RUNNING, 200.0, "a-idle"),
    Instance("i-new", S.STARTING, 9_990.0, "a-new"),  # its agent has not registered yet
    Instance("i-lost", S.RUNNING, 300.0, "a-lost"),  # its agent is disconnected
    Instance("i-elsewhere", S.RUNNING, 400.0, "a-elsewhere"),  # its agent is in another pool
    Instance("i-off", S.STOPPED, 500.0, "a-off"),
    Instance("i-going", S.STOPPING, 600.0, "a-going"),
]


def agents() -> list[Agent]:
    return [
        agent("a-busy", busy=True, connected=True),
        agent("a-idle", connected=True),
        agent("a-lost", connected=False),
        agent("a-elsewhere", pool="cpu", connected=True),
    ]


def test_instances_are_grouped_by_what_their_agent_does() -> None:
    p, _ = provisioner(agents(), INSTANCES)
    snapshot, queued = p._snapshot(NOW)
    assert set(snapshot.live) == {"i-busy", "i-idle", "i-new", "i-lost", "i-elsewhere"}
    assert snapshot.idle == {"i-idle"}
    assert dict(snapshot.agentless) == {"i-new": 9_990.0, "i-lost": 300.0, "i-elsewhere": 400.0}
    assert snapshot.stopped == {"i-off"}
    assert (snapshot.wanted, queued) == (0, 0)


def test_the_grouping_is_kept_until_the_instances_change() -> None:
    p, _ = provisioner(agents(), INSTANCES)
    first, _ = p._snapshot(NOW)
    p._agents.agents["a-busy"].containers.clear()  # agents change every tick: looked up again
    second, _ = p._snapshot(NOW + 1)
    assert second.live is first.live
    assert second.idle == {"i-idle", "i-busy"}
    p.status.instances = {i.id: i for i in INSTANCES[:2]}  # a new listing
    third, _ = p._snapshot(NOW + 2)
    assert set(third.live) == {"i-busy", "i-idle"}


def test_queued_work_counts_the_free_slots_of_every_agent_of_the_pool() -> None:
    static = agent("static", connected=True)  # in the pool, no instance's
    going = agent("a-going", connected=True)  # a stopping instance's, still connected
    p, tasks = provisioner([*agents(), static, going], INSTANCES)
    job = UnknownJob(resource_pool="gpu")
    for n in range(3):  # one on a-idle, one on the static agent, one on a-going
        tasks.request(TaskRequest(f"t{n}", None, 4, job))
    snapshot, queued = p._snapshot(NOW)
    assert (snapshot.wanted, queued) == (0, 12)
    tasks.request(TaskRequest("t3", None, 4, job))
    tasks.request(TaskRequest("t-cpu", None, 4, UnknownJob(resource_pool="cpu")))
    assert p._snapshot(NOW)[0].wanted == 1


def test_an_instance_shows_idle_since_the_decider_saw_it_idle() -> None:
    p, _ = provisioner(agents(), INSTANCES)
    p.decide(NOW)
    p.decide(NOW + 5)
    shown = {i.id: (i.state, timestamps.to_seconds(i.idle_since)) for i in p.instances()}
    assert shown["i-idle"] == ("idle", NOW)
    assert shown["i-busy"] == ("running", None)
    assert shown["i-lost"] == ("starting agent", None)
