"""Where a request fits: the free slots of a pool during one pass, bucketed by count.

Agents are kept in buckets indexed by their number of free slots, so finding the fullest
(pack) or emptiest (spread) agent that fits looks at a handful of buckets instead of every
agent; a pass over thousands of agents and requests stays linear. Zero-slot tasks go to
the agent with the fewest containers, found with a heap for the same reason.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydet.master.scheduler.types import AgentView, Containers, FittingPolicy, Placement, Request


class Capacity:
    """A private, mutable copy of the free slots of schedulable agents for one pass."""

    def __init__(self, agents: Iterable[AgentView], policy: FittingPolicy) -> None:
        self._pack = policy == "best"
        self._free: dict[str, list[str]] = {}
        self._containers: dict[str, int] = {}
        self._rank: dict[str, int] = {}
        # _buckets[k] holds the agents with exactly k free slots, as an insertion-ordered
        # set so that ties are broken the same way on every pass.
        self._buckets: list[dict[str, None]] = [{}]
        self.total_free = 0
        for agent in sorted(agents, key=lambda a: a.id):
            if not agent.schedulable:
                continue
            free = list(agent.free_slots)
            self._free[agent.id] = free
            self._containers[agent.id] = agent.num_containers
            self._rank[agent.id] = len(self._rank)
            self._bucket(len(free))[agent.id] = None
            self.total_free += len(free)
        self._by_containers: list[tuple[int, int, str]] = []
        self._containers_changed = True
        # Told of every agent whose free count changes (see watch).
        self._watchers: list[Callable[[str], None]] = []

    def copy(self) -> Capacity:
        """An independent copy (without listener), for planning that must not be placed."""
        other = Capacity((), "best")
        other._pack = self._pack
        other._free = {a: list(free) for a, free in self._free.items()}
        other._containers = dict(self._containers)
        other._rank = self._rank
        other._buckets = [dict(bucket) for bucket in self._buckets]
        other.total_free = self.total_free
        other._by_containers = list(self._by_containers)
        other._containers_changed = self._containers_changed
        return other

    def watch(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(agent_id)`` whenever an agent's free slots change from now on
        (the preemption planner keeps its per-agent costs current this way)."""
        self._watchers.append(listener)

    @property
    def agent_ids(self) -> Sequence[str]:
        return list(self._free)

    def __contains__(self, agent_id: str) -> bool:
        return agent_id in self._free

    def free_count(self, agent_id: str) -> int:
        return len(self._free[agent_id])

    def _bucket(self, count: int) -> dict[str, None]:
        while len(self._buckets) <= count:
            self._buckets.append({})
        return self._buckets[count]

    def fits(self, slots: int, *, single_node: bool, exclude: frozenset[str] = frozenset()) -> bool:
        if exclude:
            return self.fit(slots, single_node=single_node, exclude=exclude) is not None
        if single_node or slots == 0:
            return any(self._buckets[k] for k in range(slots, len(self._buckets)))
        return self.total_free >= slots

    def fit(
        self, slots: int, *, single_node: bool, exclude: frozenset[str] = frozenset()
    ) -> Containers | None:
        """Where ``slots`` would go now, or None; gang semantics: every slot or none.
        ``exclude``: agents it may not use (looked past one by one; such sets are small)."""
        if slots > self.total_free:
            return None
        buckets = self._buckets
        counts = (
            range(slots, len(buckets)) if self._pack else range(len(buckets) - 1, slots - 1, -1)
        )
        for k in counts:
            for agent_id in buckets[k]:
                if agent_id not in exclude:
                    return ((agent_id, tuple(self._free[agent_id][:slots])),)
        if single_node:
            return None
        # Span agents, emptiest first, so the task uses as few containers as possible.
        chosen: list[tuple[str, tuple[str, ...]]] = []
        needed = slots
        for k in range(len(buckets) - 1, 0, -1):
            for agent_id in buckets[k]:
                if agent_id in exclude:
                    continue
                take = min(needed, k)
                chosen.append((agent_id, tuple(self._free[agent_id][:take])))
                needed -= take
                if needed == 0:
                    return tuple(chosen)
        return None  # excluded agents held the rest

    def take(self, containers: Containers) -> None:
        """Mark the slots of a placement (or a reservation) as used."""
        for agent_id, slot_ids in containers:
            free = self._free[agent_id]
            del self._buckets[len(free)][agent_id]
            if slot_ids:
                n = len(slot_ids)
                if tuple(free[:n]) == slot_ids:  # what fit() hands out: the first free ones
                    del free[:n]
                else:
                    taken = set(slot_ids)
                    free[:] = [s for s in free if s not in taken]
                self.total_free -= n
            self._bucket(len(free))[agent_id] = None
            self._containers[agent_id] += 1
            self._containers_changed = True
            if slot_ids:
                for listener in self._watchers:
                    listener(agent_id)

    def give(self, agent_id: str, slot_ids: Sequence[str]) -> None:
        """Count slots as free again (those of a preempted allocation, for planning)."""
        if agent_id not in self._free or not slot_ids:
            return
        free = self._free[agent_id]
        del self._buckets[len(free)][agent_id]
        free.extend(slot_ids)
        self.total_free += len(slot_ids)
        self._bucket(len(free))[agent_id] = None
        for listener in self._watchers:
            listener(agent_id)

    def place_zero_slot(self, request_id: str) -> Placement | None:
        """Put a zero-slot task on the agent with the fewest containers."""
        if self._containers_changed:
            # Placements since the last zero-slot task; rare, as those are placed first.
            self._by_containers = [(n, self._rank[a], a) for a, n in self._containers.items()]
            heapq.heapify(self._by_containers)
            self._containers_changed = False
        if not self._by_containers:
            return None
        count, rank, agent_id = self._by_containers[0]
        self._containers[agent_id] = count + 1
        heapq.heapreplace(self._by_containers, (count + 1, rank, agent_id))
        return Placement(request_id, ((agent_id, ()),))


def place_zero_slot(
    capacity: Capacity, pending: Iterable[Request], *, key: Callable[[Request], Any]
) -> list[Placement]:
    """Place every zero-slot request, in ``key`` order: they compete for no slot."""
    placements = []
    for request in sorted((r for r in pending if r.slots == 0), key=key):
        placement = capacity.place_zero_slot(request.id)
        if placement is None:
            break
        placements.append(placement)
    return placements
