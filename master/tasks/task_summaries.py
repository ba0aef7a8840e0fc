"""The tasks the cluster holds, as `det task list` shows them: Determined's allocation
summaries, one per live allocation and one per task still waiting for slots."""

from __future__ import annotations

from collections.abc import Callable

from determined.api.gen import v1
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.task_list import TaskList, TaskRequest


def task_name(task_id: str, description: str | None = None) -> str:
    """A trial's task ("3.7") as Determined names it, "Trial 7 (Experiment 3)"; any other
    task (a UUID) by its description ("Command (brave-azure-otter)")."""
    exp, _, trial = task_id.partition(".")
    if trial:
        return f"Trial {trial} (Experiment {exp})"
    return description or f"Task ({task_id[:8]})"


def _running(alloc: Allocation, scheduler: str, name: str) -> v1.AllocationSummary:
    containers = sorted(alloc.containers.values(), key=lambda c: c.rank)
    return v1.AllocationSummary(
        task_id=alloc.task_id,
        allocation_id=alloc.id,
        name=name,
        registered_time=alloc.start_time,
        resource_pool=alloc.job.resource_pool,
        slots_needed=sum(len(c.slot_ids) for c in containers),
        resources=[
            v1.ResourcesSummary(resources_id=c.id, agent_id=c.agent_id, slot_ids=list(c.slot_ids))
            for c in containers
        ],
        scheduler_type=scheduler,
        priority=alloc.job.priority,
    )


def _waiting(req: TaskRequest, scheduler: str, name: str) -> v1.AllocationSummary:
    return v1.AllocationSummary(
        task_id=req.task_id,
        name=name,
        registered_time=req.requested,
        resource_pool=req.job.resource_pool,
        slots_needed=req.slots,
        scheduler_type=scheduler,
        priority=req.job.priority,
    )


def summaries(
    tasks: TaskList,
    scheduler_of: Callable[[str], str],
    description_of: Callable[[str], str | None] = lambda task_id: None,
) -> dict[str, v1.AllocationSummary]:
    """Every live allocation by its id, then every waiting task by its task id;
    ``description_of`` names the tasks that are not trials."""
    out = {
        a.id: _running(
            a, scheduler_of(a.job.resource_pool), task_name(a.task_id, description_of(a.task_id))
        )
        for a in tasks.allocations.values()
    }
    for req in tasks.pending.values():
        name = task_name(req.task_id, description_of(req.task_id))
        out.setdefault(req.task_id, _waiting(req, scheduler_of(req.job.resource_pool), name))
    return out
