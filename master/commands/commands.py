"""Commands (`det cmd run`): a config's entrypoint run once in its context on the slots it
asked for; its output is its log and its exit code its result."""

from __future__ import annotations

from determined.api.gen import v1
from pydet.master.commands.launcher import Launcher, start_order
from pydet.master.tasks.generic import GenericTask, GenericTasks, Kind, TaskType


def to_proto(task: GenericTask) -> v1.Command:
    return v1.Command(
        id=task.id,
        description=task.description,
        state=task.state,
        start_time=task.start_time,
        username=task.username,
        resource_pool=task.resource_pool,
        exit_status=task.exit_status,
        job_id=task.id,
        exit_code=task.exit_code,
        end_time=task.end_time or 0.0,
        priority=task.priority,
        slots=task.slots,
        allocation_id=task.allocation_id,
    )


class Commands:
    def __init__(self, generic: GenericTasks, launcher: Launcher) -> None:
        self._generic = generic
        self._launcher = launcher
        info = generic.info
        generic.register(
            TaskType.COMMAND,
            Kind(lambda task, alloc, agents: start_order(task, alloc, info, agents)),
        )

    async def launch(
        self, task_type: TaskType, *, username: str, config: str, context: bytes
    ) -> GenericTask:
        """Queue a new task of ``task_type`` (a command here; notebooks and shells below)."""
        cfg = self._launcher.parse(config, task_type)
        return await self._launcher.launch(
            task_type, username=username, cfg=cfg, context=context, label="Command"
        )
