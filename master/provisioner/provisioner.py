"""One elastic pool's provisioner: it looks at the pool's queue, its agents and its
instances a few times a second, asks the scale decider what to launch and what to
terminate, and has the provider do it, logging each decision with its reason.

State: the provider's list of instances is the truth (asked for every ``LIST_INTERVAL``
seconds, and updated in between by what this loop launched and terminated), so a master
restarted at any point finds its instances again and neither forgets nor doubles them.
What only the decider remembers (since when an agent has been idle) starts afresh after a
restart, as Determined's does: an idle instance then waits one more idle period.

A failing provider is backed off: after a failed launch the next is tried after 1 s,
then 2, 4, ... up to a minute; after ``launch_error_retries`` failures in a row the error
is the pool's (``det agent list`` shows it) and, with ``launch_error_timeout``, launching
waits that long. One line is logged per distinct error, never one per tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from determined.api.gen import v1
from determined.common import timestamps
from pydet.master.agents.table import Agent, AgentTable
from pydet.master.provisioner import decider, demand
from pydet.master.provisioner.decider import Instance, InstanceState
from pydet.master.provisioner.provider import (
    AgentSetup,
    Provider,
    ProviderError,
    new_agent_id,
    startup_script,
)
from pydet.master.provisioner.settings import ProviderSettings
from pydet.master.tasks.task_list import TaskList

log = logging.getLogger(__name__)

TICK = 0.25  # seconds between looks at the queue and the agents
LIST_INTERVAL = 5.0  # seconds between asking the provider for its instances
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
# An instance whose agent connected once and has been gone this long is terminated.
MAX_DISCONNECT_PERIOD = 300.0

_REASONS = {
    decider.Reason.STOPPED: "stopped",
    decider.Reason.AGENT_NEVER_CONNECTED: "its agent did not connect within "
    "max_agent_starting_period",
    decider.Reason.AGENT_DISCONNECTED: "its agent has been gone for {disconnect:g} s",
    decider.Reason.IDLE: "idle for max_idle_agent_period",
    decider.Reason.OVER_MAXIMUM: "more instances than max_instances",
}


@dataclass
class Backoff:
    """Failed launches in a row, and when the next may be tried."""

    failures: int = 0
    not_before: float = 0.0
    error: str = ""
    error_at: float = 0.0

    def failed(self, error: str, now: float, settings: ProviderSettings) -> None:
        self.failures += 1
        wait = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (self.failures - 1))
        if self.failures > settings.launch_error_retries:
            if not self.error or self.error != error:
                self.error_at = now
            self.error = error
            wait = max(wait, settings.launch_error_timeout)
        self.not_before = now + wait

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before = 0.0
        self.error = ""
        self.error_at = 0.0


@dataclass
class PoolStatus:
    """What `det agent list` and the WebUI show of the pool's provisioning."""

    instances: dict[str, Instance] = field(default_factory=dict)
    listed: bool = False
    list_error: str = ""
    last_decision: str = ""


@dataclass(frozen=True)
class _Listing:
    """The pool's instances grouped the way the decider takes them, kept from one tick to
    the next: they change only when the provider lists them (every ``LIST_INTERVAL``) or
    this loop launches or terminates one, while the agents change every tick. So a tick
    only looks up each live instance's agent."""

    source: Mapping[str, Instance]  # the ``PoolStatus.instances`` it was made from
    live: Mapping[str, Instance]  # never changed: the decider's memory keeps it
    stopped: frozenset[str]
    agents: tuple[tuple[str, str, float], ...]  # (id, agent id, launched_at) of each live one
    others: tuple[str, ...]  # agent ids of the instances listed but not live
    agent_ids: frozenset[str]  # of every instance listed

    @classmethod
    def of(cls, instances: Mapping[str, Instance]) -> _Listing:
        ordered = sorted(instances.values(), key=lambda i: i.id)
        live = {i.id: i for i in ordered if i.state in decider.LIVE}
        stopped = frozenset(i.id for i in ordered if i.state is InstanceState.STOPPED)
        agents = tuple((i.id, i.agent_id, i.launched_at) for i in live.values())
        others = tuple(i.agent_id for i in ordered if i.id not in live)
        agent_ids = frozenset(i.agent_id for i in ordered)
        return cls(instances, live, stopped, agents, others, agent_ids)


class Provisioner:
    def __init__(
        self,
        pool: str,
        settings: ProviderSettings,
        provider: Provider,
        agents: AgentTable,
        tasks: TaskList,
        setup: AgentSetup,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.provider = provider
        self._agents = agents
        self._tasks = tasks
        self._setup = setup
        self._clock = clock
        self._decider = decider.Settings(
            min_instances=settings.min_instances,
            max_instances=settings.max_instances,
            max_idle_agent_period=settings.max_idle_agent_period,
            max_agent_starting_period=settings.max_agent_starting_period,
            max_disconnect_period=MAX_DISCONNECT_PERIOD,
        )
        self._memory = decider.Memory()
        self._next_list = 0.0
        self._list_backoff = Backoff()
        self.launches = Backoff()
        self.status = PoolStatus()
        self._logged_errors: set[str] = set()
        # Agent ids of the instances listed or launched, until their agent has left.
        self._known_agents: set[str] = set()
        self._listing: _Listing | None = None
        # Agents of the pool that are no instance's (static agents), and when to look for
        # them again in the whole agent table.
        self._static: tuple[str, ...] = ()
        self._static_next = 0.0

    async def run(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("pool %s: the provisioner's tick failed", self.pool)
            await asyncio.sleep(TICK)

    async def tick(self) -> None:
        now = self._clock()
        if now >= self._next_list:
            await self._refresh(now)
        if not self.status.listed:
            return  # nothing is decided before the provider has said what it has
        decision, queued = self.decide(now)
        if decision.terminate:
            await self._terminate(decision.terminate)
        if decision.launch > 0 and now >= self.launches.not_before:
            await self._launch(decision.launch, queued)

    async def _refresh(self, now: float) -> None:
        try:
            listed = await self.provider.list_instances()
        except ProviderError as e:
            self._list_backoff.failed(str(e), now, self.settings)
            self._next_list = self._list_backoff.not_before
            self.status.list_error = str(e)
            self._log_error(str(e))
            return
        self._list_backoff.succeeded()
        self.status.list_error = ""
        self._next_list = now + LIST_INTERVAL
        live = {i.id: i for i in listed if i.state is not InstanceState.TERMINATED}
        # What was just launched may not be listed yet by an eventually consistent API.
        for iid, inst in self.status.instances.items():
            if iid not in live and now - inst.launched_at < LIST_INTERVAL * 2:
                if inst.state is InstanceState.STARTING:
                    live[iid] = inst
        self.status.instances = live
        self.status.listed = True
        self._forget_agents()

    def decide(self, now: float) -> tuple[decider.Decision, int]:
        """The decision for now (and the slots queued in the pool), from the instances as
        last listed, the agent table and the queue; its memory is kept for the next."""
        snapshot, queued = self._snapshot(now)
        decision = decider.decide(self._decider, snapshot, self._memory)
        self._memory = decision.memory
        return decision, queued

    def _snapshot(self, now: float) -> tuple[decider.Snapshot, int]:
        """The decider's input: each live instance's agent looked up in the agent table,
        the rest kept from the last listing (``_Listing``). The free slots of the pool's
        agents are counted only when work is queued in the pool (they count for nothing
        else); the pool's static agents among them are found in the whole agent table at
        most every ``LIST_INTERVAL``, so one that joins is counted within that time."""
        listing = self._listing
        if listing is None or listing.source is not self.status.instances:
            listing = self._listing = _Listing.of(self.status.instances)
        pending = [
            r.slots for r in self._tasks.pending.values() if r.job.resource_pool == self.pool
        ]
        table, pool = self._agents.agents, self.pool
        idle: list[str] = []
        agentless: dict[str, float] = {}
        connected: list[Agent] = []
        for iid, agent_id, launched_at in listing.agents:
            agent = table.get(agent_id)
            if agent is None or not agent.connected or agent.resource_pool != pool:
                agentless[iid] = launched_at
                continue
            connected.append(agent)
            if not agent.containers:
                idle.append(iid)
        wanted = 0
        if pending:  # every connected agent of the pool: those of stopping instances too
            connected += self._pool_agents(listing.others)
            connected += self._pool_agents(self._static_agents(listing, now))
            free = [len(a.free_slots()) for a in connected if a.enabled and not a.draining]
            wanted = demand.instances_wanted(pending, free, self.settings.slots_per_instance)
        snapshot = decider.Snapshot(
            now, listing.live, frozenset(idle), agentless, listing.stopped, wanted
        )
        return snapshot, sum(pending)

    def _static_agents(self, listing: _Listing, now: float) -> list[str]:
        """The ids of the pool's agents that are no listed instance's, looked for in the
        whole agent table at most every ``LIST_INTERVAL``."""
        if now >= self._static_next:
            self._static_next = now + LIST_INTERVAL
            self._static = tuple(
                a.id
                for a in self._agents.agents.values()
                if a.resource_pool == self.pool and a.id not in listing.agent_ids
            )
        return [i for i in self._static if i not in listing.agent_ids]  # listed since?

    def _pool_agents(self, agent_ids: Iterable[str]) -> list[Agent]:
        """Those of ``agent_ids`` connected to this pool now."""
        found = map(self._agents.agents.get, agent_ids)
        return [a for a in found if a is not None and a.connected and a.resource_pool == self.pool]

    async def _launch(self, count: int, queued: int) -> None:
        what = (
            f"{queued} slot{'s' if queued != 1 else ''} queued"
            if queued
            else f"min_instances is {self.settings.min_instances}"
        )
        self._decided(
            f"launching {count} instance{'s' if count != 1 else ''}: {what} in pool {self.pool}"
        )
        for _ in range(count):
            agent_id = new_agent_id(self.pool)
            script = startup_script(self.settings, self._setup, pool=self.pool, agent_id=agent_id)
            try:
                instance = await self.provider.launch(agent_id, script)
            except ProviderError as e:
                self.launches.failed(str(e), self._clock(), self.settings)
                self._log_error(str(e))
                wait = self.launches.not_before - self._clock()
                log.info("pool %s: the next launch is tried in %.0f s", self.pool, max(0, wait))
                return
            self.launches.succeeded()
            self._logged_errors.clear()
            self.status.instances[instance.id] = instance
            self._listing = None
            log.info("pool %s: launched instance %s (agent %s)", self.pool, instance.id, agent_id)

    async def _terminate(self, terminations: tuple[decider.Termination, ...]) -> None:
        ids = [t.instance_id for t in terminations]
        parts = []
        for t in terminations:
            reason = _REASONS[t.reason].format(disconnect=MAX_DISCONNECT_PERIOD)
            parts.append(f"{t.instance_id} ({reason})")
        self._decided(
            f"terminating {len(ids)} instance{'s' if len(ids) != 1 else ''} in pool "
            f"{self.pool}: {', '.join(parts)}"
        )
        # Their agents take no new work from now on: the scheduler runs while the provider
        # is called, and would otherwise place a trial on an agent about to vanish.
        fenced = self._fence([t.instance_id for t in terminations])
        try:
            await self.provider.terminate(ids)
        except ProviderError as e:
            for agent in fenced:
                agent.enabled = True
            self._log_error(str(e))
            self._next_list = 0.0  # see what is left, and decide again
            return
        for iid in ids:
            inst = self.status.instances.get(iid)
            if inst is not None:
                self._hang_up(inst.agent_id)
                self.status.instances[iid] = Instance(
                    id=inst.id,
                    state=InstanceState.STOPPING,
                    launched_at=inst.launched_at,
                    agent_id=inst.agent_id,
                )
        self._listing = None

    def _fence(self, instance_ids: Iterable[str]) -> list[Agent]:
        """Disable the connected, enabled agents of these instances; those it disabled."""
        fenced = []
        for iid in instance_ids:
            inst = self.status.instances.get(iid)
            agent = self._agents.agents.get(inst.agent_id) if inst is not None else None
            if agent is not None and agent.connected and agent.enabled:
                agent.enabled = False
                fenced.append(agent)
        return fenced

    def _forget_agents(self) -> None:
        """Agents of instances that are gone leave the agent table once nothing runs on
        them (a lost agent with containers is the task manager's to handle first: it is
        looked at again at the next listing)."""
        live = {i.agent_id for i in self.status.instances.values()}
        for agent_id in sorted(self._known_agents - live):
            agent = self._agents.agents.get(agent_id)
            if agent is not None and agent.connected:
                # Its machine is gone (terminated, a spot interruption): no point waiting
                # for its connection to time out. It is lost as any agent is.
                self._hang_up(agent_id)
                continue
            if agent is not None and agent.containers:
                continue
            if agent is not None:
                del self._agents.agents[agent_id]
            self._known_agents.discard(agent_id)
        self._known_agents |= live

    def _hang_up(self, agent_id: str) -> None:
        agent = self._agents.agents.get(agent_id)
        if agent is not None and agent.connected:
            log.info(
                "pool %s: agent %s's instance is gone; closing its connection", self.pool, agent_id
            )
            agent.hang_up()

    def _decided(self, text: str) -> None:
        self.status.last_decision = text
        log.info("%s", text)

    def _log_error(self, error: str) -> None:
        if error not in self._logged_errors:
            self._logged_errors.add(error)
            log.warning("pool %s: %s", self.pool, error)

    # -- what callers see ------------------------------------------------------------------

    def instances(self) -> list[v1.Instance]:
        out = []
        agents = self._agents.agents
        idle = self._memory.idle_since
        for inst in sorted(self.status.instances.values(), key=lambda i: (i.launched_at, i.id)):
            agent = agents.get(inst.agent_id)
            connected = agent is not None and agent.connected
            idle_since = idle.get(inst.id, 0.0) if connected else 0.0
            out.append(
                v1.Instance(
                    id=inst.id,
                    resource_pool=self.pool,
                    state=_shown(inst.state, connected=connected, idle=idle_since > 0),
                    launched_at=timestamps.to_datetime(inst.launched_at),
                    agent_id=inst.agent_id,
                    idle_since=timestamps.to_datetime(idle_since) if idle_since > 0 else None,
                )
            )
        return out

    def summary(self) -> v1.ProvisionerStatus:
        error = self.launches.error or self.status.list_error
        return v1.ProvisionerStatus(
            resource_pool=self.pool,
            provider=self.settings.type,
            min_instances=self.settings.min_instances,
            max_instances=self.settings.max_instances,
            error=error,
            last_decision=self.status.last_decision,
        )


def _shown(state: InstanceState, *, connected: bool, idle: bool) -> str:
    if state is InstanceState.STARTING:
        return "launching"
    if state is InstanceState.RUNNING:
        if not connected:
            return "starting agent"
        return "idle" if idle else "running"
    if state is InstanceState.STOPPING:
        return "terminating"
    return state.value.lower() if isinstance(state.value, str) else state.name.lower()
