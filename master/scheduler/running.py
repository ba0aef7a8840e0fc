"""The running allocations of one pool, with the sums a priority pass needs kept as they
change: what each job and each agent holds, who is already leaving, and the least
important allocation that could be preempted.

The master keeps one per pool up to date as allocations start, change and end, so a pass
costs what is pending, not what runs: it reads these sums instead of walking every
running allocation. ``RunningSet.of`` makes one from a plain list (tests, benchmarks).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator

from pydet.master.scheduler.types import RunningAllocation

# (priority, queue order): the larger, the more readily preempted.
PreemptKey = tuple[int, float]


class RunningSet:
    """Running allocations by id, and their sums (read-only outside ``add``/``remove``)."""

    def __init__(self) -> None:
        self._views: dict[str, RunningAllocation] = {}
        # Slots held by each job, and on each agent (preempting allocations included).
        self.held_by_job: defaultdict[str, int] = defaultdict(int)
        self.held_on_agent: defaultdict[str, int] = defaultdict(int)
        # Those already told to leave: their slots count as free when planning preemption.
        self.preempting: dict[str, RunningAllocation] = {}
        # How many allocations that hold slots and are not leaving have each key; the
        # largest key, cached until an allocation with it leaves.
        self._keys: Counter[PreemptKey] = Counter()
        self._max_key: PreemptKey | None = None

    @classmethod
    def of(cls, running: Iterable[RunningAllocation]) -> RunningSet:
        out = cls()
        for alloc in running:
            out.add(alloc)
        return out

    def __iter__(self) -> Iterator[RunningAllocation]:
        return iter(self._views.values())

    def __len__(self) -> int:
        return len(self._views)

    def __contains__(self, alloc_id: object) -> bool:
        return alloc_id in self._views

    def add(self, alloc: RunningAllocation) -> None:
        """Add ``alloc``, replacing the view of the same id if there is one (in its place:
        the fair-share pass breaks ties by the order allocations come in)."""
        old = self._views.get(alloc.id)
        if old is not None:
            self._count(old, -1)
        self._views[alloc.id] = alloc
        self._count(alloc, 1)

    def remove(self, alloc_id: str) -> None:
        alloc = self._views.pop(alloc_id, None)
        if alloc is not None:
            self._count(alloc, -1)

    def most_preemptable(self) -> PreemptKey | None:
        """The largest (priority, order) among allocations that hold slots and are not
        leaving; None if there is none. Only a request with a smaller key can preempt."""
        if self._max_key is None and self._keys:
            self._max_key = max(self._keys)
        return self._max_key

    def _count(self, alloc: RunningAllocation, sign: int) -> None:
        slots = 0
        for agent_id, slot_ids in alloc.containers:
            n = len(slot_ids)
            slots += n
            self.held_on_agent[agent_id] += sign * n
        job = alloc.job
        self.held_by_job[job] += sign * slots
        if sign < 0:
            # Drop emptied entries so the sums stay as small as what runs.
            if not self.held_by_job[job]:
                del self.held_by_job[job]
            for agent_id, _ in alloc.containers:
                if not self.held_on_agent.get(agent_id, 1):
                    del self.held_on_agent[agent_id]
        if alloc.preempting:
            if sign > 0:
                self.preempting[alloc.id] = alloc
            else:
                del self.preempting[alloc.id]
            return
        if not slots:
            return
        key = (alloc.priority, alloc.order)
        if sign > 0:
            self._keys[key] += 1
            if self._max_key is not None and key > self._max_key:
                self._max_key = key
        else:
            self._keys[key] -= 1
            if not self._keys[key]:
                del self._keys[key]
                if key == self._max_key:
                    self._max_key = None
