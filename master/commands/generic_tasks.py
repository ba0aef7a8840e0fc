"""Generic tasks (`det task create|fork|pause|unpause|kill`, Determined's generic tasks): a
config's entrypoint run in its context like a command's, placed in a project (whose
workspace's pool bindings apply), and held in trees: a task may name a parent, pausing a
task pauses its children (but those created with ``no_pause``), unpausing resumes them, and
killing one kills its children (or, with ``root``, its whole tree).

A task is forked from another by starting from that one's config (the new config over it)
and context (when it brings none); it inherits its parent's context on request. Pausing
stops the task's process (its preemption signal, then a kill after ``preemption_timeout``
seconds) and keeps the task; unpausing queues it again and a new allocation runs its
entrypoint anew (code that must go on where it stopped checkpoints, as trials do).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from determined.common import errors, expconf
from pydet.master.commands.launcher import Launcher, start_order
from pydet.master.tasks.generic import GenericTask, GenericTasks, Kind, Phase, TaskType
from pydet.master.workspaces.organization import Organization
from pydet.master.workspaces.workspaces import DEFAULT_ID

GENERIC = TaskType.GENERIC


@dataclass(frozen=True)
class NewTask:
    """What `det task create` (or fork) asks for."""

    config: str
    context: bytes = b""
    project_id: int | None = None
    forked_from: str = ""
    parent_id: str = ""
    inherit_context: bool = False
    no_pause: bool = False


def _preemption_timeout(raw: dict[str, Any]) -> int | None:
    value = raw.pop("preemption_timeout", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise errors.InvalidArgument(
            f"preemption_timeout: expected a number of seconds >= 0, got {value!r}"
        )
    return value


class GenericTaskTrees:
    def __init__(self, generic: GenericTasks, launcher: Launcher, org: Organization) -> None:
        self._generic = generic
        self._launcher = launcher
        self._org = org
        info = generic.info
        generic.register(
            GENERIC, Kind(lambda task, alloc, agents: start_order(task, alloc, info, agents))
        )

    async def get(self, task_id: str) -> GenericTask:
        return await self._generic.get(task_id, GENERIC)

    async def create(self, req: NewTask, *, username: str) -> GenericTask:
        raw: dict[str, Any] = expconf.load_yaml(req.config) if req.config.strip() else {}
        context = req.context
        if req.forked_from:
            forked = await self.get(req.forked_from)
            # Its config under the new one; its name is its own.
            under = {k: v for k, v in shown_config(forked).items() if k != "description"}
            raw = expconf.merge_defaults(raw, under)
            if not context:
                context = await self._generic.context(forked.id)
        if not raw:
            raise errors.InvalidArgument(
                "config: give a task config (CONFIG_FILE) or a task to fork from (--fork)"
            )
        if req.inherit_context and not req.parent_id:
            raise errors.InvalidArgument("inherit_context: needs the parent task (-p/--parent)")
        if req.parent_id:
            parent = await self.get(req.parent_id)
            if req.inherit_context:
                context = await self._generic.context(parent.id)
        timeout = _preemption_timeout(raw)
        project = await self._org.projects.get(
            DEFAULT_ID if req.project_id is None else req.project_id
        )
        await self._org.placements.checked(project)  # it takes new work
        cfg = self._launcher.parse(json.dumps(raw), GENERIC)
        await self._launcher.check_pool(cfg, (project.workspace_id, project.workspace_name))
        task = self._launcher.build(
            GENERIC,
            username=username,
            cfg=cfg,
            context=context,
            label="Generic Task",
            extra={
                "project_id": project.id,
                "workspace_id": project.workspace_id,
                "parent_id": req.parent_id,
                "forked_from": req.forked_from,
                "no_pause": req.no_pause,
                **({} if timeout is None else {"preemption_timeout": timeout}),
            },
        )
        return await self._generic.create(task, context or None)

    # -- trees -------------------------------------------------------------------------------

    def _children(self, task_id: str) -> list[GenericTask]:
        """The live tasks below ``task_id``, parents before their children."""
        live = self._generic.live(GENERIC)
        found: list[GenericTask] = []
        frontier = [task_id]
        while frontier:
            below = [t for t in live if t.extra.get("parent_id") in frontier]
            found += below
            frontier = [t.id for t in below]
        return found

    async def _root(self, task: GenericTask) -> GenericTask:
        seen = {task.id}
        while parent_id := str(task.extra.get("parent_id") or ""):
            if parent_id in seen:
                break
            seen.add(parent_id)
            try:
                task = await self.get(parent_id)
            except errors.NotFound:
                break
        return task

    async def kill(self, task_id: str, *, from_root: bool = False) -> None:
        task = await self.get(task_id)
        if task.phase is Phase.TERMINATED and not from_root:
            raise errors.FailedPrecondition(
                f"task {task.id} has ended ({task.exit_status}); there is nothing to kill"
            )
        if from_root:
            task = await self._root(task)
        for t in [task, *self._children(task.id)]:
            await self._generic.kill(t.id, GENERIC)

    async def pause(self, task_id: str) -> None:
        task = await self.get(task_id)
        if task.extra.get("no_pause"):
            raise errors.FailedPrecondition(
                f"task {task.id} was created with no_pause and cannot be paused"
            )
        if task.phase not in (Phase.QUEUED, Phase.STARTING, Phase.RUNNING):
            raise errors.FailedPrecondition(
                f"task {task.id} is {task.phase.value.lower()} and cannot be paused"
            )
        await self._generic.pause(task)
        for child in self._children(task.id):
            if not child.extra.get("no_pause") and child.phase in (
                Phase.QUEUED,
                Phase.STARTING,
                Phase.RUNNING,
            ):
                await self._generic.pause(child)

    async def unpause(self, task_id: str) -> None:
        task = await self.get(task_id)
        await self._generic.unpause(task)
        for child in self._children(task.id):
            if child.phase is Phase.PAUSED:
                await self._generic.unpause(child)


def shown_config(task: GenericTask) -> dict[str, Any]:
    """A generic task's config as `det task config` shows it (with its preemption_timeout,
    which is kept beside the command config its container is started from)."""
    timeout = task.extra.get("preemption_timeout")
    return {**task.config, **({} if timeout is None else {"preemption_timeout": timeout})}
