"""`det job list|update|update-batch`: see and reorder the queue (Determined's job queue)."""

from __future__ import annotations

import argparse
from typing import Any

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, listing, render, rpc

HEADERS = (
    "#",
    "ID",
    "Type",
    "Job Name",
    "Priority",
    "Submitted",
    "Slots (acquired/needed)",
    "Status",
    "User",
)

# update-batch keys, as Determined spells them, to JobUpdate fields.
_BATCH_KEYS = {
    "priority": "priority",
    "weight": "weight",
    "resource-pool": "resource_pool",
    "ahead-of": "ahead_of",
    "behind-of": "behind_of",
}


def add_parser(nouns: Subparsers) -> None:
    job = nouns.add_parser("job", aliases=["j"], help="see and manage the job queue")
    verbs = job.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("list", aliases=["ls"], help="list the queue in scheduling order")
    p.add_argument(
        "-p", "--resource-pool", default="", metavar="POOL", help="default: the default pool"
    )
    listing.add_format_flags(p, yaml=True)
    listing.add_pagination(p, limit=100)
    p.add_argument("--reverse", action="store_true", help="the queue from its end")
    p.set_defaults(func=list_jobs)

    p = verbs.add_parser("update", help="change one job's place, priority, weight or pool")
    p.add_argument("job_id", metavar="JOB_ID")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--priority", type=int, metavar="N")
    group.add_argument("--weight", type=float, metavar="W")
    group.add_argument("--resource-pool", metavar="POOL")
    group.add_argument("--ahead-of", metavar="JOB_ID")
    group.add_argument("--behind-of", metavar="JOB_ID")
    p.set_defaults(func=update)

    p = verbs.add_parser("update-batch", help="apply several updates at once (all or nothing)")
    p.add_argument("updates", nargs="+", metavar="JOB.KEY=VALUE", type=parse_batch_item)
    p.set_defaults(func=update_batch)


def parse_batch_item(text: str) -> v1.JobUpdate:
    """`73853c5c.priority=1` -> JobUpdate(job_id="73853c5c", priority=1)."""
    target, eq, value = text.partition("=")
    job_id, dot, key = target.partition(".")
    if not (eq and dot and job_id and value) or key not in _BATCH_KEYS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected JOB_ID.KEY=VALUE with KEY one of {', '.join(_BATCH_KEYS)}"
        )
    field = _BATCH_KEYS[key]
    parsed: Any = value.strip('"')
    try:
        if field == "priority":
            parsed = int(value)
        elif field == "weight":
            parsed = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {key} must be a number") from None
    return v1.JobUpdate(job_id=job_id, **{field: parsed})


def job_row(i: int, j: v1.Job) -> list[Any]:
    return [
        i,
        j.job_id,
        j.type.proto_name,
        j.name,
        j.priority,
        render.local_time(j.submission_time),
        f"{j.allocated_slots}/{j.requested_slots}",
        j.summary.state.proto_name if j.summary is not None else "",
        j.username,
    ]


def list_jobs(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> list[v1.Job]:
        req = v1.GetJobsRequest(resource_pool=args.resource_pool)
        return list((await s.call(s.stub.get_jobs(req))).jobs)

    jobs = rpc.run(args.master, body)
    # The queue position stays each job's own when a page starts further down (or the
    # queue is read from its end).
    numbered = list(enumerate(jobs))
    shown = listing.page(numbered[::-1] if args.reverse else numbered, args)
    as_json = [render.message_dict(j) for _, j in shown]
    rows = [job_row(i, j) for i, j in shown]
    headers: tuple[str, ...] = HEADERS
    if any(j.note for _, j in shown):
        # A Slurm pool's pending reasons (and the like), only when some job has one.
        headers = (*HEADERS, "Note")
        rows = [[*row, j.note] for row, (_, j) in zip(rows, shown, strict=True)]
    listing.show(args, headers, rows, as_json)
    return 0


def _send(master: str | None, updates: list[v1.JobUpdate]) -> None:
    async def body(s: client.Session) -> None:
        await s.call(s.stub.update_job_queue(v1.UpdateJobQueueRequest(updates=updates)))

    rpc.run(master, body)


def update(args: argparse.Namespace) -> int:
    fields = ("priority", "weight", "resource_pool", "ahead_of", "behind_of")
    given = {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
    if not given:
        raise errors.InvalidArgument("nothing to update")
    _send(args.master, [v1.JobUpdate(job_id=args.job_id, **given)])
    return 0


def update_batch(args: argparse.Namespace) -> int:
    _send(args.master, list(args.updates))
    return 0
