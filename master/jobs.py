"""The job queue as users see it (`det job list`), resource pools, and agent control.

A job is an experiment: its trials' requests and allocations are the job's demand and
holdings. Ordering and the rules for changing it live in the pure ``jobqueue`` module;
this one gathers the live state and applies decisions."""

from __future__ import annotations

from determined.api.gen import v1
from determined.common import errors
from master.agents import AgentHub
from master.config import MasterConfig
from master.experiments import Experiment, Experiments
from master.tasks import TaskManager


class Jobs:
    def __init__(
        self, cfg: MasterConfig, hub: AgentHub, tasks: TaskManager, experiments: Experiments
    ) -> None:
        self._cfg = cfg
        self._hub = hub
        self._tasks = tasks
        self._exps = experiments

    def pool_of(self, exp: Experiment) -> str:
        return exp.config.resources.resource_pool or self._cfg.default_resource_pool

    def _check_pool(self, pool: str) -> str:
        pool = pool or self._cfg.default_resource_pool
        if pool not in {p.name for p in self._cfg.resource_pools}:
            raise errors.NotFound(f"resource pool {pool!r} not found")
        return pool

    def queue(self, pool: str) -> list[v1.Job]:
        pool = self._check_pool(pool)
        rows: list[tuple[tuple[int, int, float, int], v1.Job]] = []
        for exp in self._exps.live.values():
            if self.pool_of(exp) != pool:
                continue
            acquired = needed = 0
            order = float("inf")
            for trial in exp.trials.values():
                if trial.state.terminal:
                    continue
                slots = exp.config.resources.slots_per_trial
                alloc = self._tasks.allocation_of(trial.task_id)
                req = self._tasks.pending.get(trial.task_id)
                if alloc is not None:
                    acquired += sum(len(c.slot_ids) for c in alloc.containers.values())
                    needed += slots
                elif req is not None:
                    needed += slots
                    order = min(order, req.order)
            if needed == 0:
                continue
            priority = exp.config.resources.priority
            prio = priority if priority is not None else 42
            job = v1.Job(
                job_id=exp.job_id,
                type="TYPE_EXPERIMENT",
                name=exp.config.name or f"Experiment {exp.id}",
                priority=prio,
                weight=exp.config.resources.weight,
                submission_time=exp.start_time,
                acquired_slots=acquired,
                needed_slots=needed,
                state="STATE_SCHEDULED" if acquired or needed == 0 else "STATE_QUEUED",
                username=exp.username,
                resource_pool=pool,
                entity_id=exp.id,
            )
            scheduled = 0 if acquired else 1
            rows.append(((scheduled, prio, exp.queue_order or order, exp.id), job))
        rows.sort(key=lambda r: r[0])
        return [job for _, job in rows]

    def pools(self) -> list[v1.ResourcePool]:
        out = []
        for p in self._cfg.resource_pools:
            agents = [
                a for a in self._hub.agents.values() if a.resource_pool == p.name and a.connected
            ]
            total = sum(len(a.slots) for a in agents)
            used = sum(1 for a in agents for s in a.slots.values() if s.allocation_id)
            out.append(
                v1.ResourcePool(
                    name=p.name,
                    description=p.description,
                    scheduler=p.scheduler,
                    fitting_policy=p.fitting_policy,
                    preemption=p.preemption,
                    num_agents=len(agents),
                    slots_total=total,
                    slots_used=used,
                    is_default=p.name == self._cfg.default_resource_pool,
                )
            )
        return out

    def set_agent_enabled(self, agent_id: str, *, enabled: bool, drain: bool) -> v1.Agent:
        agent = self._hub.agents.get(agent_id)
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
