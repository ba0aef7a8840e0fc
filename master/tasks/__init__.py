"""Tasks: the units the scheduler places on slots, whatever they run.

- ``task_list``: requests waiting for slots and live allocations, and the orders the
  master gives an allocation; ``allocation``: one run of a task on its slots.
- ``manager``: scheduling passes (through ``scheduler``), allocations started on agents,
  what agents report about containers; ``running_views``: what a pass sees.
- ``task_spec``: the DET_* environment and container spec a task starts with;
  ``task_owners``: which subsystem owns each allocation; ``task_summaries``:
  `det task list`.
- ``generic``: the tasks that are not trials (TensorBoards, commands, notebooks, shells):
  their phases, record, job, proxy target, idle timeouts and restore;
  ``tensorboards``: the TensorBoard kind of them.

May use: ``agents``, ``scheduler``, ``logs``, ``checkpoint_storage``, ``queries``,
``store``. Not ``experiments``: the experiments own their trials' tasks through
``TaskOwner``, from above.
"""
