"""Commands (`det cmd run`): a config's entrypoint run once in its context on the slots it
asked for; its output is its log and its exit code its result. ``Commands`` launches the
kinds this package runs (commands, notebooks, shells, and generic tasks in ``trees``)."""

from __future__ import annotations

from determined.api.gen import v1
from pydet.master.commands import notebooks, shells
from pydet.master.commands.generic_tasks import GenericTaskTrees
from pydet.master.commands.launcher import Launcher, shown, start_order
from pydet.master.tasks.generic import (
    UNCATEGORIZED_WORKSPACE,
    GenericTask,
    GenericTasks,
    Kind,
    TaskType,
)
from pydet.master.workspaces.organization import Organization


def to_proto(task: GenericTask) -> v1.Command:
    return v1.Command(**shown(task), exit_code=task.exit_code)


# How a kind's tasks are named when their config gives no description (Determined's).
_LABELS = {TaskType.COMMAND: "Command", TaskType.NOTEBOOK: "JupyterLab", TaskType.SHELL: "Shell"}


class Commands:
    def __init__(self, generic: GenericTasks, launcher: Launcher, org: Organization) -> None:
        self._generic = generic
        self._launcher = launcher
        self._org = org
        # Generic tasks (det task create), in their projects and trees.
        self.trees = GenericTaskTrees(generic, launcher, org)
        info = generic.info
        generic.register(
            TaskType.COMMAND,
            Kind(lambda task, alloc, agents: start_order(task, alloc, info, agents)),
        )
        notebooks.register(generic)
        shells.register(generic)

    async def make(
        self, task_type: TaskType, *, username: str, config: str, context: bytes, workspace_id: int
    ) -> GenericTask:
        """A new command, notebook or shell, checked (its pool must be available to its
        workspace); not yet stored or queued (a preview shows it as it is)."""
        cfg = self._launcher.parse(config, task_type)
        workspace = await self._org.workspaces.get(workspace_id or UNCATEGORIZED_WORKSPACE)
        await self._launcher.check_pool(cfg, (workspace.id, workspace.name))
        extra: dict[str, object] = (
            notebooks.new_extra()
            if task_type is TaskType.NOTEBOOK
            else shells.new_extra()
            if task_type is TaskType.SHELL
            else {}
        )
        if workspace_id:
            extra["workspace_id"] = workspace_id
        return self._launcher.build(
            task_type,
            username=username,
            cfg=cfg,
            context=context,
            label=_LABELS[task_type],
            extra=extra,
        )

    async def queue(self, task: GenericTask, context: bytes) -> GenericTask:
        """Store a task ``make`` made and queue it for its slots."""
        return await self._generic.create(task, context or None)
