"""The flags list commands share, as Determined's CLI spells them: ``--json`` / ``--csv``
(and, where Determined has them, ``--yaml`` / ``--table``; one of them, a table otherwise)
and pagination (``--limit`` items a page, ``--offset``,
``--pages 1|all``: with ``all``, the default, every page is shown)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

import yaml

from pydet.cli import render

T = TypeVar("T")


def add_format_flags(p: argparse.ArgumentParser, *, yaml: bool = False) -> None:
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    fmt.add_argument("--json", action="store_true", help="print JSON")
    if yaml:
        fmt.add_argument("--yaml", action="store_true", help="print YAML")
        fmt.add_argument("--table", action="store_true", help="print a table (the default)")


def add_pagination(p: argparse.ArgumentParser, *, limit: int = 200) -> None:
    p.add_argument("--limit", type=_positive, default=limit, help="items per page of results")
    p.add_argument(
        "--offset", type=_not_negative, default=0, help="items to skip before the first page"
    )
    p.add_argument(
        "--pages",
        choices=("1", "all"),
        default="all",
        help="'all' shows every page; '1' only the first (at most --limit items)",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _not_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def page(items: Sequence[T], args: argparse.Namespace) -> list[T]:
    """The items the pagination flags select."""
    rest = list(items[args.offset :])
    return rest if args.pages == "all" else rest[: args.limit]


def show(
    args: argparse.Namespace,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    as_json: Any,
) -> None:
    """``as_json`` with --json (or as YAML with --yaml), the rows as CSV with --csv, else a
    table."""
    if getattr(args, "json", False):
        print(render.to_json(as_json))
    elif getattr(args, "yaml", False):
        sys.stdout.write(yaml.safe_dump(as_json, sort_keys=False, default_flow_style=False))
    elif getattr(args, "csv", False):
        sys.stdout.write(render.csv(headers, rows))
    else:
        print(render.table(headers, rows))
