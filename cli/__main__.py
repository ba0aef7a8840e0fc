"""`det`: the command-line parser and the one place where errors become exit codes.

Expected failures (`DetError`: a bad config, an unknown id, a master that is down) print one
`Error: ...` message and exit 1; usage mistakes exit 2 through argparse. Anything else is a
bug in pydet and keeps its traceback so that it gets reported rather than guessed at.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from determined import __version__
from determined.common import client, errors
from pydet.cli import (
    agent,
    auth,
    checkpoint,
    config_policies,
    deploy,
    experiment,
    job,
    master,
    model,
    project,
    rbac,
    resources,
    search,
    task,
    template,
    tensorboard,
    token,
    trial,
    user,
    user_group,
    webhook,
    workspace,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="det",
        description="Run and inspect experiments on a pydet (Determined-compatible) cluster.",
    )
    parser.add_argument(
        "-m",
        "--master",
        metavar="ADDRESS",
        help=f"master host:port (default: $DET_MASTER, else {client.DEFAULT_MASTER})",
    )
    parser.add_argument(
        "-u",
        "--user",
        metavar="NAME",
        help="run the command as this user (default: $DET_USER, else who logged in last)",
    )
    parser.add_argument("--version", action="version", version=f"det (pydet) {__version__}")
    nouns = parser.add_subparsers(dest="noun", metavar="COMMAND", required=True)
    for module in (
        experiment,
        trial,
        checkpoint,
        task,
        tensorboard,
        job,
        agent,
        resources,
        master,
        config_policies,
        deploy,
        search,
        user,
        user_group,
        token,
        rbac,
        webhook,
        template,
        workspace,
        project,
        model,
    ):
        module.add_parser(nouns)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    auth.select_user(args.user)
    try:
        code: int = args.func(args)
    except errors.DetError as e:
        sys.stdout.flush()
        print(f"Error: {e.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `det experiment list | head`: the reader left; silence the flush at exit too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
