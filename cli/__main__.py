"""`det`: the command-line parser and the one place where errors become exit codes.

Expected failures (`DetError`: a bad config, an unknown id, a master that is down) print one
`Error: ...` message and exit 1; usage mistakes exit 2 through argparse. Anything else is a
bug in pydet and keeps its traceback so that it gets reported rather than guessed at.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from determined import __version__
from determined.common import client, errors
from pydet.cli import auth

# Each module that adds nouns, in `det --help`'s order, with the names (and aliases) it adds.
# A command line that names one loads only that module: `det cmd run` need not import what
# `det experiment` uses.
NOUNS = (
    ("experiment", ("experiment", "e")),
    ("trial", ("trial", "t")),
    ("checkpoint", ("checkpoint", "c")),
    ("task", ("task",)),
    ("command", ("command", "cmd")),
    ("notebook", ("notebook",)),
    ("shell", ("shell",)),
    ("tensorboard", ("tensorboard",)),
    ("job", ("job", "j")),
    ("agent", ("agent", "a", "slot", "s")),
    ("resources", ("resources", "res", "resource-pool", "rp")),
    ("master", ("master", "version")),
    ("config_policies", ("config-policies", "cp")),
    ("deploy", ("deploy",)),
    ("search", ("preview-search",)),
    ("user", ("user", "u")),
    ("user_group", ("user-group",)),
    ("token", ("token", "tkn")),
    ("rbac", ("rbac",)),
    ("webhook", ("webhook",)),
    ("template", ("template", "tpl")),
    ("workspace", ("workspace", "w")),
    ("project", ("project", "p")),
    ("model", ("model", "m")),
)
# Global options that take a value (the noun is the first word after them).
_VALUED = frozenset({"-m", "--master", "-u", "--user"})


def _noun(argv: Sequence[str]) -> str | None:
    """The noun a command line names, if it names a known one."""
    words = iter(argv)
    for word in words:
        if word in _VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return word if any(word in names for _, names in NOUNS) else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given ``argv`` that names a noun, only that noun's part of it."""
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
    wanted = None if argv is None else _noun(argv)
    for module_name, names in NOUNS:
        if wanted is None or wanted in names:
            importlib.import_module(f"pydet.cli.{module_name}").add_parser(nouns)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(name)s: %(message)s")
    words = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(words).parse_args(words)
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
