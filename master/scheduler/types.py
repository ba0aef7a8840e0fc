"""What a scheduling pass reads and returns: frozen snapshots of one resource pool.

Every input is immutable so a pass cannot change the master's state behind its back, and
every output is plain data the master applies afterwards (start these, preempt those).
The types live apart from the algorithms so the master can build inputs without pulling
in either scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Literal, Protocol, cast

from determined.common import errors

DEFAULT_PRIORITY = 42

SchedulerKind = Literal["priority", "fair_share"]
FittingPolicy = Literal["best", "worst"]

# One entry per container: (agent id, the slot ids it holds there).
Containers = tuple[tuple[str, tuple[str, ...]], ...]


class PoolSettings(Protocol):
    """Anything shaped like ``master.config.PoolConfig`` (read-only attributes suffice)."""

    @property
    def scheduler(self) -> str: ...

    @property
    def fitting_policy(self) -> str: ...

    @property
    def preemption(self) -> bool: ...


@dataclass(frozen=True)
class PoolPolicy:
    """How one pool schedules: which scheduler, how it fits, and whether it may preempt.

    Validated on construction so a typo in the master config fails at startup with the
    pool's settings in the message, not as a silent fallback mid-pass.
    """

    scheduler: SchedulerKind = "priority"
    fitting_policy: FittingPolicy = "best"
    # Priority scheduler only; the fair-share scheduler always rebalances by preempting.
    preemption: bool = False

    def __post_init__(self) -> None:
        if self.scheduler not in ("priority", "fair_share"):
            raise errors.InvalidArgument(
                f"scheduler {self.scheduler!r}: expected 'priority' or 'fair_share'"
            )
        if self.fitting_policy not in ("best", "worst"):
            raise errors.InvalidArgument(
                f"fitting_policy {self.fitting_policy!r}: "
                "expected 'best' (pack) or 'worst' (spread)"
            )

    @classmethod
    def of(cls, pool: PoolSettings) -> PoolPolicy:
        """The policy of a configured pool (``PoolConfig`` or anything with its attributes)."""
        return cls(
            scheduler=cast(SchedulerKind, pool.scheduler),
            fitting_policy=cast(FittingPolicy, pool.fitting_policy),
            preemption=bool(pool.preemption),
        )


@dataclass(frozen=True)
class AgentView:
    """One agent as the scheduler sees it: which of its slots are free right now.

    Its total size is not needed: the slots held by ``running`` allocations on it plus its
    free slots make it up.
    """

    id: str
    _: KW_ONLY
    address: str = ""
    free_slots: Sequence[str] = ()
    # Containers already on the agent; zero-slot tasks are spread by this count.
    num_containers: int = 0
    enabled: bool = True
    # A draining agent finishes what it runs but, like a disabled one, gets nothing new.
    draining: bool = False

    @property
    def schedulable(self) -> bool:
        return self.enabled and not self.draining


@dataclass(frozen=True)
class Request:
    """A task waiting for resources (one trial, or one command), all-or-nothing."""

    id: str
    slots: int
    _: KW_ONLY
    # The job (experiment) it belongs to; "" makes the request a job of its own.
    job_id: str = ""
    priority: int = DEFAULT_PRIORITY
    weight: float = 1.0
    # Position in the queue (submission order, or a user's reorder); lower goes first.
    # Every request of one job carries the job's position.
    order: float = 0.0
    # The job's cap on slots held at once across its tasks; None for no cap.
    max_slots: int | None = None
    # All slots on one agent; otherwise it may span agents when no single one fits.
    single_node: bool = False
    # Agents it must not be placed on (a log policy's exclude_node matched there). Such a
    # request waits rather than preempt others: victims would free slots it may not use.
    excluded_agents: frozenset[str] = frozenset()

    @property
    def job(self) -> str:
        return self.job_id or self.id


@dataclass(frozen=True)
class RunningAllocation:
    """Resources already held by a task (including one told to checkpoint and leave)."""

    id: str
    _: KW_ONLY
    job_id: str = ""
    containers: Containers = ()
    priority: int = DEFAULT_PRIORITY
    weight: float = 1.0
    order: float = 0.0
    max_slots: int | None = None
    # When it started (any monotone clock); among equals the newest is preempted first.
    started: float = 0.0
    # Already sent the preemption signal: its slots count as leaving, it is never chosen
    # again, and the pass does not preempt others for work it will make room for.
    preempting: bool = False

    @property
    def job(self) -> str:
        return self.job_id or self.id

    @property
    def slots(self) -> int:
        return sum(len(slot_ids) for _, slot_ids in self.containers)


@dataclass(frozen=True)
class Placement:
    """Start ``request_id`` with exactly these containers (all of them, or not at all)."""

    request_id: str
    # One entry per container: (agent id, its slot ids).
    containers: Containers = ()


@dataclass(frozen=True)
class Decision:
    """The outcome of one pass. Placements use only slots that were free; preemptions are
    allocation ids to signal. The two never depend on each other within a pass: work that
    waits for preempted slots is placed by a later pass, once they are actually free."""

    placements: tuple[Placement, ...] = ()
    preemptions: tuple[str, ...] = ()
