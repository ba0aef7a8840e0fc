"""The task manager: queued requests, scheduling passes, allocations on agents, and what
agents report about containers. The experiments module decides what a task *is*; this one
decides where and whether it runs, and tells the owner when an allocation ends."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from determined.api.gen import v1
from determined.common import errors
from master import scheduler
from master.agents import Agent, AgentHub
from master.allocation import Allocation, Container
from master.db import Database
from master.logs import LogLine, LogStore

log = logging.getLogger(__name__)

# Seconds the siblings of a failed container get to exit on their own before being stopped.
SIBLING_GRACE = 2.0


@dataclass
class JobInfo:
    """A job's place in the queue. One object per job, shared by its pending requests and its
    allocations, so that `det job update` changes all of them at once."""

    job_id: str
    resource_pool: str
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
    job: JobInfo
    single_node: bool = False


class TaskOwner(Protocol):
    async def allocation_placed(
        self, request: TaskRequest, allocation: Allocation
    ) -> list[v1.StartContainer]:
        """Persist the new run and return one start order per container (rank order)."""

    async def allocation_started(self, allocation: Allocation) -> None:
        """Every container of the allocation runs (reported again after a master restart)."""

    async def allocation_preempted(self, allocation: Allocation) -> None:
        """The scheduler asked the allocation to checkpoint and exit for another job."""

    async def allocation_exited(self, allocation: Allocation) -> None:
        """Every container of the allocation has exited (or was lost)."""


class TaskManager:
    def __init__(
        self,
        db: Database,
        hub: AgentHub,
        logs: LogStore,
        lock: asyncio.Lock,
        *,
        pools: dict[str, scheduler.PoolPolicy],
        agent_reconnect_timeout: float,
        kill_grace: float = 10.0,
    ) -> None:
        self._pools = pools
        self._db = db
        self._hub = hub
        self._logs = logs
        self._lock = lock
        self.owner: TaskOwner | None = None
        self.pending: dict[str, TaskRequest] = {}
        # Live allocations, and the same by container, by task token and by task. Only
        # _index and _unindex change these.
        self.allocations: dict[str, Allocation] = {}
        self._by_container: dict[str, Allocation] = {}
        # A task token is good exactly while its allocation is in here.
        self._by_token: dict[str, Allocation] = {}
        self._by_task: dict[str, Allocation] = {}
        self._reconnect_timeout = agent_reconnect_timeout
        self._kill_grace = kill_grace
        self._wake = asyncio.Event()
        # Containers whose agent is away, with the time it went away.
        self._away_since: dict[str, float] = {}

    # -- requests -----------------------------------------------------------------------

    def request(self, req: TaskRequest) -> None:
        self.pending[req.task_id] = req
        self.wake()

    def withdraw(self, task_id: str) -> bool:
        return self.pending.pop(task_id, None) is not None

    def allocation_of(self, task_id: str) -> Allocation | None:
        return self._by_task.get(task_id)

    def _index(self, alloc: Allocation) -> None:
        self.allocations[alloc.id] = alloc
        self._by_token[alloc.token] = alloc
        self._by_task[alloc.task_id] = alloc
        for cid in alloc.containers:
            self._by_container[cid] = alloc

    def _unindex(self, alloc: Allocation) -> None:
        del self.allocations[alloc.id]
        self._by_token.pop(alloc.token, None)
        if self._by_task.get(alloc.task_id) is alloc:
            del self._by_task[alloc.task_id]
        for cid in alloc.containers:
            self._by_container.pop(cid, None)

    def by_token(self, token: str) -> Allocation | None:
        return self._by_token.get(token)

    def get(self, allocation_id: str) -> Allocation:
        alloc = self.allocations.get(allocation_id)
        if alloc is None:
            raise errors.NotFound(f"allocation {allocation_id} is not running")
        return alloc

    def wake(self) -> None:
        self._wake.set()

    # -- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        """Scheduling passes whenever something changed, and the lost-agent sweep."""
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)
            except TimeoutError:
                pass
            self._wake.clear()
            async with self._lock:
                await self._sweep_lost()
                await self._schedule()

    async def _schedule(self) -> None:
        for pool, policy in self._pools.items():
            pending = [r for r in self.pending.values() if r.job.resource_pool == pool]
            if not pending:
                continue
            agents = [
                scheduler.AgentView(
                    a.id,
                    address=a.address,
                    free_slots=tuple(a.free_slots()),
                    num_containers=len(a.containers),
                    enabled=a.enabled,
                    draining=a.draining,
                )
                for a in self._hub.connected()
                if a.resource_pool == pool
            ]
            running = [
                _running_view(alloc)
                for alloc in self.allocations.values()
                if alloc.job is not None and alloc.job.resource_pool == pool
            ]
            requests = [
                scheduler.Request(
                    r.task_id,
                    r.slots,
                    job_id=r.job.job_id,
                    priority=r.job.priority,
                    weight=r.job.weight,
                    order=r.job.order,
                    max_slots=r.job.max_slots,
                    single_node=r.single_node,
                )
                for r in pending
            ]
            decision = scheduler.decide(policy, agents, running, requests)
            for placement in decision.placements:
                await self._start(self.pending.pop(placement.request_id), placement)
            for alloc_id in decision.preemptions:
                alloc = self.allocations[alloc_id]
                timeout = alloc.job.preemption_timeout if alloc.job is not None else 30.0
                await self.master_log(
                    alloc,
                    "preempted by the scheduler for a higher-priority job; "
                    "it checkpoints and resumes later",
                )
                self.preempt(alloc, reason="preempted", timeout=timeout)
                assert self.owner is not None
                await self.owner.allocation_preempted(alloc)

    async def _start(self, req: TaskRequest, placement: scheduler.Placement) -> None:
        assert self.owner is not None
        alloc_id = f"{req.task_id}.{int(time.time() * 1000) % 10**9}"
        containers = {}
        for rank, (agent_id, slot_ids) in enumerate(placement.containers):
            cid = f"{alloc_id}.{rank}"
            containers[cid] = Container(id=cid, agent_id=agent_id, slot_ids=slot_ids, rank=rank)
        alloc = Allocation(
            id=alloc_id,
            task_id=req.task_id,
            trial_id=req.trial_id,
            token=secrets.token_urlsafe(24),
            containers=containers,
            job=req.job,
        )
        for c in containers.values():
            agent = self._hub.agents[c.agent_id]
            for slot_id in c.slot_ids:
                agent.slots[slot_id].allocation_id = alloc.id
            agent.containers.add(c.id)
        self._index(alloc)
        # The allocation's row and its owner's move are one transaction. The start orders go
        # out before it commits: a master that dies before the commit finds the containers
        # unknown when their agent reconnects and kills them, and runs the task again.
        async with self._db.atomic():
            await self._db.execute(
                "INSERT INTO allocations (id, trial_id, task_id, state, containers, token,"
                " start_time) VALUES (?,?,?,?,?,?,?)",
                (
                    alloc.id,
                    alloc.trial_id,
                    alloc.task_id,
                    "RUNNING",
                    alloc.containers_json(),
                    alloc.token,
                    alloc.start_time,
                ),
            )
            orders = await self.owner.allocation_placed(req, alloc)
            ranked = sorted(containers.values(), key=lambda c: c.rank)
            for order, c in zip(orders, ranked, strict=True):
                self._hub.agents[c.agent_id].send(v1.MasterMessage(start=order))

    # -- orders ---------------------------------------------------------------------------

    def kill(self, alloc: Allocation, *, reason: str, grace: float | None = None) -> None:
        alloc.stop_reason = alloc.stop_reason or reason
        for c in alloc.containers.values():
            if c.exit_code is None:
                self._hub_agent(c.agent_id).send(
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

    @property
    def agents(self) -> dict[str, Agent]:
        return self._hub.agents

    def _hub_agent(self, agent_id: str) -> Agent:
        agent = self._hub.agents.get(agent_id)
        if agent is None:
            agent = self._hub.agents[agent_id] = Agent(id=agent_id)
        return agent

    async def ack_preemption(self, alloc: Allocation) -> None:
        alloc.preemption_acked = True
        await self._db.execute(
            "UPDATE allocations SET preemption_acked = 1 WHERE id = ?", (alloc.id,)
        )

    # -- restore after a master restart -------------------------------------------------------

    async def restore(self) -> list[Allocation]:
        rows = await self._db.fetch_all("SELECT * FROM allocations WHERE state = 'RUNNING'")
        restored = []
        now = time.time()
        for row in rows:
            containers = {d["id"]: Container.from_json(d) for d in json.loads(row["containers"])}
            alloc = Allocation(
                id=row["id"],
                task_id=row["task_id"],
                trial_id=row["trial_id"],
                token=row["token"],
                containers=containers,
                start_time=row["start_time"],
                preemption_acked=bool(row["preemption_acked"]),
            )
            self._index(alloc)
            for c in containers.values():
                if c.exit_code is None:
                    self._hub_agent(c.agent_id).containers.add(c.id)
                    self._away_since[c.id] = now
            restored.append(alloc)
        return restored

    # -- agent events (AgentEvents) ---------------------------------------------------------

    async def agent_connected(self, agent: Agent, running: Sequence[v1.RunningContainer]) -> None:
        async with self._lock:
            alive = {r.container_id for r in running}
            for cid in alive:
                alloc = self._by_container.get(cid)
                if alloc is None:
                    log.warning("agent %s runs unknown container %s; killing it", agent.id, cid)
                    agent.send(
                        v1.MasterMessage(kill=v1.KillContainer(container_id=cid, grace_seconds=1))
                    )
                    continue
                c = alloc.containers[cid]
                c.started = True
                self._away_since.pop(cid, None)
                for slot_id in c.slot_ids:
                    if slot_id in agent.slots:
                        agent.slots[slot_id].allocation_id = alloc.id
                await self._maybe_running(alloc)
            # Containers the agent did not list either exited while we were apart (their
            # exits follow right after the hello) or are gone; the sweep decides later.
            now = time.time()
            for cid in list(agent.containers):
                if cid not in alive:
                    self._away_since.setdefault(cid, now - self._reconnect_timeout + 5.0)
        self.wake()

    async def agent_disconnected(self, agent: Agent) -> None:
        now = time.time()
        for cid in agent.containers:
            self._away_since.setdefault(cid, now)
        self.wake()

    async def container_started(self, agent: Agent, msg: v1.ContainerStarted) -> None:
        async with self._lock:
            alloc = self._by_container.get(msg.container_id)
            if alloc is not None:
                alloc.containers[msg.container_id].started = True
                await self._maybe_running(alloc)

    async def _maybe_running(self, alloc: Allocation) -> None:
        """Tells the owner, once, that every container of the allocation has started."""
        if alloc.running or alloc.exited:
            return
        if all(c.started for c in alloc.containers.values()):
            alloc.running = True
            assert self.owner is not None
            await self.owner.allocation_started(alloc)

    async def container_logs(self, agent: Agent, msg: v1.ContainerLogs) -> None:
        alloc = self._by_container.get(msg.container_id)
        trial_id = alloc.trial_id if alloc is not None else None
        task_id = alloc.task_id if alloc is not None else ""
        await self._logs.append(
            [
                LogLine(
                    trial_id=trial_id,
                    task_id=task_id,
                    allocation_id=msg.allocation_id,
                    agent_id=agent.id,
                    container_id=msg.container_id,
                    stdtype=line.stdtype,
                    timestamp=line.timestamp,
                    text=line.text,
                )
                for line in msg.lines
            ]
        )

    async def container_exited(self, agent: Agent, msg: v1.ContainerExited) -> None:
        async with self._lock:
            await self._container_exited(msg.container_id, msg.exit_code, msg.error)

    async def _container_exited(
        self, container_id: str, exit_code: int, error: str, *, lost: bool = False
    ) -> None:
        alloc = self._by_container.get(container_id)
        if alloc is None:
            return
        c = alloc.containers[container_id]
        if c.exit_code is not None:
            return
        self._away_since.pop(container_id, None)
        c.lost = lost
        alloc.container_exited(c, exit_code, error)
        agent = self._hub.agents.get(c.agent_id)
        if agent is not None:
            agent.containers.discard(container_id)
            for slot_id in c.slot_ids:
                slot = agent.slots.get(slot_id)
                if slot is not None and slot.allocation_id == alloc.id:
                    slot.allocation_id = ""
        if error:
            await self.master_log(alloc, f"container {c.rank} on agent {c.agent_id}: {error}")
        if exit_code != 0 and not alloc.exited and alloc.siblings_kill_at is None:
            # One failed process ends its siblings, so distributed jobs never hang; they get
            # a moment first to print why their collectives were aborted.
            alloc.siblings_kill_at = time.time() + SIBLING_GRACE
            self.wake()
        # The container's exit, and with the last one the allocation's end and its owner's
        # move: one transaction.
        async with self._db.atomic():
            await self._db.execute(
                "UPDATE allocations SET containers = ? WHERE id = ?",
                (alloc.containers_json(), alloc.id),
            )
            if alloc.exited:
                await self._finish(alloc)
        if alloc.exited:
            self.wake()

    async def _finish(self, alloc: Allocation) -> None:
        assert self.owner is not None
        self._unindex(alloc)
        await self._db.execute(
            "UPDATE allocations SET state = 'TERMINATED', end_time = ?, exit_reason = ? "
            "WHERE id = ?",
            (time.time(), alloc.stop_reason, alloc.id),
        )
        await self.owner.allocation_exited(alloc)

    async def _sweep_lost(self) -> None:
        now = time.time()
        for alloc in list(self.allocations.values()):
            if alloc.siblings_kill_at is not None and now >= alloc.siblings_kill_at:
                alloc.siblings_kill_at = float("inf")
                self.kill(alloc, reason=alloc.stop_reason or "sibling_failed", grace=3.0)
            if alloc.kill_at is not None and now >= alloc.kill_at:
                alloc.kill_at = None
                await self.master_log(
                    alloc, "the task did not stop within its preemption_timeout; killing it"
                )
                self.kill(alloc, reason=alloc.stop_reason or "preempted")
        for cid, since in list(self._away_since.items()):
            if now - since < self._reconnect_timeout:
                continue
            owner = self._by_container.get(cid)
            if owner is None:
                self._away_since.pop(cid, None)
                continue
            agent_id = owner.containers[cid].agent_id
            await self._container_exited(
                cid,
                -1,
                f"lost: agent {agent_id} did not report this container within "
                f"{self._reconnect_timeout:.0f}s",
                lost=True,
            )

    async def master_log(self, alloc: Allocation, text: str) -> None:
        await self._logs.append(
            [
                LogLine(
                    trial_id=alloc.trial_id,
                    task_id=alloc.task_id,
                    allocation_id=alloc.id,
                    agent_id="",
                    container_id="",
                    stdtype="master",
                    timestamp=time.time(),
                    text=text,
                )
            ]
        )


def _running_view(alloc: Allocation) -> scheduler.RunningAllocation:
    job = alloc.job
    assert job is not None
    return scheduler.RunningAllocation(
        alloc.id,
        job_id=job.job_id,
        containers=tuple(
            (c.agent_id, tuple(c.slot_ids))
            for c in alloc.containers.values()
            if c.exit_code is None
        ),
        priority=job.priority,
        weight=job.weight,
        order=job.order,
        max_slots=job.max_slots,
        started=alloc.start_time,
        preempting=alloc.preempt.is_set(),
    )
