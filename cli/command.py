"""`det command|cmd run|list|describe|config|logs|kill|set priority`: commands run as tasks on the
cluster (Determined's command names and flags). `det cmd run` streams the command's output
as it comes (its stdout to stdout, the rest to stderr) and exits with its exit code; it
makes its calls through ``quick`` (the light client), so that it costs little more than
the interpreter's start."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from determined.common import errors
from pydet.cli import Subparsers, ntsc

if TYPE_CHECKING:
    pass


API = ntsc.api_for("command")


def add_parser(nouns: Subparsers) -> None:
    verbs = ntsc.add_noun(nouns, API, "manage commands", ["cmd"])

    p = verbs.add_parser("run", help="run a command on the cluster and print its output")
    p.add_argument(
        "entrypoint",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="the command and its arguments",
    )
    ntsc.add_config_flags(p, "command")
    p.set_defaults(func=run)

    p = verbs.add_parser("describe", help="display a command's metadata")
    p.add_argument("command_id", metavar="COMMAND_ID")
    ntsc.add_format_flags(p)
    p.set_defaults(func=lambda args: ntsc.describe(args, API))
    ntsc.add_common_parsers(verbs, API)


def _config(text: str) -> dict[str, Any]:
    """``load_config``'s text as an object: JSON without the YAML parser when it is JSON."""
    if text.startswith("{"):
        found: dict[str, Any] = json.loads(text)
        return found
    from determined.common import expconf

    return expconf.load_yaml(text)


def run(args: argparse.Namespace) -> int:
    from determined.api import lite as v1
    from pydet.cli import quick

    entrypoint = args.entrypoint[1:] if args.entrypoint[:1] == ["--"] else args.entrypoint
    text = ntsc.load_config(args, entrypoint)
    if not text:
        raise errors.InvalidArgument("name the command to run: det cmd run COMMAND [ARGS...]")
    context = ntsc.context_of(args)
    with quick.Session(args.master) as s:
        s.login()
        workspace_id = 0
        if args.workspace_name:
            found = s.call(
                "get_workspaces", v1.GetWorkspacesRequest(name_case_sensitive=args.workspace_name)
            ).workspaces
            if not found:
                raise errors.NotFound(f"workspace {args.workspace_name!r} not found")
            workspace_id = ntsc.check_workspace(args.workspace_name, found[0])
        request = v1.LaunchCommandRequest(
            config=v1.struct_of(_config(text)),
            template_name=args.template or "",
            context=context,
            workspace_id=workspace_id,
        )
        cmd = s.call("launch_command", request).command
        if args.detach:
            print(cmd.id)
            return 0
        ntsc.launched("command", cmd.id, cmd.description)
        follow = v1.TaskLogsRequest(task_id=cmd.id, follow=True)
        for response in s.stream("task_logs", follow):
            for line in response.logs:
                out = sys.stdout if line.stdtype == "stdout" else sys.stderr
                out.write(line.message.rstrip("\r\n") + "\n")
            sys.stdout.flush()
            sys.stderr.flush()
        ended = s.call("get_command", v1.GetCommandRequest(command_id=cmd.id)).command
    if ended.exit_code is None:
        print(f"command {cmd.id} did not run: {ended.exit_status}", file=sys.stderr)
        return 1
    return int(ended.exit_code)
