"""The task manager: scheduling passes, allocations started on agents, and what agents
report about containers. The experiments module decides what a task *is*; this one decides
where and whether it runs, and tells the owner when an allocation starts, is preempted and
ends. Requests and allocations themselves are kept in the task list (``task_list``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from determined.api.gen import v1
from pydet.master import scheduler
from pydet.master.agents.table import Agent, AgentTable
from pydet.master.logs.log_store import LogLine, LogStore
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation, Container
from pydet.master.tasks.running_views import RunningViews
from pydet.master.tasks.task_list import Job, TaskList, TaskRequest, UnknownJob

log = logging.getLogger(__name__)

# Seconds the siblings of a failed container get to exit on their own before being stopped.
SIBLING_GRACE = 2.0


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
    """Scheduling passes over the task list, allocations started on agents, and what agents
    report about their containers; the owner hears when an allocation is placed, runs,
    is preempted and ends."""

    def __init__(
        self,
        db: Database,
        agents: AgentTable,
        tasks: TaskList,
        owner: TaskOwner,
        logs: LogStore,
        lock: asyncio.Lock,
        *,
        pools: dict[str, scheduler.PoolPolicy],
        agent_reconnect_timeout: float,
    ) -> None:
        self._pools = pools
        self._db = db
        self._agents = agents
        self._tasks = tasks
        self._owner = owner
        self._logs = logs
        self._lock = lock
        self._reconnect_timeout = agent_reconnect_timeout
        # Containers whose agent is away, with the time it went away.
        self._away_since: dict[str, float] = {}
        # Each pool's running allocations as the scheduler sees them, kept between passes.
        self._running = RunningViews()

    # -- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        """Scheduling passes whenever something changed, and the lost-agent sweep."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._tasks.changed.wait()
            self._tasks.changed.clear()
            async with self._lock:
                await self._sweep_lost()
                await self._schedule()

    async def _schedule(self) -> None:
        for alloc in self._tasks.take_touched():
            self._running.update(alloc, live=self._tasks.allocations.get(alloc.id) is alloc)
        self._running.refresh_jobs()
        for pool, policy in self._pools.items():
            pending = [r for r in self._tasks.pending.values() if r.job.resource_pool == pool]
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
                for a in self._agents.connected()
                if a.resource_pool == pool
            ]
            running = self._running.pool(pool)
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
                    excluded_agents=r.excluded_agents,
                )
                for r in pending
            ]
            decision = scheduler.decide(policy, agents, running, requests)
            for placement in decision.placements:
                await self._start(self._tasks.pending.pop(placement.request_id), placement)
            for alloc_id in decision.preemptions:
                alloc = self._tasks.allocations[alloc_id]
                timeout = alloc.job.preemption_timeout
                await self._tasks.master_log(
                    alloc,
                    "preempted by the scheduler for a higher-priority job; "
                    "it checkpoints and resumes later",
                )
                self._tasks.preempt(alloc, reason="preempted", timeout=timeout)
                await self._owner.allocation_preempted(alloc)

    async def _start(self, req: TaskRequest, placement: scheduler.Placement) -> None:
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
            agent = self._agents.agents[c.agent_id]
            for slot_id in c.slot_ids:
                agent.slots[slot_id].allocation_id = alloc.id
            agent.containers.add(c.id)
        self._tasks.index(alloc)
        # The allocation's row and its owner's move are one transaction. The start orders go
        # out before it commits: a master that dies before the commit finds the containers
        # unknown when their agent reconnects and kills them, and runs the task again.
        async with self._db.atomic():
            await self._db.write(
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
            orders = await self._owner.allocation_placed(req, alloc)
            ranked = sorted(containers.values(), key=lambda c: c.rank)
            for order, c in zip(orders, ranked, strict=True):
                self._agents.agents[c.agent_id].send(v1.MasterMessage(start=order))

    # -- restore after a master restart -------------------------------------------------------

    async def restore(self, job_of: Callable[[int | None, str], Job | None]) -> list[Allocation]:
        """The allocations that were running when the master stopped, each with the job of
        its trial or task (``job_of(trial_id, task_id)``; an ``UnknownJob`` for one that no
        longer runs)."""
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
                job=job_of(row["trial_id"], row["task_id"]) or UnknownJob(),
                start_time=row["start_time"],
                preemption_acked=bool(row["preemption_acked"]),
            )
            self._tasks.index(alloc)
            for c in containers.values():
                if c.exit_code is None:
                    self._agents.get_or_add(c.agent_id).containers.add(c.id)
                    self._away_since[c.id] = now
            restored.append(alloc)
        return restored

    # -- agent events (AgentEvents) ---------------------------------------------------------

    async def agent_connected(self, agent: Agent, running: Sequence[v1.RunningContainer]) -> None:
        async with self._lock:
            alive = {r.container_id for r in running}
            for cid in alive:
                alloc = self._tasks.by_container(cid)
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
        self._tasks.wake()

    async def agent_disconnected(self, agent: Agent) -> None:
        now = time.time()
        for cid in agent.containers:
            self._away_since.setdefault(cid, now)
        self._tasks.wake()

    async def container_pulling(self, agent: Agent, msg: v1.ContainerPulling) -> None:
        async with self._lock:
            alloc = self._tasks.by_container(msg.container_id)
            if alloc is not None:
                log.info(
                    "container %s: agent %s pulls image %s", msg.container_id, agent.id, msg.image
                )
                self._tasks.pulling(alloc, msg.container_id)

    async def container_started(self, agent: Agent, msg: v1.ContainerStarted) -> None:
        async with self._lock:
            alloc = self._tasks.by_container(msg.container_id)
            if alloc is not None:
                alloc.containers[msg.container_id].started = True
                await self._maybe_running(alloc)

    async def _maybe_running(self, alloc: Allocation) -> None:
        """Tells the owner, once, that every container of the allocation has started."""
        if alloc.running or alloc.exited:
            return
        if all(c.started for c in alloc.containers.values()):
            alloc.running = True
            await self._owner.allocation_started(alloc)

    async def container_logs(self, agent: Agent, msg: v1.ContainerLogs) -> None:
        alloc = self._tasks.by_container(msg.container_id)
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
        alloc = self._tasks.by_container(container_id)
        if alloc is None:
            return
        c = alloc.containers[container_id]
        if c.exit_code is not None:
            return
        self._away_since.pop(container_id, None)
        c.lost = lost
        alloc.container_exited(c, exit_code, error)
        self._tasks.touch(alloc)
        agent = self._agents.agents.get(c.agent_id)
        if agent is not None:
            agent.containers.discard(container_id)
            for slot_id in c.slot_ids:
                slot = agent.slots.get(slot_id)
                if slot is not None and slot.allocation_id == alloc.id:
                    slot.allocation_id = ""
        if error:
            await self._tasks.master_log(
                alloc, f"container {c.rank} on agent {c.agent_id}: {error}"
            )
        if exit_code != 0 and not c.daemon and not alloc.exited and alloc.siblings_kill_at is None:
            # One failed process ends its siblings, so distributed jobs never hang; they get
            # a moment first to print why their collectives were aborted.
            alloc.siblings_kill_at = time.time() + SIBLING_GRACE
            self._tasks.watch(alloc)
            self._tasks.wake()
        # The container's exit, and with the last one the allocation's end and its owner's
        # move: one transaction.
        async with self._db.atomic():
            await self._db.write(
                "UPDATE allocations SET containers = ? WHERE id = ?",
                (alloc.containers_json(), alloc.id),
            )
            if alloc.exited:
                await self._finish(alloc)
        if alloc.exited or alloc.daemons_to_stop():
            self._tasks.wake()

    async def _finish(self, alloc: Allocation) -> None:
        self._tasks.unindex(alloc)
        await self._db.write(
            "UPDATE allocations SET state = 'TERMINATED', end_time = ?, exit_reason = ? "
            "WHERE id = ?",
            (time.time(), alloc.stop_reason, alloc.id),
        )
        await self._owner.allocation_exited(alloc)

    async def _sweep_lost(self) -> None:
        now = time.time()
        # Only allocations with a deadline or daemons can have anything due here.
        for alloc in list(self._tasks.watched.values()):
            daemons = alloc.daemons_to_stop()
            if daemons:
                alloc.daemons_stopped = True
                await self._tasks.master_log(
                    alloc,
                    "every container but its daemons has exited; stopping the daemon "
                    f"container(s) {', '.join(str(c.rank) for c in daemons)}",
                )
                self._tasks.stop(daemons)
            if alloc.siblings_kill_at is not None and now >= alloc.siblings_kill_at:
                alloc.siblings_kill_at = float("inf")
                self._tasks.kill(alloc, reason=alloc.stop_reason or "sibling_failed", grace=3.0)
            if alloc.kill_at is not None and now >= alloc.kill_at:
                alloc.kill_at = None
                await self._tasks.master_log(
                    alloc, "the task did not stop within its preemption_timeout; killing it"
                )
                self._tasks.kill(alloc, reason=alloc.stop_reason or "preempted")
            if _nothing_due(alloc):
                self._tasks.watched.pop(alloc.id, None)
        for cid, since in list(self._away_since.items()):
            if now - since < self._reconnect_timeout:
                continue
            owner = self._tasks.by_container(cid)
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


def _nothing_due(alloc: Allocation) -> bool:
    """The sweep has nothing left to do for the allocation, now or later."""
    return (
        alloc.kill_at is None
        and alloc.siblings_kill_at in (None, float("inf"))
        and (alloc.daemons_stopped or not alloc.has_daemons)
    )
