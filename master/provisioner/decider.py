"""The scale decider: which instances of an elastic pool to launch and which to terminate.

A pure function of one pool's snapshot (its instances as the provider lists them, the
agents connected from them, and how many more instances the queued work needs) and of the
``Memory`` it returned last time: no clock reads, no I/O, no randomness. The loop that
calls it applies the ``Decision`` (launch, terminate), keeps ``decision.memory`` for the
next call, and sleeps until ``next_deadline`` or new input, whichever comes first.

The rules, in the order they are applied (``Reason`` names each termination):

1. ``STOPPED`` instances (stopped, not terminated) are terminated; ``STOPPING`` and
   ``TERMINATED`` ones are neither capacity nor something to terminate again.
2. A live instance whose agent has never connected by ``launched_at +
   max_agent_starting_period`` is terminated (``AGENT_NEVER_CONNECTED``); an unfulfilled
   spot request counts as such an instance.
3. A live instance whose agent connected once and has now been gone for
   ``max_disconnect_period`` is terminated (``AGENT_DISCONNECTED``).
4. An instance whose agent has been idle for ``max_idle_agent_period`` is terminated
   (``IDLE``), longest idle first, while more than ``min_instances`` remain.
5. While more than ``max_instances`` remain, instances are terminated
   (``OVER_MAXIMUM``): those still starting first (newest first), then idle ones (longest
   idle first), then those whose agent is gone, then the most recently launched.
6. ``launch = clamp(wanted - coming, min_instances - live, max_instances - live)``, at
   least 0: the instances queued work needs beyond those still coming up (``coming``:
   live instances without an agent, within their starting period), raised to keep
   ``min_instances`` and capped at ``max_instances``. ``live`` counts the instances left
   after this decision's terminations, so a broken instance is replaced in the same pass.

Where this differs from Determined's ``scaledecider`` (on purpose):

- Determined has no rule 2 of its own: an instance without an agent after its starting
  period gets a disconnect timer, so one whose agent never connects lives for the starting
  period plus the disconnect period. Here an agent that never came is a failed launch,
  terminated when its starting period runs out, and the disconnect period is the grace of
  an agent that did connect and was lost (its clock starts when the decider first sees it
  gone, even inside the starting period). ``Memory.connected`` tells the two apart.
- Launches are counted after this decision's terminations, not before (Determined
  replaces a terminated instance one pass later).
- An instance this decider chose to terminate is not counted as live afterwards, and is
  listed again (same reason) for as long as the provider still lists it as starting or
  running: a provider that is slow to show the termination neither makes the decider
  terminate a second instance in its place nor swallows a failed termination.
- Every choice among equals is ordered (by time, then id), never by map order.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from determined.common import errors


class InstanceState(enum.Enum):
    """An instance's state as its provider reports it, reduced to what the decider needs."""

    STARTING = "starting"  # pending or launching, an unfulfilled spot request included
    RUNNING = "running"
    STOPPING = "stopping"  # shutting down or terminating: neither capacity nor to terminate
    STOPPED = "stopped"  # stopped but not terminated: terminate it
    TERMINATED = "terminated"  # gone: ignored


class Reason(enum.Enum):
    """Why an instance is terminated; the value is what a log line says."""

    STOPPED = "stopped"
    AGENT_NEVER_CONNECTED = "agent never connected"
    AGENT_DISCONNECTED = "agent disconnected"
    IDLE = "idle"
    OVER_MAXIMUM = "over maximum"


@dataclass(frozen=True)
class Settings:
    """One pool's scaling settings (the ``provider`` section of an elastic pool's config).

    Periods are in seconds. Validated on construction so that a pool whose maximum is below
    its minimum fails at startup with the numbers in the message.
    """

    min_instances: int
    max_instances: int
    max_idle_agent_period: float = 1200.0
    max_agent_starting_period: float = 1200.0
    max_disconnect_period: float = 300.0

    def __post_init__(self) -> None:
        if self.min_instances < 0:
            raise errors.InvalidArgument(f"min_instances {self.min_instances}: must be >= 0")
        if self.max_instances < self.min_instances:
            raise errors.InvalidArgument(
                f"max_instances {self.max_instances} is below min_instances"
                f" {self.min_instances}: raise max_instances or lower min_instances"
            )
        for name in ("max_idle_agent_period", "max_agent_starting_period", "max_disconnect_period"):
            if getattr(self, name) < 0:
                raise errors.InvalidArgument(f"{name} {getattr(self, name)}: must be >= 0")


@dataclass(frozen=True, slots=True)
class Instance:
    """One instance of the pool as the provider lists it; ``agent_id`` is the id its agent
    registers with, which is how the two are matched."""

    id: str
    state: InstanceState
    launched_at: float  # epoch seconds
    agent_id: str


@dataclass(frozen=True, slots=True)
class Agent:
    """A connected agent of the pool; ``idle`` when no allocation holds any of its slots.

    Agents that match no instance (static agents in the same pool) are ignored here; their
    free slots count in ``Snapshot.wanted`` already.
    """

    id: str
    idle: bool


@dataclass(frozen=True)
class Snapshot:
    """One pool at one moment: the decider's whole input besides its ``Memory``."""

    now: float
    instances: tuple[Instance, ...]
    agents: tuple[Agent, ...]
    # Instances the queued work needs beyond what the connected agents can take
    # (``demand.instances_wanted``).
    wanted: int


@dataclass(frozen=True)
class Memory:
    """What the decider carries from one decision to the next, about the instances the
    provider lists as starting or running (those being terminated included).

    Times are when the decider first saw the condition; a condition that ends (the agent
    busy again, back again) drops the entry, so the next one starts a new period. Never
    mutated: each decision returns a new one.
    """

    # Instances whose agent has connected at least once: told apart from a failed launch.
    # Kept as the same object from one decision to the next while no instance joins or
    # leaves it, so a steady pool costs no rebuild.
    connected: frozenset[str] = frozenset()
    idle_since: Mapping[str, float] = field(default_factory=dict)
    # Since when a once-connected instance's agent has been gone.
    gone_since: Mapping[str, float] = field(default_factory=dict)
    # Instances this decider chose to terminate that the provider still lists as live.
    terminating: Mapping[str, Reason] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Termination:
    instance_id: str
    reason: Reason


@dataclass(frozen=True)
class Decision:
    """What to do to one pool now; ``memory`` goes into the next call of ``decide``."""

    launch: int
    terminate: tuple[Termination, ...]
    memory: Memory

    @property
    def summary(self) -> str:
        """The decider's part of a log line, e.g. ``launch 2; terminate 3 (2 idle, 1 agent
        never connected)``; the caller adds what the demand was and which pool."""
        parts = [f"launch {self.launch}"] if self.launch else []
        if self.terminate:
            counts = Counter(t.reason for t in self.terminate)
            by_reason = ", ".join(f"{counts[r]} {r.value}" for r in Reason if r in counts)
            parts.append(f"terminate {len(self.terminate)} ({by_reason})")
        return "; ".join(parts) or "no change"


EMPTY = Memory()


_LIVE = (InstanceState.RUNNING, InstanceState.STARTING)


@dataclass(frozen=True, slots=True)
class _View:
    """The snapshot sorted out against the memory: which live instance is in which case.

    Live instances are those listed as starting or running that this decider has not
    chosen to terminate already.
    """

    live: int
    stopped: list[str]
    retried: list[Termination]  # earlier terminations the provider has not carried out yet
    agentless: list[Instance]  # live, no connected agent
    connected: frozenset[str]
    idle_since: dict[str, float]
    gone_since: dict[str, float]
    long_idle: list[tuple[float, str]]  # (idle since, id) of those idle for their period


def _observe(settings: Settings, snapshot: Snapshot, memory: Memory) -> _View:
    # One pass over the instances in the snapshot's order. This is the decider's hot loop
    # (bench/elastic.py): a busy instance, most of a large pool, costs a few lookups and
    # nothing else; everything rarer is collected here and ordered by the callers.
    now = snapshot.now
    idle_period = settings.max_idle_agent_period
    agent_idle = {a.id: a.idle for a in snapshot.agents}
    was_connected, was_idle, was_gone = memory.connected, memory.idle_since, memory.gone_since
    terminating = memory.terminating
    running, starting = InstanceState.RUNNING, InstanceState.STARTING
    not_live = 0
    unknown = 0  # live instances not in ``was_connected``
    stopped: list[str] = []
    retried: list[Termination] = []
    agentless: list[Instance] = []
    newly: list[str] = []
    idle_since: dict[str, float] = {}
    gone_since: dict[str, float] = {}
    long_idle: list[tuple[float, str]] = []
    for inst in snapshot.instances:
        state = inst.state
        if state is not running and state is not starting:
            not_live += 1
            if state is InstanceState.STOPPED:
                stopped.append(inst.id)
            continue
        iid = inst.id
        idle = agent_idle.get(inst.agent_id)
        ever = iid in was_connected
        if not ever:
            unknown += 1
            if idle is not None:
                newly.append(iid)
        elif idle is False and iid not in terminating:
            continue  # busy, and known to have connected: nothing to note
        if iid in terminating:
            retried.append(Termination(iid, terminating[iid]))
            continue
        if idle is None:
            agentless.append(inst)
            if ever:
                gone_since[iid] = was_gone.get(iid, now)
        elif idle:
            since = idle_since[iid] = was_idle.get(iid, now)
            if since + idle_period <= now:
                long_idle.append((since, iid))
    listed = len(snapshot.instances) - not_live
    if listed - unknown == len(was_connected):
        connected = was_connected.union(newly) if newly else was_connected
    else:  # some that had connected are no longer listed: forget them
        connected = _connected(snapshot, agent_idle, was_connected)
    live = listed - len(retried)
    return _View(live, stopped, retried, agentless, connected, idle_since, gone_since, long_idle)


def _connected(
    snapshot: Snapshot, agent_idle: Mapping[str, bool], was_connected: frozenset[str]
) -> frozenset[str]:
    return frozenset(
        i.id
        for i in snapshot.instances
        if i.state in _LIVE and (i.id in was_connected or i.agent_id in agent_idle)
    )


def _broken(settings: Settings, view: _View, now: float) -> list[Termination]:
    """Rules 2 and 3: instances whose agent never came, or left for good; by id."""
    out = []
    for inst in view.agentless:
        since = view.gone_since.get(inst.id)
        if since is None:
            if now >= inst.launched_at + settings.max_agent_starting_period:
                out.append(Termination(inst.id, Reason.AGENT_NEVER_CONNECTED))
        elif now >= since + settings.max_disconnect_period:
            out.append(Termination(inst.id, Reason.AGENT_DISCONNECTED))
    out.sort(key=lambda t: t.instance_id)
    return out


def _over_maximum_order(snapshot: Snapshot, view: _View, ending: set[str]) -> list[str]:
    """The live instances not yet ending, in the order rule 5 gives them up."""
    skip = ending | {t.instance_id for t in view.retried}
    newest_first = sorted(
        (i for i in snapshot.instances if i.state in _LIVE and i.id not in skip),
        key=lambda i: (-i.launched_at, i.id),
    )
    never = {i.id for i in view.agentless} - view.gone_since.keys()
    starting = [i.id for i in newest_first if i.id in never]
    idle = sorted((s, i) for i, s in view.idle_since.items() if i not in skip)
    gone = sorted((s, i) for i, s in view.gone_since.items() if i not in skip)
    chosen = starting + [i for _, i in idle] + [i for _, i in gone]
    first = set(chosen)
    return chosen + [i.id for i in newest_first if i.id not in first]


def _coming(settings: Settings, view: _View, now: float, ending: set[str]) -> int:
    """Live instances without an agent, still within their starting period: capacity on
    its way, not to be launched again."""
    period = settings.max_agent_starting_period
    return sum(
        1 for inst in view.agentless if now < inst.launched_at + period and inst.id not in ending
    )


def decide(settings: Settings, snapshot: Snapshot, memory: Memory = EMPTY) -> Decision:
    """One decision for one pool: how many instances to launch, which to terminate and why.

    Terminations come grouped by rule (see the module's docstring), each group in a fixed
    order, so that the same snapshot and memory always give the same decision.
    """
    now = snapshot.now
    view = _observe(settings, snapshot, memory)
    terminate = sorted(view.retried, key=lambda t: t.instance_id)
    terminate += [Termination(iid, Reason.STOPPED) for iid in sorted(view.stopped)]
    broken = _broken(settings, view, now)
    terminate += broken
    ending = {t.instance_id for t in broken}
    remaining = view.live - len(ending)

    for _, iid in sorted(view.long_idle):
        if remaining <= settings.min_instances:
            break
        terminate.append(Termination(iid, Reason.IDLE))
        ending.add(iid)
        remaining -= 1

    if remaining > settings.max_instances:
        over = _over_maximum_order(snapshot, view, ending)[: remaining - settings.max_instances]
        terminate += [Termination(iid, Reason.OVER_MAXIMUM) for iid in over]
        ending.update(over)
        remaining = settings.max_instances

    needed = snapshot.wanted - _coming(settings, view, now, ending)
    floor = settings.min_instances - remaining
    launch = max(0, min(max(floor, needed), settings.max_instances - remaining))
    # The memory keeps what it knows of the instances terminated now: they stay listed as
    # live until the provider shows them going, and ``terminating`` skips them till then.
    terminating = {t.instance_id: t.reason for t in terminate if t.reason is not Reason.STOPPED}
    memory = Memory(view.connected, view.idle_since, view.gone_since, terminating)
    return Decision(launch, tuple(terminate), memory)


def next_deadline(settings: Settings, snapshot: Snapshot, memory: Memory) -> float | None:
    """The earliest time after ``snapshot.now`` at which ``decide`` could answer differently
    without any new input: an idle, starting or disconnect period running out. None if
    nothing is counting down.

    Pass the memory the last ``decide`` returned; the caller's loop sleeps until then (or
    until new input), which terminates an idle instance on time without polling.
    """
    now = snapshot.now
    view = _observe(settings, snapshot, memory)
    times = [since + settings.max_idle_agent_period for since in view.idle_since.values()]
    times += [since + settings.max_disconnect_period for since in view.gone_since.values()]
    times += [i.launched_at + settings.max_agent_starting_period for i in view.agentless]
    future = [t for t in times if t > now]
    return min(future) if future else None
