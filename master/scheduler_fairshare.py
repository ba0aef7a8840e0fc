"""The fair-share scheduler: slots split among jobs by weight, capped by what each wants.

Each job's share comes from water-filling (max-min fairness, as in Determined): slots are
poured into jobs in proportion to their weights; a job that wants less than its level
keeps only what it wants and the rest is poured into the others. Fractions are rounded
down and the leftover slots go to the largest remainders, so shares are whole slots that
add up to the pool (or to the total demand, if smaller).

A pass then (1) starts each job's requests, in its queue order, while it stays within its
share; (2) if some job under its share is left with a request it could run within that
share, preempts whole allocations of jobs over their share (never taking a job below its
share) until as many slots are on their way back as the waiting jobs can use; otherwise
(3) lets leftover slots that nobody's share can use run further requests, least-served
job first, so the pool is not left idle. Priority and queue moves do not apply.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from master.scheduler_fit import Capacity, place_zero_slot
from master.scheduler_types import (
    AgentView,
    Decision,
    Placement,
    PoolPolicy,
    Request,
    RunningAllocation,
)


def fair_shares(capacity: int, demands: Mapping[str, tuple[int, float]]) -> dict[str, int]:
    """Whole-slot shares of ``capacity`` for jobs given as ``{job: (demand, weight)}``.

    Ties in rounding favour jobs earlier in the mapping (the caller passes queue order).
    """
    items = [(job, d, w, float(i)) for i, (job, (d, w)) in enumerate(demands.items())]
    shares = _water_fill(capacity, items)
    return {job: shares.get(job, 0) for job in demands}


def _water_fill(capacity: int, items: list[tuple[str, int, float, float]]) -> dict[str, int]:
    """Shares for (job, demand, weight, tie-break) items; see the module docstring."""
    jobs = [item for item in items if item[1] > 0 and item[2] > 0]
    fluid: dict[str, float] = {}
    left = float(capacity)
    weight = sum(item[2] for item in jobs)
    jobs.sort(key=lambda item: item[1] / item[2])
    for i, (job, demand, w, _) in enumerate(jobs):
        level = left / weight
        if demand <= level * w:
            fluid[job] = demand
            left -= demand
            weight -= w
            continue
        for rest, _, rest_w, _ in jobs[i:]:
            fluid[rest] = level * rest_w
        break
    shares: dict[str, int] = {}
    short: list[tuple[float, float, str]] = []
    total = 0
    for job, demand, _, tie in jobs:
        share = min(demand, int(fluid[job] + 1e-9))
        shares[job] = share
        total += demand
        if share < demand:
            short.append((share - fluid[job], tie, job))
    leftover = min(capacity, total) - sum(shares.values())
    if leftover > 0:
        short.sort()  # largest remainder first, then the earlier job
        for _, _, job in short[:leftover]:
            shares[job] += 1
    return shares


@dataclass(slots=True)
class _Job:
    weight: float
    order: float
    max_slots: int | None
    # Slots held anywhere (counts against max_slots).
    held: int = 0
    # Slots of running, not-yet-preempted allocations on schedulable agents: what the
    # job's share is measured against and what can be taken back.
    active: int = 0
    # Slots asked for by its pending requests that could ever fit.
    asked: int = 0
    allocations: list[RunningAllocation] = field(default_factory=list)
    pending: list[Request] = field(default_factory=list)
    share: int = 0
    # Slots it holds in this pass's accounting: active plus what the pass placed.
    got: int = 0

    def room(self, slots: int) -> bool:
        return self.max_slots is None or self.held + slots <= self.max_slots


def decide_fair_share(
    policy: PoolPolicy,
    agents: Sequence[AgentView],
    running: Sequence[RunningAllocation],
    pending: Sequence[Request],
) -> Decision:
    capacity = Capacity(agents, policy.fitting_policy)
    placements = place_zero_slot(capacity, pending, key=lambda r: r.order)
    jobs, pool_size = _jobs(capacity, running, pending)
    items = []
    for name, job in jobs.items():
        wanted = job.active + job.asked
        if job.max_slots is not None:
            wanted = min(wanted, job.max_slots - (job.held - job.active))
        items.append((name, wanted, job.weight, job.order))
    for name, share in _water_fill(pool_size, items).items():
        jobs[name].share = share

    # (1) Everyone up to their share, the least-served first.
    fit, take = capacity.fit, capacity.take
    unplaced: dict[str, list[Request]] = {}
    ranked = sorted((job.got / (job.share or 1), job.order, name) for name, job in jobs.items())
    for _, _, name in ranked:
        job = jobs[name]
        for request in job.pending:
            slots = request.slots
            plan = None
            if job.got + slots <= job.share and job.room(slots):
                plan = fit(slots, single_node=request.single_node)
            if plan is None:
                unplaced.setdefault(name, []).append(request)
                continue
            take(plan)
            job.got += slots
            job.held += slots
            placements.append(Placement(request.id, plan))

    # What jobs under their share could still run within it, were the slots free.
    wanted = 0
    for name, requests in unplaced.items():
        job = jobs[name]
        gap = job.share - job.got
        for request in requests:
            if gap <= 0:
                break
            if request.slots <= gap and job.room(request.slots):
                wanted += request.slots
                gap -= request.slots

    if wanted:
        return Decision(tuple(placements), tuple(_rebalance(jobs, wanted)))

    # (3) Leftovers nobody can use within their share: least-served job first.
    heap = [(jobs[n].got / jobs[n].weight, jobs[n].order, n, 0) for n in unplaced]
    heapq.heapify(heap)
    while heap and capacity.total_free:
        _, order, name, i = heapq.heappop(heap)
        job, requests = jobs[name], unplaced[name]
        request = requests[i]
        plan = None
        if job.room(request.slots):
            plan = fit(request.slots, single_node=request.single_node)
        if plan is not None:
            take(plan)
            job.got += request.slots
            job.held += request.slots
            placements.append(Placement(request.id, plan))
        if i + 1 < len(requests):
            heapq.heappush(heap, (job.got / job.weight, order, name, i + 1))
    return Decision(tuple(placements), ())


def _jobs(
    capacity: Capacity, running: Sequence[RunningAllocation], pending: Sequence[Request]
) -> tuple[dict[str, _Job], int]:
    """Group by job; also the pool's size were it empty."""
    jobs: dict[str, _Job] = {}
    size = {agent_id: capacity.free_count(agent_id) for agent_id in capacity.agent_ids}
    for alloc in running:
        name = alloc.job_id or alloc.id
        job = jobs.get(name)
        if job is None:
            job = jobs[name] = _Job(alloc.weight, alloc.order, alloc.max_slots)
        elif alloc.order < job.order:
            job.order = alloc.order
        slots = 0
        on_pool = True
        for agent_id, slot_ids in alloc.containers:
            slots += len(slot_ids)
            if agent_id in size:
                size[agent_id] += len(slot_ids)
            else:
                on_pool = False
        job.held += slots
        if on_pool and slots and not alloc.preempting:
            job.active += slots
            job.got += slots
            job.allocations.append(alloc)
    pool_size = sum(size.values())
    largest = max(size.values(), default=0)
    for request in pending:
        slots = request.slots
        if slots == 0 or slots > (largest if request.single_node else pool_size):
            continue  # takes no slot, or could never fit: no claim on a share
        name = request.job_id or request.id
        job = jobs.get(name)
        if job is None:
            job = jobs[name] = _Job(request.weight, request.order, request.max_slots)
        elif request.order < job.order:
            job.order = request.order
        job.pending.append(request)
        job.asked += slots
    for job in jobs.values():
        if len(job.pending) > 1:
            job.pending.sort(key=lambda r: r.order)
    return jobs, pool_size


def _rebalance(jobs: Mapping[str, _Job], wanted: int) -> list[str]:
    """Allocations to preempt from jobs over their share, most over (by weight) first."""
    heap = [
        (-(job.active - job.share) / job.weight, job.order, name)
        for name, job in jobs.items()
        if job.active > job.share
    ]
    heapq.heapify(heap)
    newest_first = {
        name: sorted(jobs[name].allocations, key=lambda a: (-a.started, -a.order, a.id))
        for _, _, name in heap
    }
    cursor = dict.fromkeys(newest_first, 0)
    preemptions: list[str] = []
    freed = 0
    while heap and freed < wanted:
        _, order, name = heapq.heappop(heap)
        job, allocs = jobs[name], newest_first[name]
        excess = job.active - job.share
        i = cursor[name]
        # Only a whole allocation the job can give up without dropping below its share;
        # excess only shrinks, so one too large now stays too large.
        while i < len(allocs) and allocs[i].slots > excess:
            i += 1
        if i == len(allocs):
            continue
        cursor[name] = i + 1
        preemptions.append(allocs[i].id)
        job.active -= allocs[i].slots
        freed += allocs[i].slots
        if job.active > job.share:
            heapq.heappush(heap, (-(job.active - job.share) / job.weight, order, name))
    return preemptions
