"""What the scheduler sees of the live allocations: one ``RunningSet`` per pool, kept
between passes and changed only where something changed, so that a pass costs what is
pending and what changed, not everything that runs.

An allocation's view is made from its job's settings, the slots it still holds and whether
it was told to leave. The task list names the allocations whose slots or preemption
changed (``TaskList.take_touched``); job settings change behind everyone's back (`det job
update` replaces an experiment's config), so each job's are read again on every pass, once
per job, and only a job whose settings changed has its allocations' views made again."""

from __future__ import annotations

from dataclasses import dataclass

from pydet.master import scheduler
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.task_list import Job

# A job's pool, id, priority, weight, queue order and max slots.
_JobSettings = tuple[str, str, int, float, float, int | None]
_ViewKey = tuple[_JobSettings, scheduler.Containers, bool]


@dataclass
class _LiveJob:
    job: Job  # held, so that its id() names it while it has allocations
    settings: _JobSettings
    allocations: dict[str, Allocation]


class RunningViews:
    def __init__(self) -> None:
        self._pools: dict[str, scheduler.RunningSet] = {}
        # Jobs with live allocations, by identity (a job is any object with its settings).
        self._jobs: dict[int, _LiveJob] = {}
        # What each allocation's view was made from (its pool is the settings' first).
        self._made: dict[str, _ViewKey] = {}

    def pool(self, name: str) -> scheduler.RunningSet:
        running = self._pools.get(name)
        if running is None:
            running = self._pools[name] = scheduler.RunningSet()
        return running

    def update(self, alloc: Allocation, *, live: bool) -> None:
        """Take in an allocation that started, changed (a container exited, it was told to
        leave) or, with ``live`` false, ended."""
        key = id(alloc.job)
        job = self._jobs.get(key)
        if not live:
            if job is not None:
                job.allocations.pop(alloc.id, None)
                if not job.allocations:
                    del self._jobs[key]
            made = self._made.pop(alloc.id, None)
            if made is not None:
                self.pool(made[0][0]).remove(alloc.id)
            return
        if job is None:
            job = self._jobs[key] = _LiveJob(alloc.job, _settings(alloc.job), {})
        job.allocations[alloc.id] = alloc
        self._view(alloc, job.settings)

    def refresh_jobs(self) -> None:
        """Read every live job's settings again and remake the views of those that changed."""
        for job in self._jobs.values():
            settings = _settings(job.job)
            if settings != job.settings:
                job.settings = settings
                for alloc in job.allocations.values():
                    self._view(alloc, settings)

    def _view(self, alloc: Allocation, settings: _JobSettings) -> None:
        key = (settings, alloc.held(), alloc.preempt.is_set())
        made = self._made.get(alloc.id)
        if made == key:
            return
        if made is not None and made[0][0] != settings[0]:
            self.pool(made[0][0]).remove(alloc.id)  # its job moved to another pool
        self._made[alloc.id] = key
        _, job_id, priority, weight, order, max_slots = settings
        self.pool(settings[0]).add(
            scheduler.RunningAllocation(
                alloc.id,
                job_id=job_id,
                containers=key[1],
                priority=priority,
                weight=weight,
                order=order,
                max_slots=max_slots,
                started=alloc.start_time,
                preempting=key[2],
            )
        )


def _settings(job: Job) -> _JobSettings:
    return (job.resource_pool, job.job_id, job.priority, job.weight, job.order, job.max_slots)
