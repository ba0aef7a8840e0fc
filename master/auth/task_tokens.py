"""Task tokens: a live allocation's token stands for that allocation's task, scoped to its
trial and experiment. The token stops working the moment the allocation ends."""

from __future__ import annotations

from pydet.master.auth.callers import TaskCaller
from pydet.master.experiments.live import LiveExperiments
from pydet.master.tasks.task_list import TaskList


class LiveTaskTokens:
    def __init__(self, tasks: TaskList, live: LiveExperiments) -> None:
        self._tasks = tasks
        self._live = live

    def task_caller(self, token: str) -> TaskCaller | None:
        alloc = self._tasks.by_token(token)
        if alloc is None:
            return None
        if alloc.trial_id is None:
            # A task of no trial (a TensorBoard): its own allocation only; no trial or
            # experiment has id 0.
            return TaskCaller(
                allocation_id=alloc.id,
                task_id=alloc.task_id,
                trial_id=0,
                experiment_id=0,
                start_checkpoint="",
            )
        found = self._live.trial(alloc.trial_id)
        if found is None:
            return None
        exp, trial = found
        return TaskCaller(
            allocation_id=alloc.id,
            task_id=alloc.task_id,
            trial_id=trial.id,
            experiment_id=exp.id,
            start_checkpoint=exp.source_checkpoint or "",
        )
