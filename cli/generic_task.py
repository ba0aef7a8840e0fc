"""`det task create|fork|pause|unpause` (Determined's generic tasks): a config's entrypoint
run in its context, in a project, as a child of another task or forked from one; pausing
stops its process (and its children's) and keeps the task, unpausing starts it again.
`det task kill [--root]` and `det task config` reach them too (cli/task.py)."""

from __future__ import annotations

import argparse

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, config, ntsc, rpc


def add_parsers(verbs: Subparsers) -> None:
    p = verbs.add_parser("create", help="create a generic task from a config file")
    p.add_argument("config_file", metavar="CONFIG_FILE", help="task config file (.yaml)")
    ntsc.add_context_flags(p)
    p.add_argument("--project_id", type=int, help="place the task in this project")
    ntsc.add_override_flag(p)
    _follow_flag(p)
    p.add_argument("--fork", metavar="TASK_ID", help="start from this task's config and context")
    p.add_argument("-p", "--parent", metavar="TASK_ID", help="the task's parent task")
    p.add_argument(
        "--inherit_context",
        action="store_true",
        help="take the parent task's context directory (needs --parent)",
    )
    p.add_argument(
        "--no_pause", action="store_true", help="pausing the task (or its parent) leaves it running"
    )
    p.set_defaults(func=create)

    p = verbs.add_parser("fork", help="create a generic task from another's config and context")
    p.add_argument("parent_task_id", metavar="TASK_ID", help="the task to fork")
    _follow_flag(p)
    p.add_argument("--project_id", type=int, help="place the task in this project")
    p.set_defaults(func=fork)

    for verb, what in (
        ("pause", "stop a generic task's process (and its children's), keeping the task"),
        ("unpause", "start a paused generic task (and its paused children) again"),
    ):
        p = verbs.add_parser(verb, help=what)
        p.add_argument("task_id", metavar="TASK_ID")
        p.set_defaults(func=steer, action=verb)


def _follow_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-f", "--follow", action="store_true", help="follow the logs of the task that is created"
    )


def _config_text(args: argparse.Namespace) -> str:
    import yaml

    from determined.common import expconf

    data = expconf.load_yaml(config.read_text(args.config_file))
    try:
        overrides = [config.parse_override(text) for text in args.config_overrides]
    except argparse.ArgumentTypeError as e:
        raise errors.InvalidArgument(f"--config {e}") from None
    return yaml.safe_dump(config.apply_overrides(data, overrides), sort_keys=False)


def _created(args: argparse.Namespace, req: v1.CreateGenericTaskRequest) -> int:
    async def body(s: client.Session) -> str:
        return (await s.call(s.stub.create_generic_task(req))).task_id

    task_id = rpc.run(args.master, body)
    print(f"Created task {task_id}", flush=True)
    if args.follow:
        args.task_id = task_id
        args.follow = True
        try:
            ntsc.print_logs(args)
        finally:
            print(f"Task log stream ended. To reopen it: det task logs -f {task_id}")
    return 0


def create(args: argparse.Namespace) -> int:
    req = v1.CreateGenericTaskRequest(
        config=_config_text(args),
        context=ntsc.context_of(args),
        project_id=args.project_id,
        forked_from=args.fork,
        parent_id=args.parent,
        inherit_context=args.inherit_context,
        no_pause=args.no_pause,
    )
    return _created(args, req)


def fork(args: argparse.Namespace) -> int:
    req = v1.CreateGenericTaskRequest(project_id=args.project_id, forked_from=args.parent_task_id)
    return _created(args, req)


def steer(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        if args.action == "pause":
            await s.call(
                s.stub.pause_generic_task(v1.PauseGenericTaskRequest(task_id=args.task_id))
            )
        else:
            req = v1.UnpauseGenericTaskRequest(task_id=args.task_id)
            await s.call(s.stub.unpause_generic_task(req))

    rpc.run(args.master, body)
    print(f"{'Paused' if args.action == 'pause' else 'Unpaused'} task {args.task_id}")
    return 0
