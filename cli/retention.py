"""What is kept of an experiment after it runs: `det experiment set gc-policy` (its
checkpoints), `det experiment|trial set log-retention` (its logs), and `det experiment
download-model-def` (its code, as it was submitted)."""

from __future__ import annotations

import argparse
import math
import pathlib

from determined.api.gen import v1
from determined.common import checkpoint_info, client, errors
from pydet.cli import Subparsers, render, rpc

MAX_DAYS = 32767


def add_gc_policy_parser(what: Subparsers) -> None:
    p = what.add_parser("gc-policy", help="change the checkpoint gc policy and apply it now")
    p.add_argument("experiment_id", type=int, metavar="ID")
    for flag, what_it_keeps in (
        ("--save-experiment-best", "best checkpoints of the whole experiment"),
        ("--save-trial-best", "best checkpoints of each trial"),
        ("--save-trial-latest", "latest checkpoints of each trial"),
    ):
        p.add_argument(
            flag, type=int, required=True, metavar="N", help=f"keep the N {what_it_keeps}"
        )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=set_gc_policy)


def add_log_retention_parser(what: Subparsers, noun: str) -> None:
    p = what.add_parser(
        "log-retention", help=f"days to keep a {noun}'s logs after it ends (from now on)"
    )
    p.add_argument(f"{noun}_id", type=int, metavar="ID")
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--days", type=int, metavar="N", help=f"-1 (forever) to {MAX_DAYS}; 0: at the next pass"
    )
    how.add_argument("--forever", action="store_true", help="keep the logs forever")
    p.set_defaults(func=set_log_retention, noun=noun)


def add_download_model_def_parser(verbs: Subparsers) -> None:
    p = verbs.add_parser("download-model-def", help="download the experiment's code (.tgz)")
    p.add_argument("experiment_id", type=int, metavar="ID")
    p.add_argument(
        "--output-dir",
        type=pathlib.Path,
        default=pathlib.Path("."),
        metavar="DIR",
        help="where to write experiment_ID_model_def.tgz (default: here)",
    )
    p.set_defaults(func=download_model_def)


def _policy(args: argparse.Namespace) -> v1.GcPolicy:
    for name in ("save_experiment_best", "save_trial_best", "save_trial_latest"):
        if getattr(args, name) < 0:
            flag = "--" + name.replace("_", "-")
            raise errors.InvalidArgument(f"{flag}: must be 0 or more, got {getattr(args, name)}")
    return v1.GcPolicy(
        save_experiment_best=args.save_experiment_best,
        save_trial_best=args.save_trial_best,
        save_trial_latest=args.save_trial_latest,
    )


def set_gc_policy(args: argparse.Namespace) -> int:
    policy = _policy(args)
    exp_id = args.experiment_id

    async def preview(s: client.Session) -> v1.PreviewExperimentGcResponse:
        req = v1.PreviewExperimentGcRequest(experiment_id=exp_id, policy=policy)
        return await s.call(s.stub.preview_experiment_gc(req))

    if not args.yes:
        found = rpc.run(args.master, preview)
        metric = found.metric_name or "searcher metric"
        validated = [c for c in found.checkpoints if checkpoint_info.searcher_metric(c) is not None]
        if validated:
            print("These checkpoints with a validation would be deleted by this policy:")
            headers = ("Trial ID", "Steps", "State", f"Validation Metric ({metric})", "UUID")
            rows = [
                [
                    checkpoint_info.trial_id(c),
                    c.steps_completed,
                    checkpoint_info.state(c),
                    _metric(checkpoint_info.searcher_metric(c)),
                    c.uuid,
                ]
                for c in sorted(
                    validated,
                    key=lambda c: (checkpoint_info.trial_id(c), render.seconds(c.report_time)),
                )
            ]
            print(render.table(headers, rows))
        unvalidated = len(found.checkpoints) - len(validated)
        print(
            f"This policy would delete {len(validated)} checkpoints with validations and "
            f"{unvalidated} without."
        )
        if not render.confirmed(
            f"changing the gc policy of experiment {exp_id}",
            "Checkpoints deleted this way cannot be recovered. Proceed?",
        ):
            print("Not changed.")
            return 1

    async def apply(s: client.Session) -> int:
        req = v1.SetExperimentGcPolicyRequest(experiment_id=exp_id, policy=policy)
        return (await s.call(s.stub.set_experiment_gc_policy(req))).deleted

    deleted = rpc.run(args.master, apply)
    print(
        f"Set the gc policy of experiment {exp_id}: save_experiment_best "
        f"{policy.save_experiment_best}, save_trial_best {policy.save_trial_best}, "
        f"save_trial_latest {policy.save_trial_latest}; {deleted} checkpoints deleted"
    )
    return 0


def _metric(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:g}"


def set_log_retention(args: argparse.Namespace) -> int:
    if not args.forever and args.days is None:
        raise errors.InvalidArgument(
            f"give --days N (days to keep the logs after the {args.noun} ends) or --forever, "
            f"e.g. det {args.noun} set log-retention 1 --days 50"
        )
    days = -1 if args.forever else int(args.days)
    if not -1 <= days <= MAX_DAYS:
        raise errors.InvalidArgument(f"--days: expected -1 to {MAX_DAYS}, got {days}")
    target = args.experiment_id if args.noun == "experiment" else args.trial_id

    async def body(s: client.Session) -> None:
        if args.noun == "experiment":
            req = v1.PutExperimentRetainLogsRequest(experiment_id=target, num_days=days)
            await s.call(s.stub.put_experiment_retain_logs(req))
        else:
            trial_req = v1.PutTrialRetainLogsRequest(trial_id=target, num_days=days)
            await s.call(s.stub.put_trial_retain_logs(trial_req))

    rpc.run(args.master, body)
    kept = "forever" if days < 0 else f"for {days} days after it ends"
    print(f"The logs of {args.noun} {target} are kept {kept}")
    return 0


def download_model_def(args: argparse.Namespace) -> int:
    req = v1.GetExperimentContextRequest(experiment_id=args.experiment_id)

    async def body(s: client.Session) -> bytes:
        return (await s.call(s.stub.get_experiment_context(req))).context

    archive = rpc.run(args.master, body)
    if not archive:
        raise errors.NotFound(
            f"experiment {args.experiment_id} has no model definition (its code runs off the "
            "cluster)"
        )
    out = args.output_dir / f"experiment_{args.experiment_id}_model_def.tgz"
    try:
        out.write_bytes(archive)
    except OSError as e:
        raise errors.InvalidArgument(f"--output-dir: cannot write {out}: {e.strerror}") from None
    print(f"Wrote {out}")
    return 0
