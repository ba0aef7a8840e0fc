"""The job queue's ordering model, pure: positions, moves, updates and the `det job list` view.

A job's place in its pool's queue is a float ``order`` (its submission sequence unless a
user moved it). The priority scheduler takes jobs by (priority, order), so moving a job
ahead of or behind another gives it a position between that job and its neighbour at the
same priority, and the other's priority when they differ, as Determined does. Floats
leave room for about fifty moves into the same gap; when they run out the whole queue is
renumbered (1, 2, 3, ...) in its current order.

Nothing here touches master state: functions return the jobs that changed and the caller
persists them. A batch of updates is validated as a whole against a working copy first,
so either every update applies or none does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from operator import attrgetter
from typing import Protocol

from determined.common import errors

STATE_QUEUED = "STATE_QUEUED"
STATE_SCHEDULED = "STATE_SCHEDULED"
TYPE_EXPERIMENT = "TYPE_EXPERIMENT"
MIN_PRIORITY = 1
MAX_PRIORITY = 99


@dataclass(frozen=True)
class QueuedJob:
    """A job not yet ended, as far as the queue is concerned."""

    job_id: str
    _: KW_ONLY
    type: str = TYPE_EXPERIMENT
    resource_pool: str = "default"
    priority: int = 42
    weight: float = 1.0
    order: float = 0.0
    # Some allocation of the job is running or was just placed.
    scheduled: bool = False
    # Completed, errored or canceled: no longer in the queue.
    ended: bool = False


@dataclass(frozen=True)
class JobUpdate:
    """One `det job update` (or one item of `update-batch`): exactly one field set."""

    job_id: str
    _: KW_ONLY
    priority: int | None = None
    weight: float | None = None
    resource_pool: str | None = None
    ahead_of: str | None = None
    behind_of: str | None = None


@dataclass(frozen=True)
class QueueRow:
    """One row of `det job list`: its ``#`` and its Status column."""

    position: int
    job: QueuedJob
    state: str


class PoolSettings(Protocol):
    """Anything shaped like ``master.config.PoolConfig``."""

    @property
    def name(self) -> str: ...

    @property
    def scheduler(self) -> str: ...


_priority_order = attrgetter("priority", "order", "job_id")
_fair_share_order = attrgetter("order", "job_id")


def queue_rows(jobs: Iterable[QueuedJob], *, resource_pool: str, scheduler: str) -> list[QueueRow]:
    """The rows of one pool's queue in scheduling order; ended jobs are left out.

    The priority scheduler's order is (priority, position); fair share ignores both
    priority and moves, so its queue is in submission order.
    """
    live = [j for j in jobs if j.resource_pool == resource_pool and not j.ended]
    live.sort(key=_fair_share_order if scheduler == "fair_share" else _priority_order)
    return [
        QueueRow(i, job, STATE_SCHEDULED if job.scheduled else STATE_QUEUED)
        for i, job in enumerate(live)
    ]


def ahead_of(jobs: Sequence[QueuedJob], job_id: str, anchor_id: str) -> list[QueuedJob]:
    """Move ``job_id`` to just before ``anchor_id``; returns the jobs that changed."""
    return _move(jobs, job_id, anchor_id, ahead=True)


def behind_of(jobs: Sequence[QueuedJob], job_id: str, anchor_id: str) -> list[QueuedJob]:
    """Move ``job_id`` to just after ``anchor_id``; returns the jobs that changed."""
    return _move(jobs, job_id, anchor_id, ahead=False)


def _find(jobs: Sequence[QueuedJob], job_id: str) -> QueuedJob:
    for job in jobs:
        if job.job_id == job_id and not job.ended:
            return job
    raise errors.NotFound(f"job {job_id} not found in the queue")


def _move(
    jobs: Sequence[QueuedJob], job_id: str, anchor_id: str, *, ahead: bool
) -> list[QueuedJob]:
    where = "ahead of" if ahead else "behind"
    if job_id == anchor_id:
        raise errors.InvalidArgument(f"job {job_id} cannot be moved {where} itself")
    job, anchor = _find(jobs, job_id), _find(jobs, anchor_id)
    if job.resource_pool != anchor.resource_pool:
        raise errors.InvalidArgument(
            f"job {job_id} is in pool {job.resource_pool!r} but job {anchor_id} is in "
            f"{anchor.resource_pool!r}; jobs are only ordered within one pool"
        )
    # The neighbour on the far side of the anchor, among jobs of the anchor's priority.
    neighbour: float | None = None
    crowded = False
    for other in jobs:
        if (
            other.ended
            or other.resource_pool != anchor.resource_pool
            or other.priority != anchor.priority
            or other.job_id in (job_id, anchor_id)
        ):
            continue
        if other.order == anchor.order:
            crowded = True  # a tie: no position lies strictly between them
        elif ahead and other.order < anchor.order:
            neighbour = other.order if neighbour is None else max(neighbour, other.order)
        elif not ahead and other.order > anchor.order:
            neighbour = other.order if neighbour is None else min(neighbour, other.order)
    if job.priority == anchor.priority:
        low, high = (neighbour, anchor.order) if ahead else (anchor.order, neighbour)
        if (low is None or low < job.order) and (high is None or job.order < high) and not crowded:
            return []  # already there
    if neighbour is None:
        position = anchor.order - 1.0 if ahead else anchor.order + 1.0
    else:
        position = (neighbour + anchor.order) / 2
    if crowded or position in (neighbour, anchor.order):
        renumbered = _renumber(jobs, anchor.resource_pool)
        again = [renumbered.get(j.job_id, j) for j in jobs]
        changes = {j.job_id: j for j in renumbered.values()}
        for j in _move(again, job_id, anchor_id, ahead=ahead):
            changes[j.job_id] = j
        return list(changes.values())
    return [dataclasses.replace(job, priority=anchor.priority, order=position)]


def _renumber(jobs: Sequence[QueuedJob], pool: str) -> dict[str, QueuedJob]:
    """Spread a pool's positions out again (1, 2, 3, ...), keeping their order."""
    live = sorted(
        (j for j in jobs if j.resource_pool == pool and not j.ended),
        key=lambda j: (j.order, j.job_id),
    )
    return {j.job_id: dataclasses.replace(j, order=float(i)) for i, j in enumerate(live, start=1)}


def apply_updates(
    jobs: Sequence[QueuedJob], updates: Sequence[JobUpdate], pools: Iterable[PoolSettings]
) -> list[QueuedJob]:
    """Validate and apply a batch of updates; returns every job that changed, final state.

    Each update is checked against the queue as the earlier ones left it (so
    ``a.priority=1 b.ahead-of=a`` works), but nothing is returned unless all pass: the
    caller persists the result or, on an error, nothing.
    """
    schedulers: Mapping[str, str] = {p.name: p.scheduler for p in pools}
    work = {j.job_id: j for j in jobs if not j.ended}
    changed: dict[str, QueuedJob] = {}
    for update in updates:
        job = work.get(update.job_id)
        if job is None:
            raise errors.NotFound(f"job {update.job_id} not found in the queue")
        for result in _apply_one(list(work.values()), job, update, schedulers):
            changed[result.job_id] = work[result.job_id] = result
    return list(changed.values())


def _apply_one(
    work: Sequence[QueuedJob], job: QueuedJob, update: JobUpdate, schedulers: Mapping[str, str]
) -> list[QueuedJob]:
    fields = {
        "priority": update.priority,
        "weight": update.weight,
        "resource-pool": update.resource_pool,
        "ahead-of": update.ahead_of,
        "behind-of": update.behind_of,
    }
    given = [name for name, value in fields.items() if value is not None]
    if len(given) != 1:
        raise errors.InvalidArgument(
            f"job {job.job_id}: an update sets exactly one of {', '.join(fields)}"
            + (f" (got {', '.join(given)})" if given else "")
        )
    (field,) = given
    scheduler = schedulers.get(job.resource_pool, "priority")
    if update.priority is not None:
        _require(job, scheduler, field, "priority", "set its weight instead")
        if not MIN_PRIORITY <= update.priority <= MAX_PRIORITY:
            raise errors.InvalidArgument(
                f"job {job.job_id}: priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}"
                f" (lower runs first), not {update.priority}"
            )
        return [dataclasses.replace(job, priority=update.priority)]
    if update.weight is not None:
        _require(job, scheduler, field, "fair_share", "set its priority instead")
        if not update.weight > 0:
            raise errors.InvalidArgument(
                f"job {job.job_id}: weight must be greater than 0, not {update.weight}"
            )
        return [dataclasses.replace(job, weight=update.weight)]
    if update.resource_pool is not None:
        if job.type != TYPE_EXPERIMENT:
            raise errors.FailedPrecondition(
                f"job {job.job_id} is a {job.type}: only experiments can change resource pool;"
                " cancel it and submit it again to the other pool"
            )
        if update.resource_pool not in schedulers:
            known = ", ".join(sorted(schedulers))
            raise errors.InvalidArgument(
                f"job {job.job_id}: no resource pool named {update.resource_pool!r}"
                f" (pools: {known})"
            )
        return [dataclasses.replace(job, resource_pool=update.resource_pool)]
    _require(job, scheduler, field, "priority", "fair share ignores queue position")
    if update.ahead_of is not None:
        return ahead_of(work, job.job_id, update.ahead_of)
    assert update.behind_of is not None
    return behind_of(work, job.job_id, update.behind_of)


def _require(job: QueuedJob, scheduler: str, field: str, needed: str, hint: str) -> None:
    if scheduler != needed:
        raise errors.FailedPrecondition(
            f"job {job.job_id} is in resource pool {job.resource_pool!r}, which uses the "
            f"{scheduler} scheduler; {field} applies only under the {needed} scheduler: {hint}"
        )
