"""The job queue as users see it (`det job list`), resource pools, and agent control.

A job is an experiment (its trials' requests and allocations are the job's demand and
holdings), or a task that is not a trial (a command, notebook, shell or TensorBoard).
Ordering and the rules for changing it live in the pure ``jobqueue`` module; this one
gathers the live state and applies decisions."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from determined.api.gen import v1
from determined.common import errors, timestamps
from pydet.master import queries
from pydet.master.agents.table import AgentTable
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import Experiment, LiveExperiments
from pydet.master.jobs import ordering as jobqueue
from pydet.master.store.db import Database
from pydet.master.tasks.generic import GenericTask, GenericTasks
from pydet.master.tasks.task_list import TaskList

_DEVICE_TYPES = {"cpu": v1.DeviceType.CPU, "cuda": v1.DeviceType.CUDA}


class Pool(jobqueue.PoolSettings, Protocol):
    """A configured resource pool as users list it (``master.config.PoolConfig``)."""

    @property
    def description(self) -> str: ...

    @property
    def fitting_policy(self) -> str: ...

    @property
    def preemption(self) -> bool: ...


class Jobs:
    def __init__(
        self,
        pools: Sequence[Pool],
        default_pool: str,
        db: Database,
        store: ExperimentStore,
        live: LiveExperiments,
        agents: AgentTable,
        tasks: TaskList,
        *,
        notes: dict[str, str] | None = None,
        generic: GenericTasks | None = None,
    ) -> None:
        # The tasks that are not trials (commands, notebooks, shells, TensorBoards): each its
        # own job, listed beside the experiments.
        self._generic = generic
        # Allocation id -> what its resource manager says of it (a Slurm pending reason).
        self._notes = notes if notes is not None else {}
        self._pools = tuple(pools)
        self._default_pool = default_pool
        self._db = db
        self._store = store
        self._live = live
        self._agents = agents
        self._tasks = tasks

    def _check_pool(self, pool: str) -> str:
        pool = pool or self._default_pool
        if pool not in {p.name for p in self._pools}:
            raise errors.NotFound(f"resource pool {pool!r} not found")
        return pool

    def _holdings(self, exp: Experiment) -> tuple[int, int]:
        """(slots acquired, slots needed) over the experiment's unfinished trials."""
        acquired = needed = 0
        slots = exp.config.resources.slots_per_trial
        for trial in exp.trials.values():
            if trial.state.terminal:
                continue
            alloc = self._tasks.allocation_of(trial.task_id)
            if alloc is not None:
                acquired += sum(len(c.slot_ids) for c in alloc.containers.values())
                needed += slots
            elif trial.task_id in self._tasks.pending:
                needed += slots
        return acquired, needed

    def _queued(self) -> dict[str, tuple[Experiment, jobqueue.QueuedJob, int, int]]:
        """Every job in a queue: experiments with trials running or waiting for slots."""
        out = {}
        for exp in self._live:
            acquired, needed = self._holdings(exp)
            running = any(
                self._tasks.allocation_of(t.task_id) is not None for t in exp.trials.values()
            )
            pending = any(t.task_id in self._tasks.pending for t in exp.trials.values())
            if not (running or pending):
                continue
            job = jobqueue.QueuedJob(
                exp.job_id,
                resource_pool=exp.resource_pool,
                priority=exp.priority,
                weight=exp.weight,
                order=exp.order,
                scheduled=running,
            )
            out[job.job_id] = (exp, job, acquired, needed)
        return out

    def scheduler_of(self, pool: str) -> str:
        """The scheduler of a pool ("priority" or "fair_share"); "" for one not configured."""
        return {p.name: p.scheduler for p in self._pools}.get(pool, "")

    def _generic_jobs(self) -> dict[str, tuple[GenericTask, jobqueue.QueuedJob, int]]:
        """The tasks that are not trials and hold or wait for slots, with their slots held."""
        out = {}
        for task in self._generic.live() if self._generic is not None else []:
            alloc = self._tasks.allocation_of(task.id)
            if alloc is None and task.id not in self._tasks.pending:
                continue
            job = jobqueue.QueuedJob(
                task.id,
                type=f"TYPE_{task.task_type.value}",
                resource_pool=task.resource_pool,
                priority=task.job.priority,
                weight=task.job.weight,
                order=task.job.order,
                scheduled=alloc is not None,
            )
            held = 0 if alloc is None else sum(len(c.slot_ids) for c in alloc.containers.values())
            out[task.id] = (task, job, held)
        return out

    def queue(self, pool: str) -> list[v1.Job]:
        pool = self._check_pool(pool)
        queued = self._queued()
        generic = self._generic_jobs()
        scheduler = {p.name: p.scheduler for p in self._pools}[pool]
        rows = jobqueue.queue_rows(
            [job for _, job, _, _ in queued.values()] + [job for _, job, _ in generic.values()],
            resource_pool=pool,
            scheduler=scheduler,
        )
        out = []
        for ahead, row in enumerate(rows):
            if row.job.job_id in generic:
                task, job, held = generic[row.job.job_id]
                out.append(
                    v1.Job(
                        job_id=job.job_id,
                        type=v1.JobType[job.type.removeprefix("TYPE_")],
                        name=task.description,
                        priority=job.priority,
                        weight=job.weight,
                        submission_time=timestamps.to_datetime(task.start_time),
                        allocated_slots=held,
                        requested_slots=task.slots,
                        summary=v1.JobSummary(
                            state=v1.JobSummaryState[row.state.removeprefix("STATE_")],
                            jobs_ahead=ahead,
                        ),
                        username=task.username,
                        resource_pool=job.resource_pool,
                        is_preemptible=self._preemptible(job.resource_pool),
                        entity_id=task.id,
                        workspace_id=task.workspace_id,
                    )
                )
                continue
            exp, job, acquired, needed = queued[row.job.job_id]
            out.append(
                v1.Job(
                    job_id=job.job_id,
                    type=v1.JobType.EXPERIMENT,
                    name=exp.config.name or f"Experiment {exp.id}",
                    priority=job.priority,
                    weight=job.weight,
                    submission_time=timestamps.to_datetime(exp.start_time),
                    allocated_slots=acquired,
                    requested_slots=needed,
                    summary=v1.JobSummary(
                        state=v1.JobSummaryState[row.state.removeprefix("STATE_")],
                        jobs_ahead=ahead,
                    ),
                    username=exp.username,
                    resource_pool=job.resource_pool,
                    is_preemptible=self._preemptible(job.resource_pool),
                    entity_id=str(exp.id),
                    progress=exp.search.progress(),
                    workspace_id=1,
                    note=self._note(exp),
                )
            )
        return out

    def _preemptible(self, pool: str) -> bool:
        return any(p.preemption for p in self._pools if p.name == pool)

    def summary(self, job_id: str) -> v1.JobSummary | None:
        """Where a job stands in its pool's queue; None when it is in none (ended, or no
        trial runs or waits)."""
        queued = self._queued()
        found = queued.get(job_id)
        if found is None:
            return None
        pool = found[1].resource_pool
        rows = jobqueue.queue_rows(
            [job for _, job, _, _ in queued.values()],
            resource_pool=pool,
            scheduler=self.scheduler_of(pool),
        )
        for ahead, row in enumerate(rows):
            if row.job.job_id == job_id:
                state = v1.JobSummaryState[row.state.removeprefix("STATE_")]
                return v1.JobSummary(state=state, jobs_ahead=ahead)
        return None

    def _note(self, exp: Experiment) -> str:
        notes = []
        for trial in exp.trials.values():
            alloc = self._tasks.allocation_of(trial.task_id)
            if alloc is not None and alloc.id in self._notes:
                notes.append(f"trial {trial.id}: {self._notes[alloc.id]}")
        return "; ".join(notes)

    def experiment_of(self, job_id: str) -> Experiment | None:
        """The experiment of a job in the queue (None for any other job id)."""
        found = self._queued().get(job_id)
        return None if found is None else found[0]

    async def update(self, updates: list[v1.JobUpdate]) -> None:
        """Apply `det job update(-batch)`: all of it, or nothing when any part is invalid."""
        queued = self._queued()
        changed = jobqueue.apply_updates(
            [job for _, job, _, _ in queued.values()],
            [
                jobqueue.JobUpdate(
                    u.job_id,
                    priority=u.priority,
                    weight=u.weight,
                    resource_pool=u.resource_pool,
                    ahead_of=u.ahead_of,
                    behind_of=u.behind_of,
                )
                for u in updates
            ],
            self._pools,
        )
        async with self._db.atomic():
            for job in changed:
                await self._update(
                    queued[job.job_id][0],
                    priority=job.priority,
                    weight=job.weight,
                    resource_pool=job.resource_pool,
                    order=job.order,
                )

    async def set_resources(
        self,
        experiment_id: int,
        *,
        priority: int | None,
        weight: float | None,
        max_slots: int | None,
    ) -> None:
        exp = self._live.get(experiment_id)
        if exp is None:
            await queries.ensure_experiment(self._db, experiment_id)
            raise errors.FailedPrecondition(f"experiment {experiment_id} has ended")
        if priority is not None and not 1 <= priority <= 99:
            raise errors.InvalidArgument(f"priority must be between 1 and 99, got {priority}")
        if weight is not None and weight <= 0:
            raise errors.InvalidArgument(f"weight must be positive, got {weight}")
        if max_slots is not None and max_slots < 1:
            raise errors.InvalidArgument(f"max-slots must be at least 1, got {max_slots}")
        async with self._db.atomic():
            await self._update(exp, priority=priority, weight=weight, max_slots=max_slots)

    async def _update(
        self,
        exp: Experiment,
        *,
        priority: int | None = None,
        weight: float | None = None,
        resource_pool: str | None = None,
        max_slots: int | None = None,
        order: float | None = None,
    ) -> None:
        """Change where a job stands. The settings are the experiment's config (and its
        queue position), which its requests and allocations read on every scheduling pass
        and the store keeps for `det experiment describe` and the next master."""
        changes: dict[str, Any] = {}
        if priority is not None:
            changes["priority"] = priority
        if weight is not None:
            changes["weight"] = weight
        if resource_pool is not None:
            changes["resource_pool"] = self._check_pool(resource_pool)
        if max_slots is not None:
            changes["max_slots"] = max_slots
        if changes:
            resources = dataclasses.replace(exp.config.resources, **changes)
            exp.config = dataclasses.replace(exp.config, resources=resources)
        if order is not None:
            exp.queue_order = order
        await self._store.save_job(exp)
        self._tasks.wake()

    def pools(self) -> list[v1.ResourcePool]:
        """The pools as Determined's API shows them (an elastic pool's provisioning, when the
        pool has a ``provider``; its queue's counts)."""
        out = []
        queued = list(self._queued().values())
        for p in self._pools:
            agents = [
                a for a in self._agents.agents.values() if a.resource_pool == p.name and a.connected
            ]
            total = sum(len(a.slots) for a in agents)
            used = sum(1 for a in agents for s in a.slots.values() if s.allocation_id)
            types = {s.type for a in agents for s in a.slots.values()}
            provider = getattr(p, "provider", None)  # a PoolConfig's; test pools have none
            in_queue = [job for _, job, _, _ in queued if job.resource_pool == p.name]
            pool = v1.ResourcePool(
                name=p.name,
                description=p.description,
                type=v1.ResourcePoolType.AWS
                if provider is not None and provider.type == "aws"
                else v1.ResourcePoolType.STATIC,
                num_agents=len(agents),
                slots_available=total,
                slots_used=used,
                slot_type=_DEVICE_TYPES.get(types.pop(), v1.DeviceType.UNSPECIFIED)
                if len(types) == 1
                else v1.DeviceType.UNSPECIFIED,
                default_compute_pool=p.name == self._default_pool,
                default_aux_pool=p.name == self._default_pool,
                scheduler_type=v1.SchedulerType.SLURM
                if getattr(p, "slurm", None) is not None
                else v1.SchedulerType.FAIR_SHARE
                if p.scheduler == "fair_share"
                else v1.SchedulerType.PRIORITY,
                scheduler_fitting_policy=v1.FittingPolicy.WORST
                if p.fitting_policy == "worst"
                else v1.FittingPolicy.BEST,
                details=v1.ResourcePoolDetail(
                    priority_scheduler=v1.ResourcePoolPrioritySchedulerDetail(
                        preemption=p.preemption, default_priority=42
                    )
                ),
                stats=v1.QueueStats(
                    queued_count=sum(1 for job in in_queue if not job.scheduled),
                    scheduled_count=sum(1 for job in in_queue if job.scheduled),
                ),
                slots_per_agent=max((len(a.slots) for a in agents), default=0),
            )
            if provider is not None:
                pool.min_agents = provider.min_instances
                pool.max_agents = provider.max_instances
                pool.max_idle_agent_period = provider.max_idle_agent_period
                pool.max_agent_starting_period = provider.max_agent_starting_period
                pool.master_url = provider.master_url
                pool.master_cert_name = provider.master_cert_name
                pool.startup_script = provider.startup_script
                pool.container_startup_script = provider.container_startup_script
            out.append(pool)
        return out

    def set_slot_enabled(
        self, agent_id: str, slot_id: str, *, enabled: bool, drain: bool
    ) -> v1.Slot:
        """`det slot enable|disable`: one slot in or out of scheduling; disabling stops the
        task on it (it runs again elsewhere) unless ``drain`` lets it finish."""
        agent = self._agents.agents.get(agent_id)
        if agent is None:
            raise errors.NotFound(f"agent {agent_id} not found")
        slot = agent.slots.get(slot_id)
        if slot is None:
            known = ", ".join(sorted(agent.slots)) or "none"
            raise errors.NotFound(
                f"slot {slot_id} not found on agent {agent_id} (its slots: {known})"
            )
        slot.enabled = enabled
        if not enabled and not drain and slot.allocation_id:
            alloc = self._tasks.allocations.get(slot.allocation_id)
            if alloc is not None:
                self._tasks.kill(alloc, reason="slot_disabled")
        self._tasks.wake()
        return agent.to_proto().slots[slot_id]

    def set_agent_enabled(self, agent_id: str, *, enabled: bool, drain: bool) -> v1.Agent:
        agent = self._agents.agents.get(agent_id)
        if agent is None:
            raise errors.NotFound(f"agent {agent_id} not found")
        agent.enabled = enabled
        agent.draining = (not enabled) and drain
        if not enabled and not drain:
            # Disabling without draining stops its tasks; they restart elsewhere.
            for alloc in list(self._tasks.allocations.values()):
                if any(c.agent_id == agent_id for c in alloc.containers.values()):
                    self._tasks.kill(alloc, reason="agent_disabled")
        self._tasks.wake()
        return agent.to_proto()
