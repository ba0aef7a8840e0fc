"""The priority scheduler: lower priority number first, FIFO within a priority.

Follows Determined's priority scheduler:

- Requests are taken by (priority, queue order), one priority level at a time, and placed
  all-or-nothing; within a level, later requests fill gaps a blocked one cannot use.
- Once a level has a request that does not fit, lower levels start nothing more unless
  preemption is on (they could never be made to give the slots back otherwise, and the
  blocked request would starve); with preemption they backfill, since they can be.
- With preemption, a blocked request takes slots from running allocations behind it in
  the queue: a higher priority number, or the same priority and a later position (which
  is what makes ``det job update --ahead-of`` take effect on a full cluster). Victims are
  chosen lowest in the queue first, newest first among equals, and only as many as needed.
  Once a request is waiting for slots that are not free yet (its victims', or those of
  allocations already told to leave) the pass starts nothing else, so the freed slots go
  to the request they were freed for on a later pass.
- Zero-slot tasks never compete for slots and are placed independently.
"""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter

from pydet.master.scheduler.fit import Capacity, place_zero_slot
from pydet.master.scheduler.running import RunningSet
from pydet.master.scheduler.types import (
    AgentView,
    Decision,
    Placement,
    PoolPolicy,
    Request,
    RunningAllocation,
)

# Ties keep the caller's order (sorts are stable).
queue_key = attrgetter("priority", "order")


def decide_priority(
    policy: PoolPolicy,
    agents: Sequence[AgentView],
    running: Sequence[RunningAllocation] | RunningSet,
    pending: Sequence[Request],
) -> Decision:
    capacity = Capacity(agents, policy.fitting_policy)
    placements = place_zero_slot(capacity, pending, key=queue_key)
    if not isinstance(running, RunningSet):
        running = RunningSet.of(running)

    limits = _Limits(running, capacity)
    held = limits.held_by_job()
    # Free slots as they will be once allocations told to leave have left, minus the room
    # held for the requests they leave for. Made on the first request that needs it.
    planning: Capacity | None = None
    preemptor: _Preemptor | None = None
    preemptions: list[str] = []
    waiting = False  # some request holds room that is not free yet: start nothing more
    blocked = False
    # Requests too big for the pool even if empty neither block others nor preempt.
    queue = sorted(
        (
            r
            for r in pending
            if 0 < r.slots <= (limits.largest_agent if r.single_node else limits.total)
        ),
        key=queue_key,
    )
    # The smallest request (spanning, single-node) for which no victims could be found: no
    # later one that size or bigger can do better, as it is behind in the queue (fewer
    # candidates) and slots only get scarcer, so it is not searched for again.
    hopeless = [_NEVER, _NEVER]
    fit, fits, take = capacity.fit, capacity.fits, capacity.take
    for _, level in itertools.groupby(queue, key=lambda r: r.priority):
        may_start = not waiting and (not blocked or policy.preemption)
        unplaced: list[Request] = []
        for request in level:
            slots, job = request.slots, request.job_id or request.id
            if request.max_slots is not None and held[job] + slots > request.max_slots:
                continue  # capped by its own job: neither blocks others nor preempts
            if not may_start:
                if not fits(
                    slots, single_node=request.single_node, exclude=request.excluded_agents
                ):
                    unplaced.append(request)
                continue
            plan = fit(slots, single_node=request.single_node, exclude=request.excluded_agents)
            if plan is None:
                unplaced.append(request)
                continue
            take(plan)
            if planning is not None:
                planning.take(plan)
            held[job] += slots
            placements.append(Placement(request.id, plan))
        blocked = blocked or bool(unplaced)
        if not policy.preemption:
            continue
        for request in unplaced:
            job = request.job_id or request.id
            if request.max_slots is not None and held[job] + request.slots > request.max_slots:
                continue  # an earlier request of its job took what the cap allows
            if request.excluded_agents:
                continue  # it waits: victims' slots may be on the agents it avoids
            if planning is None:
                planning = capacity.copy()
                for alloc in running.preempting.values():
                    for agent_id, slot_ids in alloc.containers:
                        planning.give(agent_id, slot_ids)
            # Room left by allocations already leaving, or by victims chosen for an earlier
            # request, may suffice: then it waits for that instead of preempting more.
            plan = planning.fit(request.slots, single_node=request.single_node)
            if plan is None:
                if request.slots >= hopeless[request.single_node]:
                    continue
                # Sorting every running allocation is only worth it when one is behind the
                # request in the queue (usually none: one experiment's trials are equals).
                victims = None
                most = running.most_preemptable()
                if most is not None and most > (request.priority, request.order):
                    if preemptor is None:
                        preemptor = _Preemptor(running, planning)
                    victims = preemptor.plan(request)
                if victims is None:
                    hopeless[request.single_node] = request.slots
                    continue
                for victim in victims:
                    preemptions.append(victim.id)
                    for agent_id, slot_ids in victim.containers:
                        planning.give(agent_id, slot_ids)
                plan = planning.fit(request.slots, single_node=request.single_node)
                assert plan is not None, "victims were chosen to make the request fit"
            planning.take(plan)
            held[job] += request.slots
            waiting = True
    return Decision(tuple(placements), tuple(preemptions))


class _Limits:
    """What the pool could hold if it were empty, and what each job holds now."""

    def __init__(self, running: RunningSet, cap: Capacity) -> None:
        held_on = running.held_on_agent
        size = [cap.free_count(agent_id) + held_on.get(agent_id, 0) for agent_id in cap.agent_ids]
        self._held = running.held_by_job
        self.total = sum(size)
        self.largest_agent = max(size, default=0)

    def held_by_job(self) -> defaultdict[str, int]:
        return defaultdict(int, self._held)


_NEVER = 1 << 62


class _Preemptor:
    """Chooses the fewest, least important running allocations that make a request fit.

    Candidates are sorted once by how readily they are preempted (highest priority number,
    then latest queue position, then newest); those eligible for a request are then exactly
    a prefix of that list, found by bisection. A request that may span agents needs only a
    total, taken from the front of the list; a single-node request needs one agent with
    enough room, found through a heap per request size keyed by "how far down the list
    must we go to empty enough of this agent", so no request scans every agent. A chosen
    set is then pruned, sparing the most important victims first, until every victim left
    is needed.
    """

    def __init__(self, running: Iterable[RunningAllocation], capacity: Capacity) -> None:
        self._cap = capacity
        cands = []
        for a in running:
            if a.preempting:
                continue
            slots = 0
            for agent_id, slot_ids in a.containers:
                if agent_id not in capacity:
                    break  # on a draining or disabled agent: left alone
                slots += len(slot_ids)
            else:
                if slots:
                    cands.append((-a.priority, -a.order, -a.started, a.id, a, slots))
        cands.sort()
        self._cands = [c[4] for c in cands]
        self._slots = [c[5] for c in cands]
        self._keys = [(c[0], c[1]) for c in cands]
        self._taken = [False] * len(cands)
        # Union-find "next candidate not yet taken", so taken ones are skipped in O(1).
        self._next = list(range(len(cands) + 1))
        self._on_agent: dict[str, list[tuple[int, int]]] | None = None
        self._heaps: dict[int, list[tuple[int, int, str, int]]] = {}
        self._version: defaultdict[str, int] = defaultdict(int)
        self._index = {agent_id: i for i, agent_id in enumerate(capacity.agent_ids)}

    def plan(self, request: Request) -> list[RunningAllocation] | None:
        cutoff = bisect_left(self._keys, (-request.priority, -request.order))
        if cutoff == 0:
            return None
        if request.single_node:
            ranks = self._plan_one_agent(request.slots, cutoff)
        else:
            ranks = self._plan_total(request.slots, cutoff)
        if ranks is None:
            return None
        for rank in ranks:
            self._taken[rank] = True
            self._next[rank] = rank + 1
        return [self._cands[rank] for rank in ranks]

    def _find(self, i: int) -> int:
        root = i
        while self._next[root] != root:
            root = self._next[root]
        while self._next[i] != root:
            self._next[i], i = root, self._next[i]
        return root

    def _plan_total(self, slots: int, cutoff: int) -> list[int] | None:
        deficit = slots - self._cap.total_free
        chosen: list[int] = []
        got = 0
        rank = self._find(0)
        while rank < cutoff and got < deficit:
            chosen.append(rank)
            got += self._slots[rank]
            rank = self._find(rank + 1)
        if got < deficit:
            return None
        return self._prune(chosen, got, deficit, lambda rank: self._slots[rank])

    def _plan_one_agent(self, slots: int, cutoff: int) -> list[int] | None:
        heap = self._heap(slots)
        while heap and heap[0][3] != self._version[heap[0][2]]:
            heapq.heappop(heap)  # stale: the agent changed since this entry
        if not heap or heap[0][0] >= cutoff:
            return None
        agent_id = heap[0][2]
        assert self._on_agent is not None
        deficit = slots - self._cap.free_count(agent_id)
        chosen: list[int] = []
        on_agent: dict[int, int] = {}
        got = 0
        for rank, n in self._on_agent[agent_id]:
            if got >= deficit:
                break
            if not self._taken[rank]:
                chosen.append(rank)
                on_agent[rank] = n
                got += n
        return self._prune(chosen, got, deficit, on_agent.__getitem__)

    @staticmethod
    def _prune(
        chosen: list[int], got: int, deficit: int, slots_of: Callable[[int], int]
    ) -> list[int]:
        kept = []
        for rank in reversed(chosen):
            if got - slots_of(rank) >= deficit:
                got -= slots_of(rank)
            else:
                kept.append(rank)
        kept.reverse()
        return kept

    def _heap(self, slots: int) -> list[tuple[int, int, str, int]]:
        heap = self._heaps.get(slots)
        if heap is None:
            if self._on_agent is None:
                self._on_agent = defaultdict(list)
                for rank, alloc in enumerate(self._cands):
                    for agent_id, slot_ids in alloc.containers:
                        if slot_ids:
                            self._on_agent[agent_id].append((rank, len(slot_ids)))
                # From now on the heaps follow every change of the capacity.
                self._cap.watch(self._agent_changed)
            heap = [
                (self._cost(a, slots), self._index[a], a, self._version[a])
                for a in self._cap.agent_ids
            ]
            heapq.heapify(heap)
            self._heaps[slots] = heap
        return heap

    def _cost(self, agent_id: str, slots: int) -> int:
        """The rank of the last candidate to preempt for ``slots`` on this agent."""
        assert self._on_agent is not None
        deficit = slots - self._cap.free_count(agent_id)
        if deficit <= 0:
            return -1
        got = 0
        for rank, n in self._on_agent.get(agent_id, ()):
            if not self._taken[rank]:
                got += n
                if got >= deficit:
                    return rank
        return _NEVER

    def _agent_changed(self, agent_id: str) -> None:
        self._version[agent_id] += 1
        version = self._version[agent_id]
        for slots, heap in self._heaps.items():
            entry = (self._cost(agent_id, slots), self._index[agent_id], agent_id, version)
            heapq.heappush(heap, entry)
