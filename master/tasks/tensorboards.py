"""TensorBoard tasks (Determined's TASK_TYPE_TENSORBOARD): a TensorBoard over the files some
trials uploaded to their experiment's ``tensorboard_storage`` (or checkpoint storage), run on
an agent with no slot and reached through the gateway's ``/proxy/<id>/``.

A TensorBoard is a job of its own in its pool's queue; this module is the task manager's
owner for its allocation, as ``experiments`` is for trials'. Its phase moves QUEUED ->
STARTING (its process runs) -> RUNNING (the process reported the address it serves on) ->
TERMINATING (killed) -> TERMINATED, in ``_move`` only.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import shutil
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from determined.api.gen import v1
from determined.common import errors, timestamps
from determined.core._tensorboard import storage_config, sync_path
from pydet.master import queries
from pydet.master.agents.table import Agent
from pydet.master.checkpoint_storage import s3, shared_fs
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.task_list import TaskList, TaskRequest
from pydet.master.tasks.task_spec import MasterInfo

log = logging.getLogger(__name__)

# Determined loads at most 100 trials into one TensorBoard.
MAX_TRIALS = 100
TASK_ENTRY = ["python3", "-m", "determined.exec.tensorboard"]
_READABLE_STORAGES = ("shared_fs", "directory", "s3")


class Phase(enum.Enum):
    QUEUED = "QUEUED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"


# The only moves a TensorBoard's phase makes.
_MOVES: dict[Phase, frozenset[Phase]] = {
    Phase.QUEUED: frozenset({Phase.STARTING, Phase.TERMINATED}),
    Phase.STARTING: frozenset({Phase.RUNNING, Phase.TERMINATING, Phase.TERMINATED}),
    Phase.RUNNING: frozenset({Phase.TERMINATING, Phase.TERMINATED}),
    Phase.TERMINATING: frozenset({Phase.TERMINATED}),
    Phase.TERMINATED: frozenset(),
}


def proxy_path(task_id: str) -> str:
    return f"/proxy/{task_id}/"


@dataclass(frozen=True)
class TensorboardJob:
    """A TensorBoard's place in the queue: the default priority, first come first served."""

    job_id: str
    resource_pool: str
    order: float
    priority: int = 42
    weight: float = 1.0
    max_slots: int | None = None
    preemption_timeout: float = 30.0


@dataclass
class Tensorboard:
    id: str
    username: str
    experiment_ids: list[int]
    trial_ids: list[int]
    # One per trial: {"experiment_id", "trial_id", "storage", "path"}.
    sources: list[dict[str, Any]]
    resource_pool: str
    phase: Phase
    start_time: float
    exit_status: str = ""
    allocation_id: str = ""
    # host:port its TensorBoard serves on, once it said so.
    address: str = ""
    job: TensorboardJob = field(init=False)

    def __post_init__(self) -> None:
        self.job = TensorboardJob(self.id, self.resource_pool, self.start_time)

    def to_proto(self) -> v1.Tensorboard:
        return v1.Tensorboard(
            id=self.id,
            description=f"TensorBoard ({self.id[:8]})",
            state=v1.TensorboardState[self.phase.value],
            start_time=timestamps.to_datetime(self.start_time),
            experiment_ids=list(self.experiment_ids),
            trial_ids=list(self.trial_ids),
            username=self.username,
            service_address=proxy_path(self.id),
            resource_pool=self.resource_pool,
            exit_status=self.exit_status,
            job_id=self.id,
            allocation_id=self.allocation_id,
        )


class Tensorboards:
    """The TensorBoards, and the task owner of their allocations."""

    def __init__(self, db: Database, tasks: TaskList, info: MasterInfo) -> None:
        self._db = db
        self._tasks = tasks
        self._info = info
        self._live: dict[str, Tensorboard] = {}

    # -- life ----------------------------------------------------------------------------

    async def load(self) -> None:
        """After a master restart: a TensorBoard holds no durable state worth resuming, so
        the ones that were live end (their processes are killed by ``restore``)."""
        await self._db.execute(
            "UPDATE tensorboards SET state = ?, exit_status = ?, end_time = ? WHERE state != ?",
            (
                Phase.TERMINATED.value,
                "the master restarted",
                time.time(),
                Phase.TERMINATED.value,
            ),
        )

    def restore(self, allocations: list[Allocation]) -> None:
        for alloc in allocations:
            if alloc.trial_id is None:
                self._tasks.kill(alloc, reason="orphaned", grace=3.0)

    async def launch(
        self, *, username: str, experiment_ids: list[int], trial_ids: list[int]
    ) -> Tensorboard:
        if not experiment_ids and not trial_ids:
            raise errors.InvalidArgument(
                "experiment_ids, trial_ids: name at least one experiment or trial"
            )
        sources = await self._sources(experiment_ids, trial_ids)
        tb = Tensorboard(
            id=str(uuid.uuid4()),
            username=username,
            experiment_ids=sorted(set(experiment_ids)),
            trial_ids=sorted({s["trial_id"] for s in sources}),
            sources=sources,
            resource_pool=self._info.default_pool,
            phase=Phase.QUEUED,
            start_time=time.time(),
        )
        await self._db.execute(
            "INSERT INTO tensorboards (id, username, experiment_ids, trial_ids, sources,"
            " resource_pool, state, start_time) VALUES (?,?,?,?,?,?,?,?)",
            (
                tb.id,
                tb.username,
                json.dumps(tb.experiment_ids),
                json.dumps(tb.trial_ids),
                json.dumps(tb.sources),
                tb.resource_pool,
                tb.phase.value,
                tb.start_time,
            ),
        )
        self._live[tb.id] = tb
        self._tasks.request(TaskRequest(tb.id, None, 0, tb.job))
        log.info("tensorboard %s for trials %s queued", tb.id, tb.trial_ids)
        return tb

    async def _sources(
        self, experiment_ids: list[int], trial_ids: list[int]
    ) -> list[dict[str, Any]]:
        pairs: dict[int, int] = {}
        for exp_id in experiment_ids:
            for trial in await queries.trials(self._db, exp_id):
                pairs.setdefault(trial.id, exp_id)
        for trial_id in trial_ids:
            pairs.setdefault(trial_id, (await queries.trial(self._db, trial_id)).experiment_id)
        if not pairs:
            raise errors.InvalidArgument(
                f"experiment_ids: experiment(s) {', '.join(map(str, experiment_ids))} have no "
                "trials yet"
            )
        if len(pairs) > MAX_TRIALS:
            raise errors.InvalidArgument(
                f"trial_ids: a TensorBoard shows at most {MAX_TRIALS} trials; "
                f"{len(pairs)} were named"
            )
        storages: dict[int, dict[str, Any]] = {}
        out = []
        for trial_id, exp_id in sorted(pairs.items()):
            if exp_id not in storages:
                text = await queries.stored_config(self._db, exp_id)
                config = json.loads(text or "{}")
                storage = storage_config(config)
                if not isinstance(storage, dict) or storage.get("type") not in _READABLE_STORAGES:
                    kind = storage.get("type") if isinstance(storage, dict) else None
                    raise errors.InvalidArgument(
                        f"experiment {exp_id}: its tensorboard_storage (or checkpoint_storage) "
                        f"is of type {kind!r}; pydet's TensorBoard reads shared_fs, directory or "
                        "s3 storage"
                    )
                storages[exp_id] = storage
            out.append(
                {
                    "experiment_id": exp_id,
                    "trial_id": trial_id,
                    "storage": storages[exp_id],
                    "path": sync_path(self._info.cluster_id, exp_id, trial_id),
                }
            )
        return out

    async def remove_files(self, experiment_id: int, config_json: str | None) -> None:
        """Remove a deleted experiment's TensorBoard files from its storage (its trials'
        directories under ``<cluster>/tensorboard/experiment/<id>/``)."""
        storage = storage_config(json.loads(config_json or "{}"))
        if not isinstance(storage, dict):
            return
        tree = f"{self._info.cluster_id}/tensorboard/experiment/{experiment_id}"
        if storage.get("type") == "s3":
            await s3.remove_tree(storage, tree)
            return
        base = shared_fs.storage_dir(storage)
        if base is not None:
            await asyncio.to_thread(shutil.rmtree, base / tree, True)

    def live(self) -> list[Tensorboard]:
        """The TensorBoards not yet terminated, oldest first."""
        return sorted(self._live.values(), key=lambda t: t.start_time)

    async def get(self, tensorboard_id: str) -> Tensorboard:
        tb = self._live.get(tensorboard_id)
        if tb is not None:
            return tb
        row = await self._db.fetch_one("SELECT * FROM tensorboards WHERE id = ?", (tensorboard_id,))
        if row is None:
            raise errors.NotFound(f"tensorboard {tensorboard_id} not found")
        return Tensorboard(
            id=row["id"],
            username=row["username"],
            experiment_ids=json.loads(row["experiment_ids"]),
            trial_ids=json.loads(row["trial_ids"]),
            sources=json.loads(row["sources"]),
            resource_pool=row["resource_pool"],
            phase=Phase(row["state"]),
            start_time=row["start_time"],
            exit_status=row["exit_status"],
        )

    async def kill(self, tensorboard_id: str) -> Tensorboard:
        tb = await self.get(tensorboard_id)
        if tb.phase is Phase.TERMINATED:
            return tb
        if self._tasks.withdraw(tb.id):
            await self._end(tb, "killed before it started")
            return tb
        alloc = self._tasks.allocation_of(tb.id)
        if alloc is not None:
            await self._move(tb, Phase.TERMINATING)
            self._tasks.kill(alloc, reason="killed", grace=5.0)
        return tb

    def proxy_address(self, task_id: str) -> tuple[str, str]:
        """``(host:port, owner)`` of a running TensorBoard."""
        tb = self._live.get(task_id)
        if tb is None:
            raise errors.NotFound(f"no running task {task_id} serves a web page")
        if not tb.address:
            raise errors.FailedPrecondition(
                f"tensorboard {task_id} is {tb.phase.value.lower()}; its page is not served yet"
            )
        return tb.address, tb.username

    async def post_proxy_address(self, allocation_id: str, address: str) -> None:
        alloc = self._tasks.allocations.get(allocation_id)
        tb = self._live.get(alloc.task_id) if alloc is not None else None
        if alloc is None or tb is None:
            raise errors.NotFound(f"allocation {allocation_id} is not a running TensorBoard")
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise errors.InvalidArgument(f"proxy_address: expected host:port, not {address!r}")
        tb.address = address
        if tb.phase is Phase.STARTING:
            await self._move(tb, Phase.RUNNING)

    # -- phases ----------------------------------------------------------------------------

    async def _move(self, tb: Tensorboard, to: Phase) -> None:
        if to not in _MOVES[tb.phase]:
            raise RuntimeError(f"tensorboard {tb.id}: no move from {tb.phase.value} to {to.value}")
        tb.phase = to
        end = time.time() if to is Phase.TERMINATED else None
        await self._db.execute(
            "UPDATE tensorboards SET state = ?, exit_status = ?, end_time = ? WHERE id = ?",
            (to.value, tb.exit_status, end, tb.id),
        )

    async def _end(self, tb: Tensorboard, status: str) -> None:
        tb.exit_status = status
        tb.address = ""
        await self._move(tb, Phase.TERMINATED)
        self._live.pop(tb.id, None)

    # -- the task manager's callbacks (TaskOwner) ------------------------------------------

    async def allocation_placed(
        self, request: TaskRequest, allocation: Allocation
    ) -> list[v1.StartContainer]:
        tb = self._live[request.task_id]
        tb.allocation_id = allocation.id
        await self._move(tb, Phase.STARTING)
        return [start_order(tb, allocation, self._info, self._tasks.agents)]

    async def allocation_started(self, allocation: Allocation) -> None:
        """Nothing to do: it is RUNNING once it reports where it serves."""

    async def allocation_preempted(self, allocation: Allocation) -> None:
        """Zero-slot tasks are never preempted for another job."""

    async def allocation_exited(self, allocation: Allocation) -> None:
        tb = self._live.get(allocation.task_id)
        if tb is None:
            return
        failure = allocation.first_failure()
        if allocation.stop_reason == "killed":
            status = "killed"
        elif failure is not None:
            status = f"exited with code {failure.exit_code}"
            if failure.error:
                status += f": {failure.error}"
        else:
            status = "exited"
        await self._end(tb, status)


def start_order(
    tb: Tensorboard, alloc: Allocation, info: MasterInfo, agents: dict[str, Agent]
) -> v1.StartContainer:
    (container,) = alloc.containers.values()
    agent = agents[container.agent_id]
    env = {
        "DET_MASTER": info.master_address,
        "DET_CLUSTER_ID": info.cluster_id,
        "DET_AGENT_ID": container.agent_id,
        "DET_SLOT_IDS": "[]",
        "DET_TASK_ID": tb.id,
        "DET_ALLOCATION_ID": alloc.id,
        "DET_SESSION_TOKEN": alloc.token,
        "DET_TASK_TYPE": "TENSORBOARD",
        "DET_CONTAINER_ADDRS": json.dumps([agent.address]),
        "DET_CONTAINER_RANK": "0",
        "DET_RESOURCES_ID": container.id,
        "DET_TENSORBOARD_SOURCES": json.dumps(tb.sources),
        "DET_PROXY_PATH": proxy_path(tb.id),
    }
    return v1.StartContainer(
        container_id=container.id,
        allocation_id=alloc.id,
        task_id=tb.id,
        argv=list(TASK_ENTRY),
        env=env,
        slot_ids=[],
        spec=v1.ContainerSpec(
            # In a container (docker runtime) the storage directories are where they are on
            # the host, as for trials; writable, since the task creates missing ones.
            bind_mounts=[
                v1.BindMount(host_path=path, container_path=path, read_only=False)
                for path in sorted(
                    {
                        str(s["storage"]["host_path"])
                        for s in tb.sources
                        if s["storage"].get("type") == "shared_fs"
                    }
                )
            ],
            labels={
                "ai.pydet.allocation": alloc.id,
                "ai.pydet.container": container.id,
                "ai.pydet.task": tb.id,
            },
        ),
    )
