"""`det trial|t`: describe a trial, stream its logs, kill it.

The log streaming here is shared with `det experiment logs` and `create --follow-first-trial`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from determined.api.gen import v1
from determined.common import checkpoint_info, client, errors, timestamps
from pydet.cli import Subparsers, checkpoint, listing, render, retention, rpc, support_bundle
from pydet.cli.log_flags import LOG_LEVELS as LOG_LEVELS
from pydet.cli.log_flags import add_log_flags as add_log_flags
from pydet.cli.log_flags import rfc3339 as rfc3339


def add_parser(nouns: Subparsers) -> None:
    trial = nouns.add_parser("trial", aliases=["t"], help="inspect and control trials")
    verbs = trial.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    p = verbs.add_parser("describe", help="show a trial and its metrics")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    p.add_argument(
        "--metrics-summary", action="store_true", help="also print a summary of each metric"
    )
    p.add_argument("--metrics", action="store_true", help="include batch metrics")
    listing.add_format_flags(p)
    listing.add_pagination(p, limit=1000)
    p.set_defaults(func=describe)

    p = verbs.add_parser("logs", help="print a trial's logs")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    add_log_flags(p)
    p.add_argument("--json", action="store_true", help="print each line as a JSON object")
    p.set_defaults(func=logs)

    p = verbs.add_parser("download", help="download one of a trial's checkpoints")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--best", action="store_true", help="the best by the searcher metric")
    which.add_argument("--latest", action="store_true", help="the most recent")
    which.add_argument("--uuid", metavar="UUID", help="this one")
    add_sort_flags(p)
    checkpoint.add_download_flags(p)
    p.set_defaults(func=download, parser=p)

    p = verbs.add_parser("kill", help="kill a trial")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    p.set_defaults(func=kill)

    support_bundle.add_parser(verbs)

    p = verbs.add_parser("set", help="change a trial's log retention")
    what = p.add_subparsers(dest="field", metavar="FIELD", required=True)
    retention.add_log_retention_parser(what, "trial")


def add_sort_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sort-by",
        metavar="METRIC",
        help="the validation metric to rank by (default: the searcher metric)",
    )
    p.add_argument(
        "--smaller-is-better",
        type=_boolean,
        metavar="true|false",
        help="with --sort-by: whether smaller values of METRIC are better",
    )


def log_filters(args: argparse.Namespace) -> dict[str, Any]:
    """The fields of a TrialLogsRequest or TaskLogsRequest that ``add_log_flags`` set."""
    return {
        "head": args.head or 0,
        "tail": args.tail or 0,
        "rank_ids": list(args.rank_ids),
        "min_level": v1.LogLevel[args.level.upper()] if args.level else v1.LogLevel.UNSPECIFIED,
        "search_text": args.search or "",
        "allocation_ids": list(args.allocation_ids),
        "agent_ids": list(args.agent_ids),
        "container_ids": list(args.container_ids),
        "stdtypes": list(args.stdtypes),
        "sources": list(args.sources),
        "timestamp_before": timestamps.to_datetime(args.timestamp_before),
        "timestamp_after": timestamps.to_datetime(args.timestamp_after),
    }


def logs_request(trial_id: int, args: argparse.Namespace) -> v1.TrialLogsRequest:
    return v1.TrialLogsRequest(trial_id=trial_id, follow=args.follow, **log_filters(args))


async def print_logs(
    session: client.Session, request: v1.TrialLogsRequest, *, as_json: bool = False
) -> None:
    """Print log lines as they arrive (one JSON object a line with ``as_json``); flushed so
    that piping to `grep` or `tee` is live."""
    async for response in rpc.stream(session, session.stub.trial_logs(request)):
        for log in response.logs:
            line = json.dumps(render.message_dict(log)) if as_json else render.log_line(log)
            sys.stdout.write(line + "\n")
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
    if not args.metrics:
        for r in reports:
            r.batch_metrics = ""
    if args.json:
        # Determined's shape: the GetTrial answer, with the trial's reports beside it.
        workloads = [render.message_dict(r) for r in reports]
        print(render.to_json({"trial": render.message_dict(trial), "workloads": workloads}))
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
        "Parent Trial",
        "Log Signal",
        "Start",
        "End",
    )
    row = [
        trial.id,
        trial.experiment_id,
        render.state_name(trial.state),
        render.compact_json(trial.hparams),
        trial.total_batches_processed,
        trial.restarts,
        render.optional_number(trial.best_validation_metric),
        trial.latest_checkpoint_uuid or "",
        trial.warm_start_checkpoint_uuid or "",
        "" if trial.parent_trial_id is None else trial.parent_trial_id,
        trial.log_policy_matched or "",
        render.local_time(trial.start_time),
        render.local_time(trial.end_time),
    ]
    if args.csv:
        sys.stdout.write(render.csv(headers, [row]))
        return 0
    print(render.table(headers, [row]))
    if trial.metadata is not None and trial.metadata.fields:
        print(f"\nMetadata: {render.compact_json(trial.metadata)}")
    if reports:
        print("\nMetrics:")
        metric_headers = list(render.METRIC_HEADERS)
        rows = [render.metric_row(r) for r in reports]
        if args.metrics:
            metric_headers.append("Batch Metrics")
            for r, out in zip(reports, rows, strict=True):
                out.append(render.compact_json(r.batch_metrics))
        print(render.table(metric_headers, rows))
    if args.metrics_summary:
        print("\nSummary Metrics:")
        print(render.to_json(summary_metrics(reports)))
    return 0


# The summary's key of a metric group, as Determined names them.
_SUMMARY_KEYS = {"training": "avg_metrics", "validation": "validation_metrics"}


def summary_metrics(reports: list[v1.MetricReport]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each group's numeric metrics summed up as Determined's summary metrics do: count,
    sum, min, max, mean and the last value, in report order."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in reports:
        group = out.setdefault(_SUMMARY_KEYS.get(r.group, r.group), {})
        values = json.loads(r.metrics) if r.metrics else {}
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            s = group.setdefault(
                name, {"count": 0, "sum": 0.0, "min": value, "max": value, "type": "number"}
            )
            s["count"] += 1
            s["sum"] += value
            s["min"], s["max"] = min(s["min"], value), max(s["max"], value)
            s["last"] = value
            s["mean"] = s["sum"] / s["count"]
    return out


def logs(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        await print_logs(s, logs_request(args.trial_id, args), as_json=args.json)

    rpc.run(args.master, body)
    return 0


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def scored_by(
    checkpoints: list[v1.Checkpoint], validations: list[v1.MetricReport], metric: str
) -> list[tuple[float, v1.Checkpoint]]:
    """One trial's checkpoints that have a validation of ``metric`` at their step, each with
    its value."""
    at_step: dict[int, float] = {}
    for r in validations:
        value = (json.loads(r.metrics) if r.metrics else {}).get(metric)
        if isinstance(value, int | float) and not isinstance(value, bool):
            at_step[r.steps_completed] = float(value)
    return [(at_step[c.steps_completed], c) for c in checkpoints if c.steps_completed in at_step]


def ranked_by(
    checkpoints: list[v1.Checkpoint],
    validations: list[v1.MetricReport],
    metric: str,
    *,
    smaller_is_better: bool,
) -> list[v1.Checkpoint]:
    """The checkpoints with a validation of ``metric`` at their step, best first."""
    sign = 1.0 if smaller_is_better else -1.0
    scored = scored_by(checkpoints, validations, metric)
    return [
        c for _, c in sorted(scored, key=lambda p: (sign * p[0], render.seconds(p[1].report_time)))
    ]


def download(args: argparse.Namespace) -> int:
    if (args.sort_by is None) != (args.smaller_is_better is None):
        args.parser.error("--sort-by and --smaller-is-better must be set together")
    if args.sort_by is not None and not args.best:
        args.parser.error("--sort-by and --smaller-is-better can only be used with --best")

    async def body(s: client.Session) -> v1.Checkpoint:
        if args.uuid:
            return await checkpoint.get(s, args.uuid)
        t = rpc.present(
            (await s.call(s.stub.get_trial(v1.GetTrialRequest(trial_id=args.trial_id)))).trial,
            "trial",
        )
        exp, every = await checkpoint.experiment_checkpoints(s, t.experiment_id, trial_id=t.id)
        found = checkpoint.downloadable(every)
        if args.best and args.sort_by:
            request = v1.GetTrialMetricsRequest(trial_id=t.id, group="validation")
            validations = list((await s.call(s.stub.get_trial_metrics(request))).reports)
            chosen = ranked_by(
                found, validations, args.sort_by, smaller_is_better=args.smaller_is_better
            )
        elif args.best:
            chosen = checkpoint.ranked(found, smaller_is_better=exp.smaller_is_better)
        else:
            chosen = sorted(
                found,
                key=lambda c: (c.steps_completed, render.seconds(c.report_time)),
                reverse=True,
            )
        if not chosen:
            what = f"with a validation of {args.sort_by or 'the searcher metric'}"
            what = what if args.best else "left"
            raise errors.NotFound(f"trial {args.trial_id} has no checkpoint {what}")
        return chosen[0]

    c = rpc.run(args.master, body)
    if checkpoint_info.trial_id(c) != args.trial_id:
        raise errors.InvalidArgument(
            f"checkpoint {c.uuid} is of trial {checkpoint_info.trial_id(c)}, not {args.trial_id}"
        )
    checkpoint.fetch_files(c, args.output_dir, quiet=args.quiet, mode=args.mode)
    return 0


def kill(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        await s.call(s.stub.kill_trial(v1.KillTrialRequest(trial_id=args.trial_id)))

    rpc.run(args.master, body)
    print(f"Killed trial {args.trial_id}")
    return 0
