"""TensorBoard tasks (Determined's TASK_TYPE_TENSORBOARD): a TensorBoard over the files some
trials uploaded to their experiment's ``tensorboard_storage`` (or checkpoint storage), run on
an agent with no slot and reached through the gateway's ``/proxy/<id>/``.

A TensorBoard is one kind of ``generic`` task (its phases, its job in the queue, its proxy
target and its survival of a master restart are theirs); this module says what it shows
(its trials' sources) and what its task runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
import uuid
from collections.abc import Mapping
from typing import Any

from determined.api.gen import v1
from determined.common import context_archive, errors, expconf, timestamps
from determined.core._tensorboard import storage_config, sync_path
from pydet.master import queries
from pydet.master.agents.table import Agent
from pydet.master.checkpoint_storage import s3, shared_fs
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.generic import (
    GenericTask,
    GenericTasks,
    Kind,
    Phase,
    TaskType,
    base_env,
    proxy_path,
)
from pydet.master.tasks.task_spec import MasterInfo, spec_of, variables

log = logging.getLogger(__name__)

# Determined loads at most 100 trials into one TensorBoard.
MAX_TRIALS = 100
TASK_ENTRY = ["python3", "-m", "determined.exec.tensorboard"]
# "1" when it was launched with a context (its working directory's files) to download.
CONTEXT_ENV = "DET_TASK_CONTEXT"
_READABLE_STORAGES = ("shared_fs", "directory", "s3")


def to_proto(tb: GenericTask) -> v1.Tensorboard:
    return v1.Tensorboard(
        id=tb.id,
        description=tb.description,
        state=v1.TensorboardState[tb.phase.value],
        start_time=timestamps.to_datetime(tb.start_time),
        experiment_ids=list(tb.extra.get("experiment_ids", [])),
        trial_ids=list(tb.extra.get("trial_ids", [])),
        username=tb.username,
        service_address=proxy_path(tb.id),
        resource_pool=tb.resource_pool,
        exit_status=tb.exit_status,
        job_id=tb.id,
        allocation_id=tb.allocation_id,
        priority=tb.priority,
        workspace_id=tb.workspace_id,
    )


class Tensorboards:
    """The TensorBoards: launched over trials' files, run as generic tasks."""

    def __init__(self, db: Database, generic: GenericTasks, info: MasterInfo) -> None:
        self._db = db
        self._generic = generic
        self._info = info
        generic.register(
            TaskType.TENSORBOARD,
            Kind(lambda tb, alloc, agents: start_order(tb, alloc, info, agents), ports=1),
        )

    async def launch(
        self,
        *,
        username: str,
        experiment_ids: list[int],
        trial_ids: list[int],
        config: str = "",
        context: bytes = b"",
        workspace_id: int = 0,
    ) -> GenericTask:
        """Queue a TensorBoard over the trials' files, with what ``config`` (a command
        config: description, resources, environment, bind_mounts) and ``context`` (its
        working directory's files) ask for."""
        if not experiment_ids and not trial_ids:
            raise errors.InvalidArgument(
                "experiment_ids, trial_ids: name at least one experiment or trial"
            )
        raw = expconf.load_yaml(config) if config.strip() else {}
        defaults = {"resources": {"resource_pool": self._info.default_pool}}
        cfg = expconf.parse_command_config(raw, defaults, entrypoint=False)
        pool = cfg.resources.resource_pool
        if pool not in self._info.pools:
            raise errors.InvalidArgument(
                f"resources.resource_pool: no resource pool named {pool!r}"
            )
        if context:
            context_archive.check_context(context)
        sources = await self._sources(experiment_ids, trial_ids)
        tb_id = str(uuid.uuid4())
        filled = cfg.to_dict()
        filled["description"] = cfg.description or f"TensorBoard ({tb_id[:8]})"
        tb = GenericTask(
            id=tb_id,
            task_type=TaskType.TENSORBOARD,
            username=username,
            description=filled["description"],
            resource_pool=pool,
            slots=0,
            priority=cfg.resources.priority or 42,
            phase=Phase.QUEUED,
            start_time=time.time(),
            config=filled,
            extra={
                "experiment_ids": sorted(set(experiment_ids)),
                "trial_ids": sorted({s["trial_id"] for s in sources}),
                "sources": sources,
                **({"workspace_id": workspace_id} if workspace_id else {}),
            },
        )
        return await self._generic.create(tb, context or None)

    def live(self) -> list[GenericTask]:
        return self._generic.live(TaskType.TENSORBOARD)

    async def get(self, tensorboard_id: str) -> GenericTask:
        return await self._generic.get(tensorboard_id, TaskType.TENSORBOARD)

    async def kill(self, tensorboard_id: str) -> GenericTask:
        return await self._generic.kill(tensorboard_id, TaskType.TENSORBOARD)

    async def set_priority(self, tensorboard_id: str, priority: int) -> GenericTask:
        """`det tensorboard set priority`: the scheduler reads it at its next pass."""
        return await self._generic.set_priority(tensorboard_id, priority, TaskType.TENSORBOARD)

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


def start_order(
    tb: GenericTask, alloc: Allocation, info: MasterInfo, agents: Mapping[str, Agent]
) -> v1.StartContainer:
    (container,) = alloc.containers.values()
    sources = tb.extra.get("sources", [])
    cfg = expconf.parse_command_config(tb.config, entrypoint=False)
    env = {
        **base_env(tb, alloc, info, agents[container.agent_id]),
        **variables(cfg.environment, cuda=False),
        "DET_TENSORBOARD_SOURCES": json.dumps(sources),
        **({CONTEXT_ENV: "1"} if tb.has_context else {}),
    }
    spec = spec_of(cfg, alloc, container.id, tb.id, cuda=False)
    # In a container (docker runtime) the storage directories are where they are on the
    # host, as for trials; writable, since the task creates missing ones.
    spec.bind_mounts += [
        v1.BindMount(host_path=path, container_path=path, read_only=False)
        for path in sorted(
            {
                str(s["storage"]["host_path"])
                for s in sources
                if s["storage"].get("type") == "shared_fs"
            }
        )
    ]
    return v1.StartContainer(
        container_id=container.id,
        allocation_id=alloc.id,
        task_id=tb.id,
        argv=list(TASK_ENTRY),
        env=env,
        slot_ids=[],
        spec=spec,
    )
