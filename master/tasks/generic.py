"""Tasks that are not trials (Determined's NTSC: notebooks, TensorBoards, shells and
commands): their one phase table, their record in the store, their job in their pool's
queue, the address each serves on, idle timeouts, and the owner of their allocations that
the task manager talks to.

Each kind says what its task runs (a ``Kind``: the start order of its one container, and
how many ports the master declares for it on its agent); ``tensorboards`` is one kind, the
``commands`` package (above) the others. A task's phase moves QUEUED -> STARTING (its
container runs) -> RUNNING (it runs; a task with a declared port once it reported that it
serves there) -> TERMINATING (killed) -> TERMINATED, in ``_move`` only. A generic task may
also be paused: PAUSING (its allocation preempted) -> PAUSED (no allocation, still live) ->
QUEUED again when unpaused.

The proxy forwards only where this module allows: a task may report as its address only
its own agent's address (as the agent reported it) with a port the master declared for it
when it placed the task, and the proxy checks the same again on every request. While the
task's agent is not connected (a restarted master adopts tasks before their agents are
back) its address is unknown: the proxy waits for it a few seconds, then answers 503.

They survive a master restart: the record says which tasks were live, the allocation's row
and the agent's reconnection give the running container back (``restore``), and the
address it serves on is in the record.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from determined.api.gen import v1
from determined.common import errors, expconf
from pydet.master.agents.table import Agent
from pydet.master.logs.log_store import LogStore
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.task_list import Job, TaskList, TaskRequest
from pydet.master.tasks.task_spec import MasterInfo

log = logging.getLogger(__name__)

# The ports the master declares for tasks that serve (Determined's notebook ports).
PORT_RANGE = (2900, 3900)
# How often idle timeouts are looked at.
IDLE_CHECK_SECONDS = 1.0
DEFAULT_PRIORITY = 42
# The workspace of tasks launched into none (Determined's "Uncategorized").
UNCATEGORIZED_WORKSPACE = 1
KILL_GRACE = 5.0
# How long a paused generic task has to stop when its config does not say.
PREEMPTION_TIMEOUT = 30.0
# How often the proxy looks whether a task's agent is back.
AGENT_POLL_SECONDS = 0.1
# Every column but the context, which only the task itself downloads.
_COLUMNS = (
    "id, task_type, username, description, config, resource_pool, slots, priority, state,"
    " exit_status, exit_code, start_time, end_time, allocation_id, ports, proxy_address,"
    " proxy_user, extra, context IS NOT NULL AS has_context"
)


class TaskType(enum.Enum):
    """Determined's task types (``DET_TASK_TYPE``)."""

    COMMAND = "COMMAND"
    NOTEBOOK = "NOTEBOOK"
    SHELL = "SHELL"
    TENSORBOARD = "TENSORBOARD"
    # `det task create`: an entrypoint in a project, which may be paused and unpaused.
    GENERIC = "GENERIC"

    @property
    def noun(self) -> str:
        """How messages name one: "command", "notebook", "shell", "tensorboard", "generic
        task"."""
        return "generic task" if self is TaskType.GENERIC else self.value.lower()


class Phase(enum.Enum):
    QUEUED = "QUEUED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"
    # A generic task's pause: its allocation asked to stop, then none until it is unpaused.
    PAUSING = "PAUSING"
    PAUSED = "PAUSED"


# The only moves a task's phase makes.
_MOVES: dict[Phase, frozenset[Phase]] = {
    Phase.QUEUED: frozenset({Phase.STARTING, Phase.PAUSED, Phase.TERMINATED}),
    Phase.STARTING: frozenset({Phase.RUNNING, Phase.PAUSING, Phase.TERMINATING, Phase.TERMINATED}),
    Phase.RUNNING: frozenset({Phase.PAUSING, Phase.TERMINATING, Phase.TERMINATED}),
    Phase.PAUSING: frozenset({Phase.PAUSED, Phase.TERMINATING, Phase.TERMINATED}),
    Phase.PAUSED: frozenset({Phase.QUEUED, Phase.TERMINATED}),
    Phase.TERMINATING: frozenset({Phase.TERMINATED}),
    Phase.TERMINATED: frozenset(),
}


def proxy_path(task_id: str) -> str:
    return f"/proxy/{task_id}/"


@dataclass
class TaskJob:
    """A task's place in its pool's queue (Determined's job of a command or notebook):
    first come first served at its priority, which `set priority` changes."""

    job_id: str
    resource_pool: str
    order: float
    priority: int = DEFAULT_PRIORITY
    weight: float = 1.0
    max_slots: int | None = None
    preemption_timeout: float = 30.0


@dataclass
class GenericTask:
    id: str
    task_type: TaskType
    username: str
    description: str
    resource_pool: str
    slots: int
    priority: int
    phase: Phase
    start_time: float
    # Its config as the master filled it (JSON form), and what its kind keeps besides (a
    # TensorBoard's sources, a shell's keys).
    config: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    has_context: bool = False
    exit_status: str = ""
    exit_code: int | None = None
    end_time: float | None = None
    allocation_id: str = ""
    # The ports the master declared for it on its agent, and the host:port it reported it
    # serves on (one of them, on its agent's address).
    ports: list[int] = field(default_factory=list)
    proxy_address: str = ""
    # What its task said about itself with its address (a shell's login user).
    proxy_user: str = ""
    # When something last used it (its proxy, its own report of activity).
    last_activity: float = 0.0
    job: TaskJob = field(init=False)

    def __post_init__(self) -> None:
        self.job = TaskJob(self.id, self.resource_pool, self.start_time, priority=self.priority)

    @property
    def state(self) -> str:
        return f"STATE_{self.phase.value}"

    @property
    def service_address(self) -> str:
        return proxy_path(self.id)

    @property
    def declared_ports(self) -> list[dict[str, Any]]:
        """The ports its config declares (``environment.proxy_ports``: ``{port, tcp}``)."""
        return list(self.extra.get("proxy_ports") or [])

    @property
    def preemption_timeout(self) -> float:
        """Seconds a paused task has to stop before it is killed (a generic task's config's
        ``preemption_timeout``)."""
        value = self.extra.get("preemption_timeout")
        return float(value) if isinstance(value, int | float) and value > 0 else PREEMPTION_TIMEOUT

    @property
    def workspace_id(self) -> int:
        """The workspace it belongs to: the one it was launched into, else Determined's
        default, Uncategorized."""
        return int(self.extra.get("workspace_id") or UNCATEGORIZED_WORKSPACE)

    @property
    def idle_timeout(self) -> float | None:
        """Seconds of no activity after which it is ended (its config's ``idle_timeout``)."""
        value = self.config.get("idle_timeout")
        return expconf.parse_duration(value) if isinstance(value, str) else None


StartOrder = Callable[[GenericTask, Allocation, Mapping[str, Agent]], v1.StartContainer]


@dataclass(frozen=True)
class Kind:
    """What a kind of task runs: ``start`` makes its container's start order; ``ports`` is
    how many ports the master declares for it on its agent (0: it serves nothing), and
    ``tcp`` says its port is a TCP service (a shell's sshd), which the proxy tunnels
    through a WebSocket, rather than a web server."""

    start: StartOrder
    ports: int = 0
    tcp: bool = False


@dataclass(frozen=True)
class ProxyTarget:
    """Where the proxy forwards a task's requests: ``address`` (host:port), for requests of
    ``owner`` or an admin; ``headers`` are added to every forwarded request (a notebook's
    token, which its users never see)."""

    task_id: str
    address: str
    owner: str
    tcp: bool
    headers: Mapping[str, str]


def _split(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise errors.InvalidArgument(f"proxy_address: expected host:port, not {address!r}")
    return host, int(port)


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _same_host(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a.lower() == b.lower()


def base_env(
    task: GenericTask, alloc: Allocation, info: MasterInfo, agent: Agent
) -> dict[str, str]:
    """The DET_* environment every task that is not a trial starts with."""
    (container,) = alloc.containers.values()
    env = {
        "DET_MASTER": info.master_address,
        "DET_CLUSTER_ID": info.cluster_id,
        "DET_AGENT_ID": container.agent_id,
        "DET_SLOT_IDS": json.dumps([int(s) if s.isdigit() else s for s in container.slot_ids]),
        "DET_TASK_ID": task.id,
        "DET_ALLOCATION_ID": alloc.id,
        "DET_SESSION_TOKEN": alloc.token,
        "DET_TASK_TYPE": task.task_type.value,
        "DET_CONTAINER_ADDRS": json.dumps([agent.address]),
        "DET_CONTAINER_RANK": "0",
        "DET_RESOURCES_ID": container.id,
        "DET_PROXY_PATH": proxy_path(task.id),
    }
    if task.ports:
        env["DET_PROXY_PORT"] = str(task.ports[0])
    return env


class GenericTasks:
    """The tasks that are not trials, and the task owner of their allocations."""

    def __init__(self, db: Database, tasks: TaskList, logs: LogStore, info: MasterInfo) -> None:
        self._db = db
        self._tasks = tasks
        self._logs = logs
        self.info = info
        self._kinds: dict[TaskType, Kind] = {}
        self._live: dict[str, GenericTask] = {}

    def register(self, task_type: TaskType, kind: Kind) -> None:
        self._kinds[task_type] = kind

    # -- life ----------------------------------------------------------------------------

    async def load(self) -> None:
        """After a master restart: the tasks that were live, and those still waiting for
        slots back in their queue (running ones wait for ``restore``)."""
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM generic_tasks WHERE state != ? ORDER BY start_time",
            (Phase.TERMINATED.value,),
        )
        for row in rows:
            task = _from_row(row)
            self._live[task.id] = task
            if task.phase is Phase.QUEUED:
                self._request(task)
        if rows:
            log.info("loaded %d live tasks (commands, notebooks, shells, TensorBoards)", len(rows))

    def job_of(self, task_id: str) -> Job | None:
        task = self._live.get(task_id)
        return None if task is None else task.job

    async def restore(self, allocations: list[Allocation]) -> None:
        """Adopt the allocations the task manager found still running; end the tasks whose
        allocation did not survive, and kill allocations of no live task."""
        adopted = set()
        for alloc in allocations:
            if alloc.trial_id is not None:
                continue
            task = self._live.get(alloc.task_id)
            if task is None or task.phase in (Phase.QUEUED, Phase.PAUSED):
                log.warning("killing allocation %s of no live task", alloc.id)
                self._tasks.kill(alloc, reason="orphaned", grace=3.0)
                continue
            task.allocation_id = alloc.id
            task.last_activity = time.time()
            adopted.add(task.id)
            if task.phase is Phase.TERMINATING:
                # Killed just before the master stopped: the order may not have gone out.
                self._tasks.kill(alloc, reason="killed", grace=KILL_GRACE)
            elif task.phase is Phase.PAUSING:
                self._tasks.preempt(alloc, reason="paused", timeout=task.preemption_timeout)
            log.info("%s %s: adopted allocation %s", task.task_type.noun, task.id, alloc.id)
        for task in list(self._live.values()):
            if task.phase in (Phase.QUEUED, Phase.PAUSED) or task.id in adopted:
                continue
            if task.phase is Phase.PAUSING:
                await self._paused(task)  # it stopped while the master was down
            else:
                await self._end(task, "its allocation was lost while the master was down")

    async def create(self, task: GenericTask, context: bytes | None) -> GenericTask:
        """Store a new task and queue it for its slots."""
        task.has_context = bool(context)
        await self._db.execute(
            "INSERT INTO generic_tasks (id, task_type, username, description, config, context,"
            " resource_pool, slots, priority, state, start_time, extra)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                task.id,
                task.task_type.value,
                task.username,
                task.description,
                json.dumps(task.config),
                context or None,
                task.resource_pool,
                task.slots,
                task.priority,
                task.phase.value,
                task.start_time,
                json.dumps(task.extra),
            ),
        )
        self._live[task.id] = task
        self._request(task)
        log.info("%s %s (%s) queued", task.task_type.noun, task.id, task.description)
        return task

    def _request(self, task: GenericTask) -> None:
        self._tasks.request(TaskRequest(task.id, None, task.slots, task.job))

    def live(self, task_type: TaskType | None = None) -> list[GenericTask]:
        """The tasks not yet terminated (of one type), oldest first."""
        return sorted(
            (t for t in self._live.values() if task_type is None or t.task_type is task_type),
            key=lambda t: t.start_time,
        )

    async def get(self, task_id: str, task_type: TaskType | None = None) -> GenericTask:
        task = self._live.get(task_id)
        if task is None:
            row = await self._db.fetch_one(
                f"SELECT {_COLUMNS} FROM generic_tasks WHERE id = ?", (task_id,)
            )
            task = None if row is None else _from_row(row)
        noun = task_type.noun if task_type is not None else "task"
        if task is None or (task_type is not None and task.task_type is not task_type):
            raise errors.NotFound(f"{noun} {task_id} not found")
        return task

    async def context(self, task_id: str) -> bytes:
        row = await self._db.fetch_one("SELECT context FROM generic_tasks WHERE id = ?", (task_id,))
        if row is None:
            raise errors.NotFound(f"task {task_id} not found")
        return bytes(row["context"] or b"")

    async def kill(
        self, task_id: str, task_type: TaskType | None = None, *, why: str = "killed"
    ) -> GenericTask:
        task = await self.get(task_id, task_type)
        if task.phase in (Phase.TERMINATED, Phase.TERMINATING):
            return task
        if task.phase is Phase.PAUSED:
            await self._end(task, f"{why} while paused")
            return task
        if self._tasks.withdraw(task.id):
            await self._end(task, f"{why} before it started")
            return task
        alloc = self._tasks.allocation_of(task.id)
        if alloc is not None:
            if alloc.stop_reason == "paused":
                alloc.stop_reason = ""  # killed while pausing: it ends as killed
            await self._move(task, Phase.TERMINATING)
            self._tasks.kill(alloc, reason=why, grace=KILL_GRACE)
        return task

    async def pause(self, task: GenericTask) -> None:
        """Stop the task's process and keep the task: a queued one leaves the queue; a
        running one gets its preemption signal and is killed after its preemption timeout."""
        if task.phase is Phase.QUEUED and self._tasks.withdraw(task.id):
            await self._move(task, Phase.PAUSED)
            return
        alloc = self._tasks.allocation_of(task.id)
        if task.phase not in (Phase.STARTING, Phase.RUNNING) or alloc is None:
            raise errors.FailedPrecondition(
                f"task {task.id} is {task.phase.value.lower()} and cannot be paused"
            )
        await self._move(task, Phase.PAUSING)
        self._tasks.preempt(alloc, reason="paused", timeout=task.preemption_timeout)

    async def unpause(self, task: GenericTask) -> None:
        """Queue a paused task again: a new allocation runs its entrypoint anew."""
        if task.phase is not Phase.PAUSED:
            raise errors.FailedPrecondition(
                f"task {task.id} is {task.phase.value.lower()}, not paused"
                + ("; unpause it once it has stopped" if task.phase is Phase.PAUSING else "")
            )
        task.job.order = time.time()
        await self._move(task, Phase.QUEUED)
        self._request(task)

    async def _paused(self, task: GenericTask) -> None:
        task.allocation_id = ""
        task.proxy_address = ""
        task.ports = []
        await self._move(task, Phase.PAUSED)

    async def set_priority(
        self, task_id: str, priority: int, task_type: TaskType | None = None
    ) -> GenericTask:
        task = await self.get(task_id, task_type)
        if not 1 <= priority <= 99:
            raise errors.InvalidArgument(f"priority: must be between 1 and 99, got {priority}")
        if task.phase is Phase.TERMINATED:
            raise errors.FailedPrecondition(
                f"{task.task_type.noun} {task.id} has ended; its priority no longer matters"
            )
        task.priority = task.job.priority = priority
        await self._db.execute(
            "UPDATE generic_tasks SET priority = ? WHERE id = ?", (priority, task.id)
        )
        self._tasks.wake()
        return task

    # -- the proxy -------------------------------------------------------------------------

    def _agent_of(self, task: GenericTask) -> Agent | None:
        alloc = self._tasks.allocations.get(task.allocation_id)
        if alloc is None:
            return None
        (container,) = alloc.containers.values()
        return self._tasks.agents.get(container.agent_id)

    def _check_target(self, task: GenericTask, address: str) -> None:
        """Refuse an address that is not one the master declared for the task on its own
        agent (as that agent reported its address)."""
        host, port = _split(address)
        agent = self._agent_of(task)
        if agent is None:
            raise errors.FailedPrecondition(f"{task.task_type.noun} {task.id} runs on no agent")
        if not agent.connected:
            # After a master restart, until the agent is back: its address is not known yet.
            raise errors.Unavailable(
                f"agent {agent.id}, which runs {task.task_type.noun} {task.id}, is not "
                "connected to the master; try again once it is back"
            )
        if not _same_host(host, agent.address):
            raise errors.PermissionDenied(
                f"proxy_address: {address} is not on agent {agent.id} ({agent.address}), which "
                "runs this task; a task serves only on its own agent's address"
            )
        if port not in task.ports:
            declared = ", ".join(map(str, task.ports)) or "none"
            raise errors.PermissionDenied(
                f"proxy_address: port {port} was not declared for this task (declared: {declared})"
            )

    def proxy_target(self, task_id: str) -> ProxyTarget:
        """Where a running task's proxy requests go."""
        task = self._live.get(task_id)
        if task is None or task.task_type not in self._kinds:
            raise errors.NotFound(f"no running task {task_id} serves through the proxy")
        if not task.proxy_address:
            raise errors.FailedPrecondition(
                f"{task.task_type.noun} {task_id} is {task.phase.value.lower()}; it does not "
                "serve yet"
            )
        self._check_target(task, task.proxy_address)
        headers = task.extra.get("proxy_headers") or {}
        kind = self._kinds[task.task_type]
        declared = task.declared_ports
        return ProxyTarget(
            task_id=task.id,
            address=task.proxy_address,
            owner=task.username,
            tcp=kind.tcp or (not kind.ports and bool(declared) and bool(declared[0]["tcp"])),
            headers={str(k): str(v) for k, v in dict(headers).items()},
        )

    async def proxy_target_once_connected(self, task_id: str, wait: float) -> ProxyTarget:
        """``proxy_target``, waiting up to ``wait`` seconds for the task's agent when it is
        not connected (a restarted master that adopted the task before the agent came back,
        or an agent that is reconnecting)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            try:
                return self.proxy_target(task_id)
            except errors.Unavailable:
                if loop.time() >= deadline:
                    raise
            await asyncio.sleep(AGENT_POLL_SECONDS)

    def owner_of(self, task_id: str) -> str | None:
        """Who launched a live task; None for no live task of that id."""
        task = self._live.get(task_id)
        return None if task is None else task.username

    def description_of(self, task_id: str) -> str | None:
        task = self._live.get(task_id)
        return None if task is None else task.description

    async def post_proxy_address(self, allocation_id: str, address: str, user: str = "") -> None:
        alloc = self._tasks.allocations.get(allocation_id)
        task = self._live.get(alloc.task_id) if alloc is not None else None
        if alloc is None or task is None or task.allocation_id != allocation_id:
            raise errors.NotFound(f"allocation {allocation_id} is not a running task's")
        self._check_target(task, address)
        task.proxy_address = address
        task.proxy_user = user
        task.last_activity = time.time()
        await self._db.execute(
            "UPDATE generic_tasks SET proxy_address = ?, proxy_user = ? WHERE id = ?",
            (address, user, task.id),
        )
        if task.phase is Phase.STARTING:
            await self._move(task, Phase.RUNNING)

    def record_activity(self, task_id: str) -> None:
        task = self._live.get(task_id)
        if task is not None:
            task.last_activity = time.time()

    # -- idle timeouts -----------------------------------------------------------------------

    async def run(self, lock: asyncio.Lock) -> None:
        """End the running tasks that stayed idle past their ``idle_timeout``."""
        while True:
            await asyncio.sleep(IDLE_CHECK_SECONDS)
            now = time.time()
            idle = [
                t
                for t in self._live.values()
                if t.phase is Phase.RUNNING
                and (timeout := t.idle_timeout) is not None
                and now - t.last_activity > timeout
            ]
            if not idle:
                continue
            async with lock:
                for task in idle:
                    await self._idle_kill(task)

    async def _idle_kill(self, task: GenericTask) -> None:
        timeout = task.idle_timeout or 0.0
        if task.phase is not Phase.RUNNING or time.time() - task.last_activity <= timeout:
            return
        text = f"{task.task_type.noun} {task.id} was idle for more than {timeout:g}s"
        detail = task.config.get("notebook_idle_type")
        if task.task_type is TaskType.NOTEBOOK and isinstance(detail, str):
            text += f" (notebook_idle_type: {detail})"
        text += "; ending it (idle_timeout)"
        log.info("%s", text)
        await self._tasks.trial_log(None, task.id, text, allocation_id=task.allocation_id)
        await self.kill(task.id, why="idle")

    # -- phases ----------------------------------------------------------------------------

    async def _move(self, task: GenericTask, to: Phase) -> None:
        if to not in _MOVES[task.phase]:
            raise RuntimeError(
                f"{task.task_type.noun} {task.id}: no move from {task.phase.value} to {to.value}"
            )
        task.phase = to
        if to is Phase.TERMINATED:
            task.end_time = time.time()
        await self._db.execute(
            "UPDATE generic_tasks SET state = ?, exit_status = ?, exit_code = ?, end_time = ?,"
            " allocation_id = ? WHERE id = ?",
            (
                to.value,
                task.exit_status,
                task.exit_code,
                task.end_time,
                task.allocation_id,
                task.id,
            ),
        )

    async def _end(self, task: GenericTask, status: str, exit_code: int | None = None) -> None:
        task.exit_status = status
        task.exit_code = exit_code
        task.proxy_address = ""
        await self._move(task, Phase.TERMINATED)
        self._live.pop(task.id, None)
        self._logs.notify(task.id)

    def _free_ports(self, agent_id: str, n: int) -> list[int]:
        """``n`` ports for a task on ``agent_id`` that no other live task there declared."""
        taken = {
            p
            for t in self._live.values()
            if t.allocation_id and (a := self._agent_of(t)) is not None and a.id == agent_id
            for p in t.ports
        }
        low, high = PORT_RANGE
        free = [p for p in range(low, high) if p not in taken]
        if len(free) < n:
            raise errors.ResourceExhausted(f"agent {agent_id} has no free task ports left")
        return random.sample(free, n)

    # -- the task manager's callbacks (TaskOwner) ------------------------------------------

    async def allocation_placed(
        self, request: TaskRequest, allocation: Allocation
    ) -> list[v1.StartContainer]:
        task = self._live[request.task_id]
        kind = self._kinds[task.task_type]
        (container,) = allocation.containers.values()
        task.allocation_id = allocation.id
        chosen = self._free_ports(container.agent_id, kind.ports) if kind.ports else []
        task.ports = chosen + [int(d["port"]) for d in task.declared_ports]
        await self._db.execute(
            "UPDATE generic_tasks SET ports = ? WHERE id = ?", (json.dumps(task.ports), task.id)
        )
        await self._move(task, Phase.STARTING)
        try:
            return [kind.start(task, allocation, self._tasks.agents)]
        except Exception as e:
            # A bug in one kind must end its task, not the scheduling loop: the agent fails
            # a container with no command at once, and the task ends saying why.
            log.exception("%s %s: cannot make its start order", task.task_type.noun, task.id)
            await self._tasks.master_log(allocation, f"the master could not start the task: {e}")
            return [
                v1.StartContainer(
                    container_id=container.id,
                    allocation_id=allocation.id,
                    task_id=task.id,
                    argv=[],
                )
            ]

    async def allocation_started(self, allocation: Allocation) -> None:
        """A task that serves nothing runs once its container does; one that serves runs
        once it reported where (``post_proxy_address``)."""
        task = self._live.get(allocation.task_id)
        if task is None:
            return
        task.last_activity = time.time()
        if self._kinds[task.task_type].ports:
            return
        agent = self._agent_of(task)
        if task.declared_ports and agent is not None and not task.proxy_address:
            # What it declares in its config it serves from the start, as Determined's
            # proxy_ports: no report needed.
            task.proxy_address = _join(agent.address, int(task.declared_ports[0]["port"]))
            await self._db.execute(
                "UPDATE generic_tasks SET proxy_address = ? WHERE id = ?",
                (task.proxy_address, task.id),
            )
        if task.phase is Phase.STARTING:
            await self._move(task, Phase.RUNNING)

    async def allocation_preempted(self, allocation: Allocation) -> None:
        """These tasks do not checkpoint: the scheduler's kill after the preemption timeout
        ends them, and their log says so."""

    async def allocation_exited(self, allocation: Allocation) -> None:
        task = self._live.get(allocation.task_id)
        if task is None:
            return
        if task.phase is Phase.PAUSING:
            log.info("task %s paused (allocation %s ended)", task.id, allocation.id)
            await self._paused(task)
            return
        failure = allocation.first_failure()
        (container,) = allocation.containers.values()
        code = container.exit_code
        if allocation.stop_reason == "idle":
            status = "idle timeout"
        elif allocation.stop_reason in ("killed", "orphaned"):
            status = "killed"
        elif failure is not None and failure.lost:
            status = failure.error  # "lost: agent A did not report this container ..."
            code = None
        elif failure is not None:
            status = f"exited with code {failure.exit_code}"
            if failure.error:
                status += f": {failure.error}"
        else:
            status = "exited with code 0"
        await self._end(task, status, code)


def _from_row(row: Any) -> GenericTask:
    task = GenericTask(
        id=row["id"],
        task_type=TaskType(row["task_type"]),
        username=row["username"],
        description=row["description"],
        resource_pool=row["resource_pool"],
        slots=int(row["slots"]),
        priority=int(row["priority"]),
        phase=Phase(row["state"]),
        start_time=float(row["start_time"]),
        config=json.loads(row["config"] or "{}"),
        extra=json.loads(row["extra"] or "{}"),
        has_context=bool(row["has_context"]),
        exit_status=row["exit_status"],
        exit_code=row["exit_code"],
        end_time=row["end_time"],
        allocation_id=row["allocation_id"],
        ports=[int(p) for p in json.loads(row["ports"] or "[]")],
        proxy_address=row["proxy_address"],
        proxy_user=row["proxy_user"],
    )
    task.last_activity = time.time()
    return task
