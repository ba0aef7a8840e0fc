"""A small cloud, a queue and a scheduler that drive the scale decider through time.

Deterministic and event-driven, as the master's loop is meant to be: at each step the
simulation carries out everything due by then (work arriving and ending, instances booting,
agents connecting or vanishing, terminations completing), places queued work on idle
capacity, asks ``decide`` and applies its decision at once (a launch is a new ``STARTING``
instance, a termination makes it ``STOPPING`` and requeues its work). It then jumps to the
next thing that happens: its own next event or the decider's ``next_deadline``, whichever
comes first, so a period that runs out is acted on at exactly that time and nothing polls.

Instances boot after ``boot_delay``, their agents connect ``connect_delay`` later. Faults
are per launch (the n-th instance launched, from 0): its agent never connects, or vanishes
some time after connecting; or the provider never boots anything.

Every decision is recorded with the live count before and after it, so that tests check
the pool's size over time against the settings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydet.master.provisioner import decider, demand
from pydet.master.provisioner.decider import InstanceState, Reason

LIVE = (InstanceState.STARTING, InstanceState.RUNNING)


@dataclass(frozen=True)
class Work:
    """A request for ``slots`` that runs for ``duration`` seconds once placed."""

    slots: int
    duration: float


@dataclass(frozen=True)
class Faults:
    never_boot: bool = False  # instances stay STARTING: an unfulfillable spot request
    never_connect: frozenset[int] = frozenset()  # launches whose agent never connects
    vanish_after: Mapping[int, float] = field(default_factory=dict)  # launch -> s connected


@dataclass
class SimInstance:
    id: str
    ordinal: int
    launched_at: float
    state: InstanceState = InstanceState.STARTING
    boots_at: float = math.inf
    connects_at: float = math.inf
    vanishes_at: float = math.inf
    stops_at: float = math.inf
    connected: bool = False

    @property
    def agent_id(self) -> str:
        return f"agent-{self.id}"


@dataclass
class Placement:
    work: Work
    instances: list[SimInstance]
    ends_at: float


@dataclass(frozen=True)
class Step:
    """One decision and the pool around it."""

    time: float
    live_before: int
    live_after: int
    wanted: int
    decision: decider.Decision


class ScaleSim:
    def __init__(
        self,
        settings: decider.Settings,
        demand_in: Sequence[tuple[float, Sequence[Work]]] = (),
        *,
        slots_per_instance: int = 4,
        boot_delay: float = 30.0,
        connect_delay: float = 10.0,
        stop_delay: float = 20.0,
        faults: Faults | None = None,
    ) -> None:
        self.settings = settings
        self.arrivals = sorted(demand_in, key=lambda a: a[0])
        self.slots_per_instance = slots_per_instance
        self.boot_delay = boot_delay
        self.connect_delay = connect_delay
        self.stop_delay = stop_delay
        self.faults = faults or Faults()
        self.instances: list[SimInstance] = []
        self.queue: list[Work] = []
        self.placements: list[Placement] = []
        self.memory = decider.EMPTY
        self.steps: list[Step] = []
        self.launches: list[tuple[float, str]] = []
        self.terminations: list[tuple[float, str, Reason]] = []
        self.finished: list[tuple[float, Work]] = []
        self.now = 0.0

    # -- what tests read ------------------------------------------------------------------------

    def live(self) -> list[SimInstance]:
        return [i for i in self.instances if i.state in LIVE]

    def terminated(self, reason: Reason) -> list[tuple[float, str]]:
        return [(t, i) for t, i, r in self.terminations if r is reason]

    def by_id(self, instance_id: str) -> SimInstance:
        return next(i for i in self.instances if i.id == instance_id)

    # -- running ----------------------------------------------------------------------------------

    def run(self, until: float) -> ScaleSim:
        while self.now <= until:
            self._carry_out(self.now)
            self._schedule()
            self._decide()
            wake = min(self._next_event(), self._next_deadline())
            if math.isinf(wake):
                break
            self.now = wake
        return self

    def _carry_out(self, now: float) -> None:
        for inst in self.instances:
            if inst.state is InstanceState.STARTING and inst.boots_at <= now:
                inst.state = InstanceState.RUNNING
            if inst.state is InstanceState.RUNNING and not inst.connected:
                if inst.connects_at <= now < inst.vanishes_at:
                    inst.connected = True
            if inst.connected and inst.vanishes_at <= now:
                self._disconnect(inst)
            if inst.state is InstanceState.STOPPING and inst.stops_at <= now:
                inst.state = InstanceState.TERMINATED
        for p in [p for p in self.placements if p.ends_at <= now]:
            self.placements.remove(p)
            self.finished.append((p.ends_at, p.work))
        while self.arrivals and self.arrivals[0][0] <= now:
            self.queue.extend(self.arrivals.pop(0)[1])

    def _disconnect(self, inst: SimInstance) -> None:
        """The agent is gone: what ran on it goes back to the front of the queue."""
        inst.connected = False
        lost = [p for p in self.placements if inst in p.instances]
        for p in lost:
            self.placements.remove(p)
        self.queue[:0] = [p.work for p in lost]

    def _busy(self) -> set[str]:
        return {i.id for p in self.placements for i in p.instances}

    def _free(self) -> dict[str, int]:
        """Free slots of each connected agent, in launch order."""
        used: dict[str, int] = {}
        for p in self.placements:
            for i in p.instances:
                used[i.id] = used.get(i.id, 0) + min(p.work.slots, self.slots_per_instance)
        return {
            i.id: self.slots_per_instance - used.get(i.id, 0) for i in self.instances if i.connected
        }

    def _schedule(self) -> None:
        """Places queued work first come, first served, skipping what does not fit yet."""
        waiting: list[Work] = []
        for work in self.queue:
            free = self._free()
            busy = self._busy()
            if work.slots > self.slots_per_instance:
                need = -(-work.slots // self.slots_per_instance)
                whole = [i for i in self.instances if i.connected and i.id not in busy]
                chosen = whole[:need] if len(whole) >= need else []
            else:
                fits = [i for i in self.instances if i.connected and free[i.id] >= work.slots]
                if work.slots == 0:
                    fits = [i for i in self.instances if i.connected]
                chosen = fits[:1]
            if chosen:
                self.placements.append(Placement(work, chosen, self.now + work.duration))
            else:
                waiting.append(work)
        self.queue = waiting

    def _snapshot(self) -> decider.Snapshot:
        busy = self._busy()
        free = self._free()
        listed = [i for i in self.instances if i.state is not InstanceState.TERMINATED]
        return decider.Snapshot.of(
            self.now,
            [decider.Instance(i.id, i.state, i.launched_at, i.agent_id) for i in listed],
            {i.agent_id: i.id not in busy for i in listed if i.connected},
            demand.instances_wanted(
                [w.slots for w in self.queue], list(free.values()), self.slots_per_instance
            ),
        )

    def _decide(self) -> None:
        snapshot = self._snapshot()
        live_before = len(self.live())
        decision = decider.decide(self.settings, snapshot, self.memory)
        self.memory = decision.memory
        for t in decision.terminate:
            self._terminate(t)
        for _ in range(decision.launch):
            self._launch()
        self.steps.append(Step(self.now, live_before, len(self.live()), snapshot.wanted, decision))

    def _terminate(self, t: decider.Termination) -> None:
        inst = self.by_id(t.instance_id)
        if inst.state in (InstanceState.STOPPING, InstanceState.TERMINATED):
            return
        self.terminations.append((self.now, inst.id, t.reason))
        if inst.connected:
            self._disconnect(inst)
        inst.state = InstanceState.STOPPING
        inst.stops_at = self.now + self.stop_delay

    def _launch(self) -> None:
        n = len(self.instances)
        inst = SimInstance(f"i{n:03d}", n, launched_at=self.now)
        if not self.faults.never_boot:
            inst.boots_at = self.now + self.boot_delay
            if n not in self.faults.never_connect:
                inst.connects_at = inst.boots_at + self.connect_delay
                if n in self.faults.vanish_after:
                    inst.vanishes_at = inst.connects_at + self.faults.vanish_after[n]
        self.instances.append(inst)
        self.launches.append((self.now, inst.id))

    def _next_event(self) -> float:
        now = self.now
        times = [a[0] for a in self.arrivals]
        times += [p.ends_at for p in self.placements]
        for i in self.instances:
            times += [i.boots_at, i.connects_at, i.vanishes_at, i.stops_at]
        return min((t for t in times if t > now), default=math.inf)

    def _next_deadline(self) -> float:
        deadline = decider.next_deadline(self.settings, self._snapshot(), self.memory)
        return math.inf if deadline is None else deadline
