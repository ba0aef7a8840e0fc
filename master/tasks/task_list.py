"""The task list: requests waiting for slots and live allocations, indexed by id, container,
task token and task, and the orders the master gives an allocation (kill, preempt).

Experiments queue and withdraw their trials' requests and order their allocations here; the
task manager's scheduling passes and agent events read and update the same list. It knows
nothing of either, so both can be built on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from determined.api.gen import v1
from determined.common import errors
from pydet.master.agents.table import Agent, AgentTable
from pydet.master.logs.log_store import LogLine, LogStore
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation, Container


class Job(Protocol):
    """A job as the scheduler sees it: its settings and its place in the queue. Read afresh
    on every scheduling pass from the job itself (an experiment reads them from its config),
    so that `det job update` is seen by its pending requests and its allocations at once."""

    @property
    def job_id(self) -> str: ...

    @property
    def resource_pool(self) -> str: ...

    @property
    def priority(self) -> int: ...

    @property
    def weight(self) -> float: ...

    @property
    def order(self) -> float:
        """Its position in its pool's queue; lower goes first."""

    @property
    def max_slots(self) -> int | None: ...

    @property
    def preemption_timeout(self) -> float: ...


@dataclass(frozen=True)
class UnknownJob:
    """The job of an allocation a restarted master finds running for a trial it no longer
    runs (it ended while the master was down): in no pool's queue, never preempted for
    another job, and gone when its containers exit."""

    job_id: str = ""
    resource_pool: str = ""
    priority: int = 42
    weight: float = 1.0
    order: float = 0.0
    max_slots: int | None = None
    preemption_timeout: float = 30.0


@dataclass
class TaskRequest:
    task_id: str
    trial_id: int | None
    slots: int
    job: Job
    single_node: bool = False
    # When it was asked for (`det task list`'s registered time).
    requested: float = field(default_factory=time.time)
    excluded_agents: frozenset[str] = frozenset()


class TaskList:
    def __init__(
        self, db: Database, agents: AgentTable, logs: LogStore, *, kill_grace: float = 10.0
    ) -> None:
        self._db = db
        self._agents = agents
        self._logs = logs
        self._kill_grace = kill_grace
        self.pending: dict[str, TaskRequest] = {}
        # Live allocations, and the same by container, by task token and by task. Only
        # index and unindex change these.
        self.allocations: dict[str, Allocation] = {}
        self._by_container: dict[str, Allocation] = {}
        # A task token is good exactly while its allocation is in here.
        self._by_token: dict[str, Allocation] = {}
        self._by_task: dict[str, Allocation] = {}
        # Those for one of whose containers an agent pulled an image: all that
        # pulling_trials(), which answers every GetExperiment, need look at.
        self._pulled_for: dict[str, Allocation] = {}
        # Allocations indexed, unindexed, told to leave or with a container exited since the
        # task manager last looked: the only ones whose scheduler view may have changed.
        self._touched: dict[str, Allocation] = {}
        # Those the task manager's sweep must look at: a kill is due at some time, or
        # daemon containers are to be stopped once the others have exited (see ``watch``).
        self.watched: dict[str, Allocation] = {}
        # Set when a scheduling pass may place something it could not before.
        self.changed = asyncio.Event()

    # -- requests -----------------------------------------------------------------------

    def request(self, req: TaskRequest) -> None:
        self.pending[req.task_id] = req
        self.wake()

    def withdraw(self, task_id: str) -> bool:
        return self.pending.pop(task_id, None) is not None

    def wake(self) -> None:
        self.changed.set()

    # -- allocations ----------------------------------------------------------------------

    def index(self, alloc: Allocation) -> None:
        self.allocations[alloc.id] = alloc
        self._touched[alloc.id] = alloc
        if alloc.has_daemons:
            self.watch(alloc)
        self._by_token[alloc.token] = alloc
        self._by_task[alloc.task_id] = alloc
        for cid in alloc.containers:
            self._by_container[cid] = alloc

    def unindex(self, alloc: Allocation) -> None:
        del self.allocations[alloc.id]
        self._touched[alloc.id] = alloc
        self.watched.pop(alloc.id, None)
        self._by_token.pop(alloc.token, None)
        if self._by_task.get(alloc.task_id) is alloc:
            del self._by_task[alloc.task_id]
        for cid in alloc.containers:
            self._by_container.pop(cid, None)
        self._pulled_for.pop(alloc.id, None)

    def touch(self, alloc: Allocation) -> None:
        """The slots an allocation holds, or its preemption, changed."""
        self._touched[alloc.id] = alloc

    def watch(self, alloc: Allocation) -> None:
        """The allocation has something for the sweep to do later: a kill deadline
        (``kill_at``, ``siblings_kill_at``) or daemon containers to stop."""
        if alloc.id in self.allocations:
            self.watched[alloc.id] = alloc

    def take_touched(self) -> list[Allocation]:
        """The allocations touched since the last call (see ``touch``), once each."""
        touched = list(self._touched.values())
        self._touched.clear()
        return touched

    def allocation_of(self, task_id: str) -> Allocation | None:
        return self._by_task.get(task_id)

    def pulling(self, alloc: Allocation, container_id: str) -> None:
        """An agent pulls the image of the allocation's container."""
        alloc.containers[container_id].pulling = True
        self._pulled_for[alloc.id] = alloc

    def pulling_trials(self) -> set[int]:
        """The trials whose allocation waits for an agent to pull an image: none of its
        containers has started and one is being pulled for."""
        return {
            a.trial_id
            for a in self._pulled_for.values()
            if a.trial_id is not None
            and not a.running
            and any(c.pulling and not c.started for c in a.containers.values())
        }

    def by_token(self, token: str) -> Allocation | None:
        return self._by_token.get(token)

    def by_container(self, container_id: str) -> Allocation | None:
        return self._by_container.get(container_id)

    def get(self, allocation_id: str) -> Allocation:
        alloc = self.allocations.get(allocation_id)
        if alloc is None:
            raise errors.NotFound(f"allocation {allocation_id} is not running")
        return alloc

    @property
    def agents(self) -> dict[str, Agent]:
        return self._agents.agents

    # -- orders ---------------------------------------------------------------------------

    def kill(self, alloc: Allocation, *, reason: str, grace: float | None = None) -> None:
        alloc.stop_reason = alloc.stop_reason or reason
        self.stop(alloc.containers.values(), grace=grace)

    def stop(self, containers: Iterable[Container], *, grace: float | None = None) -> None:
        """SIGTERM the running ones among ``containers``, SIGKILL after ``grace`` seconds
        (the master's kill grace by default)."""
        for c in containers:
            if c.exit_code is None:
                self._agents.get_or_add(c.agent_id).send(
                    v1.MasterMessage(
                        kill=v1.KillContainer(
                            container_id=c.id,
                            grace_seconds=self._kill_grace if grace is None else grace,
                        )
                    )
                )

    def preempt(self, alloc: Allocation, *, reason: str, timeout: float) -> None:
        """Ask the task to checkpoint and exit; kill it if it has not within ``timeout``."""
        alloc.stop_reason = alloc.stop_reason or reason
        if not alloc.preempt.is_set():
            alloc.preempt.set()
            alloc.kill_at = time.time() + timeout
            self.touch(alloc)
            self.watch(alloc)

    async def ack_preemption(self, alloc: Allocation) -> None:
        alloc.preemption_acked = True
        await self._db.write(
            "UPDATE allocations SET preemption_acked = 1 WHERE id = ?", (alloc.id,)
        )

    async def mark_daemon(self, allocation_id: str, resources_id: str) -> None:
        """One container of a running allocation only serves the others from now on
        (``MarkAllocationResourcesDaemon``); the task manager stops it when they have exited."""
        alloc = self.allocations.get(allocation_id)
        if alloc is None:
            raise errors.NotFound(
                f"allocation {allocation_id} is not running (it has ended, or never ran): "
                "its resources can no longer be marked as daemons"
            )
        alloc.mark_daemon(resources_id)
        self.watch(alloc)
        await self._db.write(
            "UPDATE allocations SET containers = ? WHERE id = ?",
            (alloc.containers_json(), alloc.id),
        )
        self.wake()

    async def master_log(self, alloc: Allocation, text: str) -> None:
        """A line in the task's log from the master itself."""
        await self.trial_log(alloc.trial_id, alloc.task_id, text, allocation_id=alloc.id)

    async def trial_log(
        self, trial_id: int | None, task_id: str, text: str, *, allocation_id: str = ""
    ) -> None:
        """A line from the master in a task's log, also when none of its allocations runs."""
        await self._logs.append(
            [
                LogLine(
                    trial_id=trial_id,
                    task_id=task_id,
                    allocation_id=allocation_id,
                    agent_id="",
                    container_id="",
                    stdtype="master",
                    timestamp=time.time(),
                    text=text,
                )
            ]
        )
