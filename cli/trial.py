"""`det trial|t`: describe a trial, stream its logs, kill it.

The log streaming here is shared with `det experiment logs` and `create --follow-first-trial`.
"""

from __future__ import annotations

import argparse
import datetime
import sys

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, checkpoint, listing, render, rpc

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_parser(nouns: Subparsers) -> None:
    trial = nouns.add_parser("trial", aliases=["t"], help="inspect and control trials")
    verbs = trial.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    p = verbs.add_parser("describe", help="show a trial and its metrics")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    listing.add_format_flags(p)
    listing.add_pagination(p, limit=1000)
    p.set_defaults(func=describe)

    p = verbs.add_parser("logs", help="print a trial's logs")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    add_log_flags(p)
    p.set_defaults(func=logs)

    p = verbs.add_parser("download", help="download one of a trial's checkpoints")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--best", action="store_true", help="the best by the searcher metric")
    which.add_argument("--latest", action="store_true", help="the most recent")
    which.add_argument("--uuid", metavar="UUID", help="this one")
    checkpoint.add_download_flags(p)
    p.set_defaults(func=download)

    p = verbs.add_parser("kill", help="kill a trial")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    p.set_defaults(func=kill)


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
    for flag, dest, what in (
        ("--allocation-id", "allocation_ids", "allocation"),
        ("--agent-id", "agent_ids", "agent"),
        ("--container-id", "container_ids", "container"),
        ("--stdtype", "stdtypes", "output stream (stdout, stderr)"),
    ):
        p.add_argument(
            flag,
            dest=dest,
            action="append",
            default=[],
            metavar="ID" if flag != "--stdtype" else "STREAM",
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


def logs_request(trial_id: int, args: argparse.Namespace) -> v1.TrialLogsRequest:
    return v1.TrialLogsRequest(
        trial_id=trial_id,
        follow=args.follow,
        head=args.head or 0,
        tail=args.tail or 0,
        rank_ids=list(args.rank_ids),
        min_level=args.level or "",
        search=args.search or "",
        allocation_ids=list(args.allocation_ids),
        agent_ids=list(args.agent_ids),
        container_ids=list(args.container_ids),
        stdtypes=list(args.stdtypes),
        timestamp_before=args.timestamp_before,
        timestamp_after=args.timestamp_after,
    )


async def print_logs(session: client.Session, request: v1.TrialLogsRequest) -> None:
    """Print log lines as they arrive; flushed so that piping to `grep` or `tee` is live."""
    async for response in rpc.stream(session, session.stub.trial_logs(request)):
        for log in response.logs:
            sys.stdout.write(render.log_line(log) + "\n")
        sys.stdout.flush()


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> tuple[v1.Trial, list[v1.MetricReport]]:
        trial = await s.call(s.stub.get_trial(v1.GetTrialRequest(trial_id=args.trial_id)))
        metrics = await s.call(
            s.stub.get_trial_metrics(v1.GetTrialMetricsRequest(trial_id=args.trial_id))
        )
        return rpc.present(trial.trial, "trial"), list(metrics.reports)

    trial, reports = rpc.run(args.master, body)
    reports = listing.page(reports, args)
    if args.json:
        out = render.message_dict(trial)
        out["metrics"] = [render.message_dict(r) for r in reports]
        print(render.to_json(out))
        return 0
    headers = (
        "Trial ID",
        "Experiment ID",
        "State",
        "H-Params",
        "Steps",
        "Restarts",
        "Best Validation",
        "Latest Checkpoint",
        "Warm Start Checkpoint",
        "Start",
        "End",
    )
    row = [
        trial.id,
        trial.experiment_id,
        render.state_name(trial.state),
        render.compact_json(trial.hparams),
        trial.steps_completed,
        trial.restarts,
        render.optional_number(trial.best_validation_metric),
        trial.latest_checkpoint_uuid or "",
        trial.warm_start_checkpoint_uuid or "",
        render.local_time(trial.start_time),
        render.local_time(trial.end_time),
    ]
    if args.csv:
        sys.stdout.write(render.csv(headers, [row]))
        return 0
    print(render.table(headers, [row]))
    if reports:
        print("\nMetrics:")
        print(render.table(render.METRIC_HEADERS, map(render.metric_row, reports)))
    return 0


def logs(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        await print_logs(s, logs_request(args.trial_id, args))

    rpc.run(args.master, body)
    return 0


def download(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Checkpoint:
        if args.uuid:
            return await checkpoint.get(s, args.uuid)
        t = rpc.present(
            (await s.call(s.stub.get_trial(v1.GetTrialRequest(trial_id=args.trial_id)))).trial,
            "trial",
        )
        exp, found = await checkpoint.experiment_checkpoints(s, t.experiment_id, trial_id=t.id)
        if args.best:
            chosen = checkpoint.ranked(found, smaller_is_better=exp.smaller_is_better)
        else:
            chosen = sorted(found, key=lambda c: (c.steps_completed, c.report_time), reverse=True)
        if not chosen:
            what = "with a searcher metric" if args.best else "left"
            raise errors.NotFound(f"trial {args.trial_id} has no checkpoint {what}")
        return chosen[0]

    c = rpc.run(args.master, body)
    if c.trial_id != args.trial_id:
        raise errors.InvalidArgument(
            f"checkpoint {c.uuid} is of trial {c.trial_id}, not {args.trial_id}"
        )
    checkpoint.fetch_files(c, args.output_dir, quiet=args.quiet, mode=args.mode)
    return 0


def kill(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        await s.call(s.stub.kill_trial(v1.KillTrialRequest(trial_id=args.trial_id)))

    rpc.run(args.master, body)
    print(f"Killed trial {args.trial_id}")
    return 0
