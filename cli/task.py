"""`det task list|logs|config|kill|cleanup-logs`: the tasks the cluster holds (Determined's
allocation summaries), a task's logs, its config, stopping it, and deleting expired logs
now (and generic tasks' create, fork, pause and unpause: cli/generic_task.py). A trial's task
id is ``EXPERIMENT.TRIAL``; a TensorBoard's, command's, notebook's, shell's or generic
task's is a UUID."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

import yaml

from determined.api.gen import v1
from determined.common import client, errors, structs
from pydet.cli import Subparsers, generic_task, listing, ntsc, render, rpc, trial

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
    p.add_argument("--json", action="store_true", help="print each line as a JSON object")
    p.set_defaults(func=logs)

    p = verbs.add_parser("config", help="print a task's config (a trial's: its experiment's)")
    p.add_argument("task_id", metavar="TASK_ID")
    p.add_argument("--json", action="store_true", help="print JSON rather than YAML")
    p.set_defaults(func=config)

    p = verbs.add_parser(
        "kill", help="stop a task (a trial, TensorBoard, command, notebook or shell)"
    )
    p.add_argument("task_id", metavar="TASK_ID")
    p.add_argument(
        "--root", action="store_true", help="a generic task: kill its whole tree, from its root"
    )
    p.set_defaults(func=kill)
    generic_task.add_parsers(verbs)

    p = verbs.add_parser(
        "cleanup-logs", help="delete the task logs past their retention now (admins)"
    )
    p.set_defaults(func=cleanup_logs)


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


async def _trial_of_task(s: client.Session, task_id: str) -> v1.Trial:
    """The trial whose task ``task_id`` ("3.7") is; NotFound naming the task otherwise."""
    exp_id, trial_id = trial_of(task_id)
    try:
        found = await s.call(s.stub.get_trial(v1.GetTrialRequest(trial_id=trial_id)))
    except errors.NotFound:
        raise errors.NotFound(f"task {task_id} not found") from None
    t = rpc.present(found.trial, "trial")
    if t.experiment_id != exp_id:
        raise errors.NotFound(f"task {task_id} not found")
    return t


def logs(args: argparse.Namespace) -> int:
    if "." not in args.task_id:
        # Not a trial's task (a TensorBoard's, command's, notebook's or shell's): by task id.
        return ntsc.print_logs(args)

    async def body(s: client.Session) -> None:
        t = await _trial_of_task(s, args.task_id)
        await trial.print_logs(s, trial.logs_request(t.id, args), as_json=args.json)

    rpc.run(args.master, body)
    return 0


# The kinds of task that are not trials, besides TensorBoards (the modules of their nouns).
KINDS = ("command", "notebook", "shell")


async def _found(s: client.Session, task_id: str) -> tuple[ntsc.Api, str]:
    """The calls of the kind of task ``task_id`` is, and its config (JSON). An id of none of
    the other kinds is a TensorBoard's, or a TensorBoard not found."""
    from pydet.cli import tensorboard

    for noun in KINDS:
        api: ntsc.Api = importlib.import_module(f"pydet.cli.{noun}").API
        try:
            return api, (await api.get(s, task_id))[1]
        except errors.NotFound:
            continue
    return tensorboard.API, (await tensorboard.API.get(s, task_id))[1]


def config(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> dict[str, Any]:
        if "." in args.task_id:
            t = await _trial_of_task(s, args.task_id)
            req = v1.GetExperimentRequest(experiment_id=t.experiment_id)
            resp = await s.call(s.stub.get_experiment(req))
            return structs.python(resp.config)
        generic = await _generic_config(s, args.task_id)
        text = generic if generic is not None else (await _found(s, args.task_id))[1]
        stored: dict[str, Any] = json.loads(text or "{}")
        return stored

    found = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(found))
    else:
        sys.stdout.write(yaml.safe_dump(found, sort_keys=False, default_flow_style=False))
    return 0


async def _generic_config(s: client.Session, task_id: str) -> str | None:
    """A generic task's config (JSON); None when ``task_id`` is no generic task's."""
    try:
        req = v1.GetGenericTaskConfigRequest(task_id=task_id)
        return (await s.call(s.stub.get_generic_task_config(req))).config
    except errors.NotFound:
        return None


def kill(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        if "." in args.task_id:
            t = await _trial_of_task(s, args.task_id)
            if args.root:
                raise errors.InvalidArgument("--root: a trial's task has no tree of tasks")
            await s.call(s.stub.kill_trial(v1.KillTrialRequest(trial_id=t.id)))
            return
        if await _generic_config(s, args.task_id) is not None:
            req = v1.KillGenericTaskRequest(task_id=args.task_id, kill_from_root=args.root)
            await s.call(s.stub.kill_generic_task(req))
            return
        if args.root:
            raise errors.InvalidArgument(
                f"--root: task {args.task_id} is not a generic task (det task create), "
                "which alone have trees"
            )
        api, _ = await _found(s, args.task_id)
        await api.kill(s, args.task_id)

    rpc.run(args.master, body)
    print(f"Killed task {args.task_id}")
    return 0


def cleanup_logs(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> int:
        return (await s.call(s.stub.cleanup_logs(v1.CleanupLogsRequest()))).removed_count

    print(f"Deleted {rpc.run(args.master, body)} rows of log entries.")
    return 0
