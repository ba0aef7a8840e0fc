"""The task manager's one owner, which hands each allocation to the owner of its kind of
task: a trial's to the experiments, any other (a TensorBoard's, a command's, a notebook's, a
shell's) to the generic tasks (``generic``); the start orders it gets back carry the
identity the task runs as on its agent."""

from __future__ import annotations

from determined.api.gen import v1
from pydet.master import queries
from pydet.master.store.db import Database
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.manager import TaskOwner
from pydet.master.tasks.task_list import TaskRequest


class TaskOwners:
    def __init__(self, trials: TaskOwner, others: TaskOwner, db: Database | None = None) -> None:
        self._trials = trials
        self._others = others
        # Where the identity each task runs as is read (its workspace's or owner's agent
        # user and group); None: every task runs as its agent.
        self._db = db

    def _of(self, trial_id: int | None) -> TaskOwner:
        return self._others if trial_id is None else self._trials

    async def allocation_placed(
        self, request: TaskRequest, allocation: Allocation
    ) -> list[v1.StartContainer]:
        orders = await self._of(request.trial_id).allocation_placed(request, allocation)
        if self._db is not None:
            found = await queries.task_identity(self._db, request.trial_id, request.task_id)
            if found is not None:
                uid, gid, user, group = found
                for order in orders:
                    order.run_as = v1.RunAs(uid=uid, gid=gid, user=user, group=group)
        return orders

    async def allocation_started(self, allocation: Allocation) -> None:
        await self._of(allocation.trial_id).allocation_started(allocation)

    async def allocation_preempted(self, allocation: Allocation) -> None:
        await self._of(allocation.trial_id).allocation_preempted(allocation)

    async def allocation_exited(self, allocation: Allocation) -> None:
        await self._of(allocation.trial_id).allocation_exited(allocation)
