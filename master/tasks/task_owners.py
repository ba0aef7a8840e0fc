"""The task manager's one owner, which hands each allocation to the owner of its kind of
task: a trial's to the experiments, any other (a TensorBoard's, a command's, a notebook's, a
shell's) to the generic tasks (``generic``)."""

from __future__ import annotations

from determined.api.gen import v1
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.manager import TaskOwner
from pydet.master.tasks.task_list import TaskRequest


class TaskOwners:
    def __init__(self, trials: TaskOwner, others: TaskOwner) -> None:
        self._trials = trials
        self._others = others

    def _of(self, trial_id: int | None) -> TaskOwner:
        return self._others if trial_id is None else self._trials

    async def allocation_placed(
        self, request: TaskRequest, allocation: Allocation
    ) -> list[v1.StartContainer]:
        return await self._of(request.trial_id).allocation_placed(request, allocation)

    async def allocation_started(self, allocation: Allocation) -> None:
        await self._of(allocation.trial_id).allocation_started(allocation)

    async def allocation_preempted(self, allocation: Allocation) -> None:
        await self._of(allocation.trial_id).allocation_preempted(allocation)

    async def allocation_exited(self, allocation: Allocation) -> None:
        await self._of(allocation.trial_id).allocation_exited(allocation)
