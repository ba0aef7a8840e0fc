"""`det task list|logs`: the tasks the cluster holds (Determined's allocation summaries) and
a task's logs. A trial's task id is ``EXPERIMENT.TRIAL``; a TensorBoard's is a UUID."""

from __future__ import annotations

import argparse
from typing import Any

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, listing, render, rpc, trial

HEADERS = (
    "Task ID",
    "Allocation ID",
    "Name",
    "Slots Needed",
    "Registered Time",
    "Agent",
    "Priority",
    "Resource Pool",
)


def add_parser(nouns: Subparsers) -> None:
    task = nouns.add_parser("task", help="list tasks and show their logs")
    verbs = task.add_subparsers(dest="verb", metavar="COMMAND")
    task.set_defaults(func=list_tasks, csv=False, json=False)

    p = verbs.add_parser("list", aliases=["ls"], help="list the cluster's tasks")
    listing.add_format_flags(p)
    p.set_defaults(func=list_tasks)

    p = verbs.add_parser("logs", help="print a task's logs")
    p.add_argument("task_id", metavar="TASK_ID")
    trial.add_log_flags(p)
    p.set_defaults(func=logs)


def _agent(s: v1.AllocationSummary) -> str:
    agents = sorted({r.agent_id for r in s.resources})
    if not agents:
        return "unassigned"
    return agents[0] if len(agents) == 1 else ", ".join(agents)


def row(s: v1.AllocationSummary) -> list[Any]:
    return [
        s.task_id,
        s.allocation_id,
        s.name,
        s.slots_needed,
        render.local_time(s.registered_time),
        _agent(s),
        s.priority if s.scheduler_type == "priority" else "N/A",
        s.resource_pool,
    ]


def list_tasks(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> dict[str, v1.AllocationSummary]:
        resp = await s.call(s.stub.get_tasks(v1.GetTasksRequest()))
        return dict(resp.allocation_id_to_summary)

    tasks = rpc.run(args.master, body)
    rows = [row(t) for t in sorted(tasks.values(), key=lambda t: t.registered_time)]
    listing.show(args, HEADERS, rows, {k: render.message_dict(v) for k, v in tasks.items()})
    return 0


def trial_of(task_id: str) -> tuple[int, int]:
    """``(experiment_id, trial_id)`` of a trial's task id ``"3.7"``."""
    exp, dot, tid = task_id.partition(".")
    if not dot or not exp.isdigit() or not tid.isdigit():
        raise errors.NotFound(
            f"task {task_id} not found: pydet's tasks are trials, named EXPERIMENT.TRIAL "
            "(see `det task list`)"
        )
    return int(exp), int(tid)


def logs(args: argparse.Namespace) -> int:
    if "." not in args.task_id:
        # Not a trial's task (a TensorBoard's): its lines by task id.
        return print_task_logs(args.master, args.task_id, head=args.head, tail=args.tail)
    exp_id, trial_id = trial_of(args.task_id)

    async def body(s: client.Session) -> None:
        found = await s.call(s.stub.get_trial(v1.GetTrialRequest(trial_id=trial_id)))
        if rpc.present(found.trial, "trial").experiment_id != exp_id:
            raise errors.NotFound(f"task {args.task_id} not found")
        await trial.print_logs(s, trial.logs_request(trial_id, args))

    rpc.run(args.master, body)
    return 0


def print_task_logs(master: str | None, task_id: str, *, head: int | None, tail: int | None) -> int:
    """Print the lines of a task that is not a trial's (TaskLogs; no follow)."""
    request = v1.TaskLogsRequest(task_id=task_id, head=head or 0, tail=tail or 0)

    async def body(s: client.Session) -> list[v1.TaskLog]:
        return list((await s.call(s.stub.task_logs(request))).logs)

    for line in rpc.run(master, body):
        print(render.log_line(line))
    return 0
