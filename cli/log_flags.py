"""The flags every `logs` command takes (`det trial logs`, `det task logs`, `det cmd logs`,
...): follow, head or tail, and Determined's filters. Light to import: the quickest commands
build their parsers with it."""

from __future__ import annotations

import argparse
import datetime

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_log_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--head", type=int, metavar="N", help="only the first N lines")
    window.add_argument("--tail", type=int, metavar="N", help="only the last N lines")
    p.add_argument(
        "--rank-id",
        dest="rank_ids",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="only lines of this rank (repeatable)",
    )
    p.add_argument(
        "--level",
        type=str.upper,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help=f"only lines at this level or above ({', '.join(LOG_LEVELS)})",
    )
    p.add_argument("--search", metavar="TEXT", help="only lines containing TEXT")
    for flag, dest, what, metavar in (
        ("--allocation-id", "allocation_ids", "allocation", "ID"),
        ("--agent-id", "agent_ids", "agent", "ID"),
        ("--container-id", "container_ids", "container", "ID"),
        ("--stdtype", "stdtypes", "output stream (stdout, stderr)", "STREAM"),
        ("--source", "sources", "source (agent: the task's output, master: the master's)", "S"),
    ):
        p.add_argument(
            flag,
            dest=dest,
            action="append",
            default=[],
            metavar=metavar,
            help=f"only lines of this {what} (repeatable)",
        )
    for flag, when in (("--timestamp-before", "before"), ("--timestamp-after", "after")):
        p.add_argument(
            flag,
            type=rfc3339,
            metavar="TIME",
            help=f"only lines written {when} TIME (RFC 3339, e.g. 2021-10-26T23:17:12Z)",
        )


def rfc3339(text: str) -> float:
    """An RFC 3339 time (``2021-10-26T23:17:12Z``, or with an offset) as epoch seconds."""
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an RFC 3339 time such as 2021-10-26T23:17:12Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()
