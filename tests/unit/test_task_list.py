"""The task list: requests waiting for slots, live allocations found every way they are
looked up, and the orders given to an allocation."""

from __future__ import annotations

import asyncio
import time

import pytest

from determined.api.gen import v1
from determined.common import errors
from pydet.master.agents.table import Agent, AgentTable
from pydet.master.logs.log_store import LogStore
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation, Container
from pydet.master.tasks.task_list import TaskList, TaskRequest, UnknownJob


def allocation(alloc_id: str, task_id: str, agent_id: str = "a") -> Allocation:
    cid = f"{alloc_id}.0"
    return Allocation(
        id=alloc_id,
        task_id=task_id,
        trial_id=1,
        token=f"token-{alloc_id}",
        containers={cid: Container(id=cid, agent_id=agent_id, slot_ids=("0",), rank=0)},
        job=UnknownJob(),
    )


@pytest.fixture
def agents() -> AgentTable:
    return AgentTable()


@pytest.fixture
def tasks(store: Database, agents: AgentTable) -> TaskList:
    return TaskList(store, agents, LogStore(store), kill_grace=5.0)


def test_a_request_waits_until_withdrawn_and_wakes_the_scheduler(tasks: TaskList) -> None:
    tasks.request(TaskRequest(task_id="1.1", trial_id=1, slots=2, job=UnknownJob()))
    assert tasks.changed.is_set() and list(tasks.pending) == ["1.1"]
    assert tasks.withdraw("1.1") and not tasks.withdraw("1.1")


def test_an_allocation_is_found_by_id_token_task_and_container_until_unindexed(
    tasks: TaskList,
) -> None:
    first, second = allocation("1.1.1", "1.1"), allocation("1.1.2", "1.1")
    tasks.index(first)
    assert tasks.get("1.1.1") is first and tasks.by_token("token-1.1.1") is first
    assert tasks.by_container("1.1.1.0") is first and tasks.allocation_of("1.1") is first
    # The task's next run replaces it as the task's allocation; the old one ending later
    # does not take the new one's place away.
    tasks.index(second)
    tasks.unindex(first)
    assert tasks.allocation_of("1.1") is second and tasks.by_token("token-1.1.1") is None
    with pytest.raises(errors.NotFound, match=r"allocation 1\.1\.1 "):
        tasks.get("1.1.1")


async def test_kill_orders_every_live_container_through_its_agent(
    tasks: TaskList, agents: AgentTable
) -> None:
    agent = agents.agents["a"] = Agent(id="a")
    agent.outbox = asyncio.Queue()
    alloc = allocation("1.1.1", "1.1")
    tasks.kill(alloc, reason="killed")
    sent = agent.outbox.get_nowait()
    assert sent == v1.MasterMessage(kill=v1.KillContainer(container_id="1.1.1.0", grace_seconds=5))
    assert alloc.stop_reason == "killed"
    # An agent nobody has heard of yet gets the order when it connects.
    tasks.kill(allocation("2.1.1", "2.1", agent_id="b"), reason="orphaned", grace=1)
    assert agents.agents["b"].pending[0].kill is not None


def test_preempt_signals_once_and_sets_the_deadline_to_kill(tasks: TaskList) -> None:
    alloc = allocation("1.1.1", "1.1")
    before = time.time()
    tasks.preempt(alloc, reason="preempted", timeout=30)
    deadline = alloc.kill_at
    assert alloc.preempt.is_set() and deadline is not None and deadline >= before + 30
    tasks.preempt(alloc, reason="paused", timeout=1)
    assert alloc.kill_at == deadline and alloc.stop_reason == "preempted"


def test_what_may_change_a_scheduler_view_is_handed_over_once(tasks: TaskList) -> None:
    first, second = allocation("1.1.1", "1.1"), allocation("2.1.1", "2.1")
    tasks.index(first)
    tasks.index(second)
    assert tasks.take_touched() == [first, second] and tasks.take_touched() == []
    tasks.preempt(first, reason="preempted", timeout=5.0)
    tasks.unindex(second)
    assert tasks.take_touched() == [first, second]


async def test_the_sweep_watches_only_allocations_with_a_deadline_or_daemons(
    tasks: TaskList,
) -> None:
    plain, preempted = allocation("1.1.1", "1.1"), allocation("2.1.1", "2.1")
    pair = Allocation(
        id="3.1.1",
        task_id="3.1",
        trial_id=3,
        token="token-3",
        containers={
            f"3.1.1.{r}": Container(id=f"3.1.1.{r}", agent_id="a", slot_ids=(str(r),), rank=r)
            for r in range(2)
        },
        job=UnknownJob(),
    )
    for alloc in (plain, preempted, pair):
        tasks.index(alloc)
    assert tasks.watched == {}
    tasks.preempt(preempted, reason="preempted", timeout=5.0)
    await tasks.mark_daemon("3.1.1", "3.1.1.1")
    assert list(tasks.watched) == ["2.1.1", "3.1.1"]
    tasks.unindex(preempted)
    assert list(tasks.watched) == ["3.1.1"]
    # A master restarted with the daemon on record watches it from the start.
    tasks.unindex(pair)
    tasks.index(pair)
    assert list(tasks.watched) == ["3.1.1"]
