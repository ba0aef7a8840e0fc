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
from collections.abc import Collection, Mapping, Sequence
from operator import attrgetter

from pydet.master.scheduler.fit import Capacity, place_zero_slot
from pydet.master.scheduler.types import (
    AgentView,
    Decision,
    Placement,
    PoolPolicy,
    Request,
    RunningAllocation,
)

_by_order = attrgetter("order")
_NEVER = 1 << 62


def fair_shares(capacity: int, demands: Mapping[str, tuple[int, float]]) -> dict[str, int]:
    """Whole-slot shares of ``capacity`` for jobs given as ``{job: (demand, weight)}``.

    Ties in rounding favour jobs earlier in the mapping (the caller passes queue order).
    """
    wants = [d for d, _ in demands.values()]
    weights = [w for _, w in demands.values()]
    return dict(zip(demands, _water_fill(capacity, wants, weights), strict=True))


def _water_fill(capacity: int, wants: list[int], weights: list[float]) -> list[int]:
    """Shares for jobs given as parallel lists; rounding ties favour lower indices."""
    level_of = [d / w if d > 0 and w > 0 else -1.0 for d, w in zip(wants, weights, strict=True)]
    jobs = [j for j, level in enumerate(level_of) if level >= 0]
    jobs.sort(key=level_of.__getitem__)
    fluid = [0.0] * len(wants)
    left = float(capacity)
    weight = sum(weights[j] for j in jobs)
    for i, j in enumerate(jobs):
        level = left / weight
        if level_of[j] <= level:
            fluid[j] = wants[j]
            left -= wants[j]
            weight -= weights[j]
            continue
        for rest in jobs[i:]:
            fluid[rest] = level * weights[rest]
        break
    shares = [min(d, int(f + 1e-9)) if f > 0 else 0 for d, f in zip(wants, fluid, strict=True)]
    leftover = min(capacity, sum(wants[j] for j in jobs)) - sum(shares)
    if leftover > 0:
        remainder = [f - s for f, s in zip(fluid, shares, strict=True)]
        short = [j for j, r in enumerate(remainder) if r > 0]
        short.sort(key=remainder.__getitem__, reverse=True)  # stable: ties keep index order
        for j in short[:leftover]:
            shares[j] += 1
    return shares


class _Jobs:
    """The pool's jobs as parallel lists indexed by job number, numbered in queue order:
    with ten thousand jobs, a handful of lists is much cheaper to build and walk than an
    object per job."""

    def __init__(
        self, capacity: Capacity, running: Collection[RunningAllocation], pending: Sequence[Request]
    ) -> None:
        size = {agent_id: capacity.free_count(agent_id) for agent_id in capacity.agent_ids}
        for alloc in running:
            for agent_id, slot_ids in alloc.containers:
                if agent_id in size:
                    size[agent_id] += len(slot_ids)
        self.pool_size = pool_size = sum(size.values())
        largest = max(size.values(), default=0)
        # The requests that take a slot and could ever fit, in queue order.
        self.requests = requests = [
            r
            for r in sorted(pending, key=_by_order)
            if 0 < r.slots <= (largest if r.single_node else pool_size)
        ]

        # Number jobs by their earliest position; what first names a job carries its settings.
        self.index: dict[str, int] = {}
        named: list[Request | RunningAllocation] = []
        sources: list[Request | RunningAllocation] = [*requests, *running]
        for source in sorted(sources, key=_by_order):
            name = source.job_id or source.id
            if name not in self.index:
                self.index[name] = len(named)
                named.append(source)
        n = len(named)
        self.weight = [s.weight for s in named]
        self.order = [s.order for s in named]
        self.cap = [s.max_slots for s in named]
        self.held = [0] * n  # slots held anywhere: what max_slots limits
        # Slots of running, not-yet-preempted allocations on schedulable agents: what the
        # share is measured against, and what may be taken back.
        self.active = [0] * n
        self.asked = [0] * n  # slots asked for by its requests
        self.allocations: dict[int, list[RunningAllocation]] = {}
        # Each job's requests chained in queue order through ``first`` and ``next``.
        self.first = [-1] * n
        self.next = [-1] * len(requests)

        index = self.index
        for alloc in running:
            j = index[alloc.job_id or alloc.id]
            slots = 0
            on_pool = True
            for agent_id, slot_ids in alloc.containers:
                slots += len(slot_ids)
                on_pool = on_pool and agent_id in size
            self.held[j] += slots
            if on_pool and slots and not alloc.preempting:
                self.active[j] += slots
                self.allocations.setdefault(j, []).append(alloc)
        last: dict[int, int] = {}
        self.job_of = [index[r.job_id or r.id] for r in requests]
        for i, request in enumerate(requests):
            j = self.job_of[i]
            if j in last:
                self.next[last[j]] = i
            else:
                self.first[j] = i
            last[j] = i
            self.asked[j] += request.slots

    def wants(self) -> list[int]:
        """What each job would hold with every request running, within its max_slots."""
        wants = [a + k for a, k in zip(self.active, self.asked, strict=True)]
        for j, cap in enumerate(self.cap):
            if cap is not None:
                wants[j] = max(0, min(wants[j], cap - (self.held[j] - self.active[j])))
        return wants


def decide_fair_share(
    policy: PoolPolicy,
    agents: Sequence[AgentView],
    running: Collection[RunningAllocation],
    pending: Sequence[Request],
) -> Decision:
    capacity = Capacity(agents, policy.fitting_policy)
    placements = place_zero_slot(capacity, pending, key=_by_order)
    t = _Jobs(capacity, running, pending)
    share = _water_fill(t.pool_size, t.wants(), t.weight)
    got = list(t.active)
    held, caps = t.held, t.cap
    placed = [False] * len(t.requests)
    fit, take, requests, nxt = capacity.fit, capacity.take, t.requests, t.next

    # Slots only get scarcer during a pass: once a request of some size (spanning, or on
    # one node) does not fit, no request that size or bigger will, so do not look again.
    misfit = [_NEVER, _NEVER]

    def start(j: int, i: int) -> None:
        request = requests[i]
        if request.slots >= misfit[request.single_node]:
            return
        plan = fit(request.slots, single_node=request.single_node, exclude=request.excluded_agents)
        if plan is None:
            if not request.excluded_agents:  # its misfit says nothing about the others
                misfit[request.single_node] = request.slots
            return
        take(plan)
        got[j] += request.slots
        held[j] += request.slots
        placed[i] = True
        placements.append(Placement(request.id, plan))

    # (1) Everyone up to their share, the least-served first (then in queue order).
    ranked = [j for j, g in enumerate(got) if not g]
    busy = [j for j, g in enumerate(got) if g]
    busy.sort(key=lambda j: got[j] / (share[j] or 1))
    ranked += busy
    # ...and what jobs under their share could still run within it, were the slots free.
    wanted = 0
    for j in ranked:
        i = t.first[j]
        cap = caps[j]
        while i >= 0 and got[j] < share[j]:
            slots = requests[i].slots
            if got[j] + slots <= share[j] and (cap is None or held[j] + slots <= cap):
                start(j, i)
            i = nxt[i]
        gap = share[j] - got[j]
        i = t.first[j]
        while gap > 0 and i >= 0:
            slots = requests[i].slots
            if not placed[i] and slots <= gap and (cap is None or held[j] + slots <= cap):
                wanted += slots
                gap -= slots
            i = nxt[i]
    if wanted:
        return Decision(tuple(placements), tuple(_rebalance(t, share, wanted)))

    # (3) Leftovers nobody can use within their share: least-served job first.
    def small_enough(request: Request) -> bool:
        return request.slots < misfit[request.single_node] and request.slots <= capacity.total_free

    def next_fitting(i: int) -> int:
        """The job's next unplaced request from ``i`` on that might fit in what is left."""
        while i >= 0 and (placed[i] or not small_enough(requests[i])):
            i = nxt[i]
        return i

    # Each job's first request that might fit (requests are in queue order).
    firsts: dict[int, int] = {}
    for i, (j, request) in enumerate(zip(t.job_of, requests, strict=True)):
        if not placed[i] and j not in firsts and small_enough(request):
            firsts[j] = i
    heap = [(got[j] / t.weight[j], t.order[j], j, i) for j, i in firsts.items()]
    heapq.heapify(heap)
    while heap and capacity.total_free:
        _, order, j, i = heapq.heappop(heap)
        cap = t.cap[j]
        if cap is None or held[j] + requests[i].slots <= cap:
            start(j, i)
        i = next_fitting(nxt[i])
        if i >= 0:
            heapq.heappush(heap, (got[j] / t.weight[j], order, j, i))
    return Decision(tuple(placements), ())


def _rebalance(t: _Jobs, share: list[int], wanted: int) -> list[str]:
    """Allocations to preempt from jobs over their share, most over (by weight) first."""
    active = t.active
    heap = [
        (-(active[j] - share[j]) / t.weight[j], t.order[j], j)
        for j in t.allocations
        if active[j] > share[j]
    ]
    heapq.heapify(heap)
    newest_first = {
        j: sorted(t.allocations[j], key=lambda a: (-a.started, -a.order, a.id)) for _, _, j in heap
    }
    cursor = dict.fromkeys(newest_first, 0)
    preemptions: list[str] = []
    freed = 0
    while heap and freed < wanted:
        _, order, j = heapq.heappop(heap)
        allocs = newest_first[j]
        excess = active[j] - share[j]
        i = cursor[j]
        # Only a whole allocation the job can give up without dropping below its share;
        # excess only shrinks, so one too large now stays too large.
        while i < len(allocs) and allocs[i].slots > excess:
            i += 1
        if i == len(allocs):
            continue
        cursor[j] = i + 1
        preemptions.append(allocs[i].id)
        active[j] -= allocs[i].slots
        freed += allocs[i].slots
        if active[j] > share[j]:
            heapq.heappush(heap, (-(active[j] - share[j]) / t.weight[j], order, j))
    return preemptions
