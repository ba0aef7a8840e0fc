"""Loops that wait for an event with a timeout end when cancelled, even when the cancel comes
in the same turn of the event loop as the event.

Python 3.11's ``asyncio.wait_for`` returns the inner result in that case and drops the
cancel: a master stopping just as an agent reported something kept scheduling forever and
never exited. ``asyncio.timeout`` keeps the cancel; these tests hold every such loop to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from determined.api.gen import v1
from pydet.master.agents.table import AgentTable
from pydet.master.logs.log_store import LogStore
from pydet.master.queries.logs import LogFilter
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.manager import TaskManager
from pydet.master.tasks.task_list import TaskList, TaskRequest
from tests.unit.test_allocation import allocation


class _Owner:
    """An owner of no allocations: the loops below never place one."""

    async def allocation_placed(
        self, request: TaskRequest, allocation: Allocation
    ) -> list[v1.StartContainer]:
        raise AssertionError("nothing is placed here")

    async def allocation_started(self, allocation: Allocation) -> None:
        pass

    async def allocation_preempted(self, allocation: Allocation) -> None:
        pass

    async def allocation_exited(self, allocation: Allocation) -> None:
        pass


async def _cancel_as_woken(run: Awaitable[object], wake: Callable[[], None]) -> None:
    task = asyncio.ensure_future(run)
    await asyncio.sleep(0.05)  # it is waiting now
    wake()
    task.cancel()  # in the same turn as the wake
    done, _ = await asyncio.wait({task}, timeout=3)
    assert done, "the loop went on after it was cancelled"
    assert task.cancelled()


async def test_the_scheduling_loop_ends_when_cancelled_as_it_is_woken(store: Database) -> None:
    agents = AgentTable()
    logs = LogStore(store)
    tasks = TaskList(store, agents, logs, kill_grace=5.0)
    manager = TaskManager(
        store, agents, tasks, _Owner(), logs, asyncio.Lock(), pools={}, agent_reconnect_timeout=10
    )
    await _cancel_as_woken(manager.run(), tasks.wake)


async def test_following_logs_ends_when_cancelled_as_a_line_arrives(store: Database) -> None:
    logs = LogStore(store)

    async def never_done() -> bool:
        return False

    async def follow() -> None:
        async for _ in logs.stream(1, LogFilter(), follow=True, is_done=never_done):
            pass

    await _cancel_as_woken(follow(), lambda: logs.notify(1))


async def test_waiting_for_preemption_ends_when_cancelled_as_it_is_asked() -> None:
    alloc = allocation()
    await _cancel_as_woken(alloc.wait_preemption(5.0), alloc.preempt.set)
