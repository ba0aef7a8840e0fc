"""A command's, notebook's or shell's launch: its config checked and filled with the
master's defaults, its context kept, its task queued; and the start order of its container,
which runs the harness's launcher (``determined.exec.launch``, forked from the agent's
template on the process runtime) with the task's config."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from determined.api.gen import v1
from determined.common import context_archive, errors, expconf, timestamps
from pydet.master.agents.table import Agent
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.generic import GenericTask, Phase, TaskType, base_env
from pydet.master.tasks.task_spec import MasterInfo, spec_of, variables
from pydet.master.workspaces.pool_bindings import PoolBindings

# What every such task's container runs (determined.exec.launch picks the work by
# DET_TASK_TYPE); the process runtime forks it from its launcher template.
TASK_ENTRY = ["python3", "-m", "determined.exec.launch"]
# The task's config (JSON), and "1" when it was launched with a context to download.
CONFIG_ENV = "DET_TASK_CONFIG"
CONTEXT_ENV = "DET_TASK_CONTEXT"
# The kinds whose config must have an entrypoint (notebooks and shells run their own).
_RUNS_ENTRYPOINT = (TaskType.COMMAND, TaskType.GENERIC)
# Where tasks go that name no workspace: Determined's "Uncategorized" (id 1).
DEFAULT_WORKSPACE = (1, "Uncategorized")
# Three words, as Determined names its tasks ("Command (adjective-noun-word)").
_WORDS = (
    ("brave", "calm", "eager", "fancy", "gentle", "happy", "jolly", "keen", "lively", "merry"),
    ("amber", "azure", "coral", "golden", "indigo", "ivory", "olive", "ruby", "silver", "teal"),
    ("badger", "crane", "falcon", "gecko", "heron", "lynx", "otter", "panda", "raven", "wren"),
)


def pet_name(task_id: str) -> str:
    """Three words from the task's id: a name to tell tasks apart by."""
    n = int(task_id.replace("-", "")[:8], 16)
    words = []
    for choices in _WORDS:
        n, i = divmod(n, len(choices))
        words.append(choices[i])
    return "-".join(words)


class Launcher:
    """Checks launch requests and makes their tasks (``Commands`` queues them)."""

    def __init__(self, info: MasterInfo, bindings: PoolBindings | None = None) -> None:
        self._info = info
        self._bindings = bindings

    def parse(self, text: str, task_type: TaskType) -> expconf.CommandConfig:
        """The config ``text`` over the master's defaults (pool, and slots)."""
        raw = expconf.load_yaml(text) if text.strip() else {}
        defaults = {
            **self._info.task_defaults,
            "resources": {"resource_pool": self._info.default_pool},
        }
        cfg = expconf.parse_command_config(raw, defaults, entrypoint=task_type in _RUNS_ENTRYPOINT)
        pool = cfg.resources.resource_pool
        if pool not in self._info.pools:
            raise errors.InvalidArgument(
                f"resources.resource_pool: no resource pool named {pool!r} (pools: "
                f"{', '.join(self._info.pools)})"
            )
        return cfg

    async def check_pool(
        self, cfg: expconf.CommandConfig, workspace: tuple[int, str] = DEFAULT_WORKSPACE
    ) -> None:
        """The config's pool must be available to ``workspace`` (id, name), the one the task
        is launched into (``workspaces.pool_bindings``)."""
        if self._bindings is not None:
            await self._bindings.check(
                cfg.resources.resource_pool, *workspace, field="resources.resource_pool"
            )

    def build(
        self,
        task_type: TaskType,
        *,
        username: str,
        cfg: expconf.CommandConfig,
        context: bytes,
        label: str,
        extra: Mapping[str, Any] | None = None,
    ) -> GenericTask:
        """The task a launch makes, checked, not yet stored or queued (what a preview
        shows). Its pool is checked by ``check_pool``."""
        if context:
            try:
                # Unpacked size and entry count too: a small archive may unpack to gigabytes.
                context_archive.check_context(context)
            except context_archive.InvalidContext:
                raise
            except Exception as e:
                raise errors.InvalidArgument(f"the context is not a valid archive: {e}") from None
        declared = []
        for i, port in enumerate(cfg.environment.proxy_ports):
            if port.unauthenticated:
                raise errors.InvalidArgument(
                    f"environment.proxy_ports[{i}].unauthenticated: pydet's proxy always asks "
                    "for the owner's (or an admin's) session; leave it out"
                )
            declared.append({"port": port.proxy_port, "tcp": port.proxy_tcp})
        task_id = str(uuid.uuid4())
        config = cfg.to_dict()
        config["description"] = cfg.description or f"{label} ({pet_name(task_id)})"
        task = GenericTask(
            id=task_id,
            task_type=task_type,
            username=username,
            description=config["description"],
            resource_pool=cfg.resources.resource_pool,
            slots=cfg.slots,
            priority=cfg.resources.priority or 42,
            phase=Phase.QUEUED,
            start_time=time.time(),
            config=config,
            extra={**(extra or {}), "proxy_ports": declared},
        )
        return task


def shown(task: GenericTask) -> dict[str, Any]:
    """What the Command, Notebook and Shell messages show alike of a task."""
    return {
        "id": task.id,
        "description": task.description,
        "state": v1.TensorboardState[task.phase.value],
        "start_time": timestamps.to_datetime(task.start_time),
        "username": task.username,
        "display_name": task.username,
        "resource_pool": task.resource_pool,
        "exit_status": task.exit_status,
        "job_id": task.id,
        "end_time": timestamps.to_datetime(task.end_time or None),
        "priority": task.priority,
        "slots": task.slots,
        "allocation_id": task.allocation_id,
        "workspace_id": task.workspace_id,
    }


def start_order(
    task: GenericTask,
    alloc: Allocation,
    info: MasterInfo,
    agents: Mapping[str, Agent],
    env: Mapping[str, str] | None = None,
) -> v1.StartContainer:
    """The start order of the task's one container, with ``env`` on top of its own."""
    (container,) = alloc.containers.values()
    agent = agents[container.agent_id]
    cfg = expconf.parse_command_config(task.config)
    cuda = any(agent.slots[s].type == "cuda" for s in container.slot_ids if s in agent.slots)
    task_env = {
        **base_env(task, alloc, info, agent),
        CONFIG_ENV: json.dumps(task.config),
        **({CONTEXT_ENV: "1"} if task.has_context else {}),
        **variables(cfg.environment, cuda=cuda),
        **(env or {}),
    }
    return v1.StartContainer(
        container_id=container.id,
        allocation_id=alloc.id,
        task_id=task.id,
        argv=list(TASK_ENTRY),
        env=task_env,
        slot_ids=list(container.slot_ids),
        spec=spec_of(cfg, alloc, container.id, task.id, cuda=cuda),
    )
