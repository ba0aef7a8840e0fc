"""Scheduling as a pure function: (pool policy, agents, running, pending) -> decision.

Kept free of I/O so it can be unit-tested directly and benchmarked over large clusters.
``decide`` runs one pass for one resource pool and returns what to start and what to
preempt; the master applies it (see ``Decision``) and runs another pass whenever
something changes. The algorithms live in ``priority`` and
``fairshare`` in this package; the shared types in ``types``, placement in ``fit``.

How the master applies a Decision:

1. Start every placement, in order, on exactly the agents and slots it names; they were
   free when the pass ran and no two placements share a slot.
2. Send the preemption signal to every allocation in ``preemptions`` and from then on
   pass it in ``running`` with ``preempting=True`` (so it is neither chosen again nor
   preempted for twice); kill it if it has not exited after the preemption timeout.
3. When a preempted allocation exits, re-queue its task and run another pass: the work it
   made room for is placed then, ahead of it.

May use: nothing of the master; a contract keeps it pure (no store, no I/O subsystem).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydet.master.scheduler.fairshare import decide_fair_share, fair_shares
from pydet.master.scheduler.priority import decide_priority
from pydet.master.scheduler.running import RunningSet
from pydet.master.scheduler.types import (
    DEFAULT_PRIORITY,
    AgentView,
    Containers,
    Decision,
    Placement,
    PoolPolicy,
    Request,
    RunningAllocation,
)

__all__ = [
    "DEFAULT_PRIORITY",
    "AgentView",
    "Containers",
    "Decision",
    "Placement",
    "PoolPolicy",
    "Request",
    "RunningAllocation",
    "RunningSet",
    "decide",
    "fair_shares",
]


def decide(
    pool: PoolPolicy,
    agents: Sequence[AgentView],
    running: Sequence[RunningAllocation] | RunningSet,
    pending: Sequence[Request],
) -> Decision:
    """One scheduling pass over one pool.

    ``agents`` are the pool's connected agents (disabled and draining ones included: they
    receive nothing, and what runs on them is never preempted); ``running`` every
    allocation holding resources in the pool, so that job caps, pool size and preemption
    see the whole picture (a ``RunningSet`` kept up to date spares the pass from summing
    it again); ``pending`` the requests waiting in the pool.
    """
    if pool.scheduler == "fair_share":
        return decide_fair_share(pool, agents, running, pending)
    return decide_priority(pool, agents, running, pending)
