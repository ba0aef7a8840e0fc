"""Scheduling as a pure function: (agents, pending requests) -> placements.

Kept free of I/O so it can be unit-tested directly and benchmarked over large clusters.
The priority scheduler takes requests by (priority, queue position), and places each one
all-or-nothing: a request either gets every slot it asked for or none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class AgentView:
    id: str
    address: str
    free_slots: list[str]
    # Containers already on the agent; zero-slot tasks are spread by this count.
    num_containers: int = 0
    enabled: bool = True


@dataclass(frozen=True)
class Request:
    id: str
    slots: int
    priority: int = 42
    # Position in the queue (submission order, or a user's reorder); lower goes first.
    order: float = 0.0
    # Never more than one container per agent when false (multi-node is allowed).
    single_node: bool = False


@dataclass(frozen=True)
class Placement:
    request_id: str
    # One entry per container: (agent id, its slot ids).
    containers: tuple[tuple[str, tuple[str, ...]], ...] = field(default_factory=tuple)


def queue_order(requests: Sequence[Request]) -> list[Request]:
    return sorted(requests, key=lambda r: (r.priority, r.order))


def schedule(agents: Sequence[AgentView], requests: Sequence[Request]) -> list[Placement]:
    """Place as many requests as fit, in queue order; later requests may fill gaps."""
    free = {a.id: list(a.free_slots) for a in agents if a.enabled}
    counts = {a.id: a.num_containers for a in agents if a.enabled}
    placements: list[Placement] = []
    for request in queue_order(requests):
        placement = _fit(request, free, counts)
        if placement is None:
            continue
        for agent_id, slots in placement.containers:
            taken = set(slots)
            free[agent_id] = [s for s in free[agent_id] if s not in taken]
            counts[agent_id] += 1
        placements.append(placement)
    return placements


def _fit(request: Request, free: dict[str, list[str]], counts: dict[str, int]) -> Placement | None:
    if not free:
        return None
    if request.slots == 0:
        agent_id = min(free, key=lambda a: (counts[a], a))
        return Placement(request.id, ((agent_id, ()),))
    # Best fit on one agent: the fullest agent that still has room (packing).
    fitting = [a for a, slots in free.items() if len(slots) >= request.slots]
    if fitting:
        agent_id = min(fitting, key=lambda a: (len(free[a]), a))
        return Placement(request.id, ((agent_id, tuple(free[agent_id][: request.slots])),))
    if request.single_node:
        return None
    # Span agents, emptiest first, so the trial uses as few containers as possible.
    chosen: list[tuple[str, tuple[str, ...]]] = []
    needed = request.slots
    for agent_id in sorted(free, key=lambda a: (-len(free[a]), a)):
        if needed == 0:
            break
        take = min(needed, len(free[agent_id]))
        if take:
            chosen.append((agent_id, tuple(free[agent_id][:take])))
            needed -= take
    if needed:
        return None
    return Placement(request.id, tuple(chosen))
