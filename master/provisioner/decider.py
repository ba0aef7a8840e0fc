"""The scale decider: which instances of an elastic pool to launch and which to terminate.

A pure function of one pool's snapshot (its instances as the provider lists them, the
agents connected from them, and how many more instances the queued work needs) and of the
``Memory`` it returned last time: no clock reads, no I/O, no randomness. The loop that
calls it applies the ``Decision`` (launch, terminate), keeps ``decision.memory`` for the
next call, and sleeps until ``decision.next_deadline`` or new input, whichever comes first.

Cost: it runs every tick for every pool, and a large pool is mostly busy instances whose
agent is known to have connected, about which there is nothing to decide. So its input
comes grouped (``Snapshot``: the idle and the agentless instances, the busy ones being the
rest) and it never looks at a busy instance: its work is proportional to the idle and
agentless ones. It compares those with its memory by set operations in C that read no
instance id, keeps the memory's mappings from one call to the next while they stay the
same, and keeps their times in order, so that the periods that ran out are found at the
front. See bench/elastic.py.

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
  gone, even inside the starting period). ``Memory.never`` and ``Memory.live`` tell the
  two apart.
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
import math
import operator
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain, pairwise, repeat
from typing import NamedTuple

from determined.common import errors


class InstanceState(enum.Enum):
    """An instance's state as its provider reports it, reduced to what the decider needs."""

    STARTING = "starting"  # pending or launching, an unfulfilled spot request included
    RUNNING = "running"
    STOPPING = "stopping"  # shutting down or terminating: neither capacity nor to terminate
    STOPPED = "stopped"  # stopped but not terminated: terminate it
    TERMINATED = "terminated"  # gone: ignored


LIVE = frozenset({InstanceState.STARTING, InstanceState.RUNNING})


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


@dataclass(frozen=True)
class Snapshot:
    """One pool at one moment: the decider's whole input besides its ``Memory``.

    The live instances (listed as starting or running) come by id, with two groups of them
    picked out: ``idle`` (agent connected, nothing on it) and ``agentless`` (no agent
    connected: not yet, or no longer; with each one's ``launched_at``, the one fact the
    starting period needs). The rest are busy. That shape is for speed: a large pool is
    mostly busy instances, and the decider never looks at those one by one; the caller
    matches agents to instances (by ``Instance.agent_id``) because it finds agents by those
    ids anyway, and it may keep ``live`` from one call to the next while its provider's
    list stays the same. ``of`` builds one from a plain listing.

    Agents that match no instance (static agents in the same pool) are not in it; their
    free slots count in ``wanted`` already. Instances listed as stopping or terminated are
    not in it either: there is nothing to do about them. Not to be mutated once passed:
    the returned memory keeps ``live`` (see ``Memory.live``).
    """

    now: float
    live: Mapping[str, Instance]
    idle: frozenset[str]
    agentless: Mapping[str, float]  # id -> launched_at
    # Instances listed as stopped (not terminated): to be terminated.
    stopped: frozenset[str] = frozenset()
    # Instances the queued work needs beyond what the connected agents can take
    # (``demand.instances_wanted``).
    wanted: int = 0

    def __post_init__(self) -> None:
        # Counts, not a check of each id, so that it costs nothing per instance.
        if len(self.idle) + len(self.agentless) > len(self.live):
            raise ValueError(
                f"{len(self.idle)} idle and {len(self.agentless)} agentless instances among"
                f" {len(self.live)} live ones: each must be live, and in one group at most"
            )

    @classmethod
    def of(
        cls,
        now: float,
        instances: Iterable[Instance],
        agents: Mapping[str, bool],
        wanted: int = 0,
    ) -> Snapshot:
        """The snapshot of a provider's listing (any order, any states) and of the pool's
        connected agents (agent id -> idle), matched by agent id."""
        live: dict[str, Instance] = {}
        stopped: list[str] = []
        for inst in instances:
            if inst.state in LIVE:
                live[inst.id] = inst
            elif inst.state is InstanceState.STOPPED:
                stopped.append(inst.id)
        idle: list[str] = []
        agentless: dict[str, float] = {}
        for iid, inst in live.items():
            is_idle = agents.get(inst.agent_id)
            if is_idle is None:
                agentless[iid] = inst.launched_at
            elif is_idle:
                idle.append(iid)
        return cls(now, live, frozenset(idle), agentless, frozenset(stopped), wanted)


@dataclass(frozen=True)
class Memory:
    """What the decider carries from one decision to the next, about the instances the
    provider lists as starting or running (those being terminated included).

    Times are when the decider first saw the condition; a condition that ends (the agent
    busy again, back again) drops the entry, so the next one starts a new period. Never
    mutated: each decision returns a new one, which keeps the previous one's mappings while
    the same instances are in them, so that a steady pool costs no rebuild.

    Whether an agentless instance's agent ever connected (rule 2 or 3) is known without
    remembering every instance that did connect, which a large pool would pay for on each
    call: it did if it was live last time and neither agentless-and-never-connected then
    (``never``) nor being terminated (what is being terminated stays so while listed).

    ``idle_since`` and ``gone_since`` are in order of time, earliest first (one made by
    hand is put in order): the decider finds the periods that ran out at the front, and
    looks no further than the first that has not.
    """

    # The live instances of the last snapshot: its ``live`` itself, not a copy.
    live: Collection[str] = frozenset()
    # Of those, the agentless ones whose agent has never connected: failed launches if
    # their starting period runs out.
    never: frozenset[str] = frozenset()
    idle_since: Mapping[str, float] = field(default_factory=dict)
    # Since when a once-connected instance's agent has been gone.
    gone_since: Mapping[str, float] = field(default_factory=dict)
    # Instances this decider chose to terminate that the provider still lists as live.
    terminating: Mapping[str, Reason] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("idle_since", "gone_since"):
            times: Mapping[str, float] = getattr(self, name)
            if any(a > b for a, b in pairwise(times.values())):
                object.__setattr__(self, name, dict(sorted(times.items(), key=_SECOND)))


class Termination(NamedTuple):
    """A tuple, not a dataclass: a large pass makes thousands, and a tuple can be made in C
    (see ``_terminations``)."""

    instance_id: str
    reason: Reason


@dataclass(frozen=True)
class Decision:
    """What to do to one pool now; ``memory`` goes into the next call of ``decide``.

    ``next_deadline``: the earliest time after the snapshot's at which ``decide`` could
    answer differently without any new input (an idle, starting or disconnect period
    running out, of the instances not terminated now), or None; the caller's loop sleeps
    until then or until new input, which terminates an idle instance on time without
    polling. It comes with the decision because computing it needs what the decision
    looked at already.
    """

    launch: int
    terminate: tuple[Termination, ...]
    memory: Memory
    next_deadline: float | None = None

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

_FIRST = operator.itemgetter(0)
_SECOND = operator.itemgetter(1)


def _remembered(
    live: Collection[str],
    never: frozenset[str],
    idle_since: Mapping[str, float],
    gone_since: Mapping[str, float],
    terminating: Mapping[str, Reason],
) -> Memory:
    """A ``Memory`` of the decider's own making, whose mappings are in order already: made
    without the check of ``Memory.__post_init__``, which would look at every time."""
    memory = object.__new__(Memory)
    memory.__dict__.update(
        live=live,
        never=never,
        idle_since=idle_since,
        gone_since=gone_since,
        terminating=terminating,
    )
    return memory


def _terminations(pairs: Iterable[tuple[str, Reason]]) -> tuple[Termination, ...]:
    """A ``Termination`` of each ``(id, reason)``, made in C: a large pass makes thousands,
    and ``Termination.__new__`` is a Python function."""
    return tuple(map(tuple.__new__, repeat(Termination), pairs))


@dataclass(slots=True)
class _View:
    """The snapshot sorted out against the memory.

    The instances this decider has chosen to terminate already (``retried``) are not live
    any more, but they stay in these mappings, as in the snapshot's: taking them out would
    copy each mapping on every call while the provider is slow to act. ``decide`` leaves
    them out where it counts, chooses and sets the deadline instead.
    """

    retried: list[str]  # in no particular order
    idle_since: Mapping[str, float]
    gone_since: Mapping[str, float]
    never: frozenset[str]  # agentless, never connected


def _observe(snapshot: Snapshot, memory: Memory) -> _View:
    # Each operation here runs over the idle or the agentless instances or over what the
    # memory holds of them, never over the busy ones.
    now, agentless = snapshot.now, snapshot.agentless
    terminating = memory.terminating
    retried = [i for i in terminating if i in snapshot.live] if terminating else []
    was_gone, was_never = memory.gone_since, memory.never
    if (
        len(was_gone) + len(was_never) == len(agentless)
        and not was_never.difference(agentless)
        and not set(was_gone).difference(agentless)
    ):  # the same agentless instances as last time, each the same kind: no new set
        # (the same set operations as in ``_since``, which read no id string)
        gone_since: Mapping[str, float] = was_gone
        never = was_never
    else:
        gone = agentless.keys() & was_gone.keys()
        never_set = agentless.keys() & was_never
        # Agentless now, neither gone nor never connected last time: live then means its
        # agent was connected then (it was busy or idle); not live then, it is new.
        unsure = agentless.keys() - gone - never_set
        newly_gone = {i for i in unsure if i in memory.live}
        gone_since = _since(gone | newly_gone, was_gone, now)
        never = frozenset(never_set | (unsure - newly_gone))
    return _View(retried, _since(snapshot.idle, memory.idle_since, now), gone_since, never)


def _since(
    ids: frozenset[str] | set[str], was: Mapping[str, float], now: float
) -> Mapping[str, float]:
    """Since when each of ``ids`` has been in its condition: as remembered, else ``now``;
    in order of time, as ``was`` is. The remembered mapping itself while the same
    instances are in it.

    Only operations that take each id's hash from a set's or a dict's table (a set less a
    dict, a dict copied or built from a set), so that no id string is read: in a large
    pass, reading them is most of the cost."""
    new = ids.difference(was)
    if len(ids) - len(new) == len(was):  # all of ``was`` is still in
        if not new:
            return was
        out = dict(was)
    else:
        out = dict(was)
        for iid in set(was).difference(ids):
            del out[iid]
    if new:  # at ``now``, after all the others, unless the clock went back
        back = bool(out) and now < next(reversed(out.values()))
        out.update(dict.fromkeys(new, now))
        if back:
            out = dict(sorted(out.items(), key=_SECOND))
    return out


class _Run(NamedTuple):
    """One kind's periods (idle, disconnect or starting) against ``now``."""

    out: list[str]  # the ids whose period has run out, in no particular order
    left: int  # how many have not
    next: float | None  # when the next of those runs out; None if none will
    next_id: str | None  # whose that is


def _run_out(times: Mapping[str, float], period: float, now: float) -> _Run:
    """Of ``times`` (id -> when a period started): see ``_Run``.

    One pass in Python, which beats C here (a minimum to see whether any has run out,
    then a sort or a filter): each pass over a large pool's mappings costs cache misses,
    and a pass that does everything pays them once.
    """
    out: list[str] = []
    later, later_id = math.inf, None
    for iid, t in times.items():
        if t + period <= now:
            out.append(iid)
        elif t < later:
            later, later_id = t, iid
    left = len(times) - len(out)
    return _Run(out, left, None if later_id is None else later + period, later_id)


def _run_out_in_order(times: Mapping[str, float], period: float, now: float) -> _Run:
    """``_run_out`` of ``times`` in order of time: those that ran out are at the front, and
    the first that has not is the next to."""
    out: list[str] = []
    for iid, t in times.items():
        if t + period > now:
            return _Run(out, len(times) - len(out), t + period, iid)
        out.append(iid)
    return _Run(out, 0, None, None)


def _over_maximum_order(snapshot: Snapshot, view: _View, skip: set[str]) -> list[str]:
    """The live instances not yet ending, in the order rule 5 gives them up."""
    newest_first = [
        iid
        for _, iid in sorted(
            (-inst.launched_at, iid) for iid, inst in snapshot.live.items() if iid not in skip
        )
    ]
    starting = [i for i in newest_first if i in view.never]
    idle = sorted((s, i) for i, s in view.idle_since.items() if i not in skip)
    gone = sorted((s, i) for i, s in view.gone_since.items() if i not in skip)
    chosen = starting + [i for _, i in idle] + [i for _, i in gone]
    first = set(chosen)
    return chosen + [i for i in newest_first if i not in first]


def _deadline(settings: Settings, snapshot: Snapshot, view: _View, ended: set[str]) -> float | None:
    """The earliest period to run out after ``now`` of the instances not ``ended``: for
    when the earliest of some kind is one of theirs (see ``decide``)."""
    now = snapshot.now
    idle, gone = settings.max_idle_agent_period, settings.max_disconnect_period
    starting = settings.max_agent_starting_period
    times = [s + idle for i, s in view.idle_since.items() if i not in ended]
    times += [s + gone for i, s in view.gone_since.items() if i not in ended]
    times += [t + starting for i, t in snapshot.agentless.items() if i not in ended]
    return min((t for t in times if t > now), default=None)


class _Outcome(NamedTuple):
    view: _View
    ending: list[tuple[str, Reason]]  # terminated now, in the decision's order
    launch: int
    deadline: float | None


def decide(settings: Settings, snapshot: Snapshot, memory: Memory = EMPTY) -> Decision:
    """One decision for one pool: how many instances to launch, which to terminate and why,
    and when to decide again if nothing changes.

    Terminations come grouped by rule (see the module's docstring), each group in a fixed
    order, so that the same snapshot and memory always give the same decision.
    """
    view, ending, launch, deadline = _decide(settings, snapshot, memory)
    # The memory keeps what it knows of the instances terminated now: they stay listed as
    # live until the provider shows them going, and ``terminating`` skips them till then.
    again = [(i, memory.terminating[i]) for i in sorted(view.retried)]
    kept = dict(again)
    kept.update(ending)
    memory = _remembered(snapshot.live, view.never, view.idle_since, view.gone_since, kept)
    stopped = zip(sorted(snapshot.stopped), repeat(Reason.STOPPED))
    return Decision(launch, _terminations(chain(again, stopped, ending)), memory, deadline)


def next_deadline(settings: Settings, snapshot: Snapshot, memory: Memory) -> float | None:
    """``decide(...).next_deadline``, for a caller that kept the memory but not the decision
    (the same computation, less making the decision).

    Pass the memory the last ``decide`` returned for this snapshot: deciding again on it is
    a fixed point (what was terminated is retried, nothing new is), so this is that
    decision's deadline. A loop that keeps the decision needs no second call.
    """
    return _decide(settings, snapshot, memory).deadline


def _decide(settings: Settings, snapshot: Snapshot, memory: Memory) -> _Outcome:
    now = snapshot.now
    view = _observe(snapshot, memory)
    retried = view.retried
    ended = set(retried)  # and those terminated now, below

    # Each kind's periods; the instances terminated before are left out of what ran out.
    agentless, gone_since, idle_since = snapshot.agentless, view.gone_since, view.idle_since
    starting = _run_out(agentless, settings.max_agent_starting_period, now)
    gone = _run_out_in_order(gone_since, settings.max_disconnect_period, now)
    idle = _run_out_in_order(idle_since, settings.max_idle_agent_period, now)
    failed = view.never.intersection(starting.out)
    lost, long_idle = gone.out, idle.out
    if ended:
        failed -= ended
        lost, long_idle = ([i for i in ids if i not in ended] for ids in (lost, long_idle))

    # Rules 2 and 3, by id. Terminations are (id, reason) pairs until the end.
    ending = [*zip(lost, repeat(Reason.AGENT_DISCONNECTED))]
    ending += zip(failed, repeat(Reason.AGENT_NEVER_CONNECTED))
    ending.sort(key=_FIRST)
    ended.update(lost, failed)
    remaining = len(snapshot.live) - len(ended)

    # Rule 4: longest idle first (ties by id), while more than min_instances remain.
    idle_ending = sorted(long_idle, key=lambda i: (idle_since[i], i))[
        : max(0, remaining - settings.min_instances)
    ]
    ending += zip(idle_ending, repeat(Reason.IDLE))
    ended.update(idle_ending)
    remaining -= len(idle_ending)

    over: list[str] = []
    if remaining > settings.max_instances:  # rule 5
        over = _over_maximum_order(snapshot, view, ended)[: remaining - settings.max_instances]
        ending += zip(over, repeat(Reason.OVER_MAXIMUM))
        ended.update(over)
        remaining = settings.max_instances

    # Rule 6. Capacity on its way: agentless instances within their starting period, less
    # those terminated. Of those terminated now, an idle one is not agentless, and one that
    # never connected is past its period: only the others can be among them.
    period = settings.max_agent_starting_period
    unsure = (*retried, *lost, *over)
    still = sum(1 for i in unsure if i in agentless and agentless[i] + period > now)
    needed = snapshot.wanted - (starting.left - still)
    floor = settings.min_instances - remaining
    launch = max(0, min(max(floor, needed), settings.max_instances - remaining))

    # The terminated have no deadline: each kind's next will do unless it is one of theirs.
    if ended and (starting.next_id in ended or gone.next_id in ended or idle.next_id in ended):
        deadline = _deadline(settings, snapshot, view, ended)
    else:
        nexts = (starting.next, gone.next, idle.next)
        deadline = min((t for t in nexts if t is not None), default=None)
    return _Outcome(view, ending, launch, deadline)
