"""`det resources|res` (Determined's resource-use history: allocations, raw, aggregated) and
`det resource-pool|rp list` (the pools the master config names)."""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import Any

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, listing, pool_bindings, render, rpc, trial

DAILY = "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY"
MONTHLY = "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_MONTHLY"


def add_parser(nouns: Subparsers) -> None:
    res = nouns.add_parser("resources", aliases=["res"], help="query the history of resource use")
    verbs = res.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    for name, aliases, what in (
        ("allocations", ["alloc"], "each allocation's slot time as CSV"),
        ("raw", [], "each allocation's slot time (CSV, or --json)"),
    ):
        p = verbs.add_parser(name, aliases=aliases, help=what)
        p.add_argument("timestamp_after", type=trial.rfc3339, metavar="AFTER", help="RFC 3339")
        p.add_argument("timestamp_before", type=trial.rfc3339, metavar="BEFORE", help="RFC 3339")
        if name == "raw":
            p.add_argument("--json", action="store_true", help="print JSON rather than CSV")
        p.set_defaults(func=raw, detailed=name == "allocations")
    p = verbs.add_parser("aggregated", aliases=["agg"], help="slot time per day or month")
    p.add_argument("start_date", type=_date, metavar="START", help="first day, YYYY-MM-DD")
    p.add_argument("end_date", type=_date, metavar="END", help="last day, YYYY-MM-DD")
    p.add_argument("--json", action="store_true", help="print JSON rather than CSV")
    p.add_argument("--monthly", action="store_true", help="per month rather than per day")
    p.set_defaults(func=aggregated)

    pool = nouns.add_parser("resource-pool", aliases=["rp"], help="list resource pools")
    verbs = pool.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("list", aliases=["ls"], help="list the resource pools")
    listing.add_format_flags(p)
    p.set_defaults(func=list_pools)
    pool_bindings.add_parsers(verbs)


def _date(text: str) -> str:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date such as 2024-06-30") from None
    return text


RAW_HEADERS = (
    "allocation_id",
    "task_id",
    "kind",
    "experiment_id",
    "username",
    "labels",
    "resource_pool",
    "slots",
    "start_time",
    "end_time",
    "seconds",
)


def _raw_row(e: v1.ResourceAllocationRawEntry) -> list[Any]:
    return [
        e.allocation_id,
        e.task_id,
        e.kind,
        e.experiment_id or "",
        e.username,
        ";".join(e.labels),
        e.resource_pool,
        e.slots,
        render.iso_utc(e.start_time),
        render.iso_utc(e.end_time) if e.end_time else "",
        f"{e.seconds:.3f}",
    ]


def raw(args: argparse.Namespace) -> int:
    req = v1.ResourceAllocationRawRequest(
        timestamp_after=args.timestamp_after, timestamp_before=args.timestamp_before
    )

    async def body(s: client.Session) -> list[v1.ResourceAllocationRawEntry]:
        return list((await s.call(s.stub.resource_allocation_raw(req))).resource_entries)

    entries = rpc.run(args.master, body)
    if getattr(args, "json", False):
        print(render.to_json([render.message_dict(e) for e in entries]))
        return 0
    headers = RAW_HEADERS if args.detailed else RAW_HEADERS[2:]
    rows = [_raw_row(e)[len(RAW_HEADERS) - len(headers) :] for e in entries]
    sys.stdout.write(render.csv(headers, rows))
    return 0


def aggregated(args: argparse.Namespace) -> int:
    if args.start_date > args.end_date:
        raise errors.InvalidArgument(f"START ({args.start_date}) is after END ({args.end_date})")
    req = v1.ResourceAllocationAggregatedRequest(
        start_date=args.start_date,
        end_date=args.end_date,
        period=MONTHLY if args.monthly else DAILY,
    )

    async def body(s: client.Session) -> list[v1.ResourceAllocationAggregatedEntry]:
        resp = await s.call(s.stub.resource_allocation_aggregated(req))
        return list(resp.resource_entries)

    entries = rpc.run(args.master, body)
    if args.json:
        print(render.to_json([render.message_dict(e) for e in entries]))
        return 0
    # One row per period and breakdown, as Determined's CSV: the totals, then each part.
    rows: list[list[Any]] = []
    for e in entries:
        rows.append([e.period_start, "total", "", f"{e.seconds:.3f}"])
        for kind, parts in (
            ("username", e.by_username),
            ("experiment_label", e.by_experiment_label),
            ("resource_pool", e.by_resource_pool),
            ("agent_label", e.by_agent_label),
        ):
            rows += [[e.period_start, kind, k, f"{v:.3f}"] for k, v in sorted(parts.items())]
    sys.stdout.write(render.csv(("period_start", "aggregation_type", "key", "seconds"), rows))
    return 0


POOL_HEADERS = ("Name", "Description", "Scheduler", "Fitting", "Agents", "Slots", "Default")


def list_pools(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> list[v1.ResourcePool]:
        req = v1.GetResourcePoolsRequest()
        return list((await s.call(s.stub.get_resource_pools(req))).resource_pools)

    pools = rpc.run(args.master, body)
    rows = [
        [
            p.name,
            p.description,
            render.state_name(p.scheduler_type).lower(),
            render.state_name(p.scheduler_fitting_policy).lower(),
            p.num_agents,
            f"{p.slots_used}/{p.slots_available}",
            p.default_compute_pool,
        ]
        for p in pools
    ]
    listing.show(args, POOL_HEADERS, rows, [render.message_dict(p) for p in pools])
    return 0
