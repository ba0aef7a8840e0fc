"""`det checkpoint|c`: list, describe, download and delete checkpoints.

Downloading reads the files from the checkpoint storage the master recorded
(``determined.common.checkpoint_files``); `det trial download` and `det experiment download`
pick a checkpoint and come here for the rest.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from determined.api.gen import v1
from determined.common import checkpoint_files, checkpoint_info, client, errors, structs
from pydet.cli import Subparsers, listing, render, rpc


def add_parser(nouns: Subparsers) -> None:
    ckpt = nouns.add_parser("checkpoint", aliases=["c"], help="manage checkpoints")
    verbs = ckpt.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    p = verbs.add_parser("list", aliases=["ls"], help="list an experiment's checkpoints")
    p.add_argument("experiment_id", type=int, metavar="EXPERIMENT_ID")
    add_list_flags(p)
    p.set_defaults(func=list_checkpoints)

    p = verbs.add_parser("describe", help="describe a checkpoint")
    p.add_argument("uuid", metavar="UUID")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)

    p = verbs.add_parser("download", help="download a checkpoint from its storage")
    p.add_argument("uuid", metavar="UUID")
    add_download_flags(p)
    p.set_defaults(func=download)

    p = verbs.add_parser("delete", help="delete checkpoints and their files")
    p.add_argument("uuids", metavar="UUIDS", help="comma-separated checkpoint UUIDs")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=delete)

    p = verbs.add_parser("rm", help="remove files from checkpoints")
    p.add_argument("uuids", metavar="UUIDS", help="comma-separated checkpoint UUIDs")
    p.add_argument(
        "--glob",
        action="append",
        default=[],
        help="the files to remove (repeatable); none: only re-read the checkpoints' files"
        " from the storage",
    )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=remove_files)


def add_list_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--best", type=int, metavar="N", help="only the N best by the searcher metric")
    listing.add_format_flags(p)


def add_download_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output-dir", metavar="DIR", help="where to put the files")
    p.add_argument("-q", "--quiet", action="store_true", help="only print the checkpoint's path")
    p.add_argument(
        "--mode",
        choices=("auto", "direct", "master"),
        default="auto",
        help="auto and direct read the checkpoint storage; master is not offered by pydet",
    )


async def experiment_checkpoints(
    s: client.Session, experiment_id: int, *, trial_id: int = 0
) -> tuple[v1.Experiment, list[v1.Checkpoint]]:
    """The experiment and its (or one trial's) checkpoints, deleted ones included."""
    exp = await s.call(s.stub.get_experiment(v1.GetExperimentRequest(experiment_id=experiment_id)))
    request = v1.GetCheckpointsRequest(experiment_id=experiment_id, trial_id=trial_id)
    found = (await s.call(s.stub.get_checkpoints(request))).checkpoints
    return rpc.present(exp.experiment, "experiment"), list(found)


def downloadable(checkpoints: Sequence[v1.Checkpoint]) -> list[v1.Checkpoint]:
    """Those whose files have not been deleted."""
    return [c for c in checkpoints if c.state != v1.CheckpointState.DELETED]


def ranked(checkpoints: Sequence[v1.Checkpoint], *, smaller_is_better: bool) -> list[v1.Checkpoint]:
    """Those with a searcher metric, best first (the earliest on a tie)."""
    sign = 1.0 if smaller_is_better else -1.0
    scored = [c for c in checkpoints if checkpoint_info.searcher_metric(c) is not None]
    return sorted(
        scored,
        key=lambda c: (
            sign * (checkpoint_info.searcher_metric(c) or 0.0),
            render.seconds(c.report_time),
        ),
    )


def list_checkpoints(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> tuple[v1.Experiment, list[v1.Checkpoint]]:
        return await experiment_checkpoints(s, args.experiment_id)

    exp, checkpoints = rpc.run(args.master, body)
    if args.best is not None:
        checkpoints = ranked(checkpoints, smaller_is_better=exp.smaller_is_better)[: args.best]
    rows = [render.checkpoint_row(c) for c in checkpoints]
    as_json = [render.message_dict(c) for c in checkpoints]
    listing.show(args, render.CHECKPOINT_HEADERS, rows, as_json)
    return 0


async def get(s: client.Session, uuid: str) -> v1.Checkpoint:
    resp = await s.call(s.stub.get_checkpoint(v1.GetCheckpointRequest(uuid=uuid)))
    return rpc.present(resp.checkpoint, "checkpoint")


DESCRIBE_HEADERS = (
    "Experiment ID",
    "Trial ID",
    "Steps Completed",
    "Report Time",
    "Checkpoint UUID",
    "Validation Metric",
    "Metadata",
)


def describe_row(c: v1.Checkpoint) -> list[Any]:
    return [
        checkpoint_info.experiment_id(c),
        checkpoint_info.trial_id(c),
        c.steps_completed,
        render.local_time(c.report_time),
        c.uuid,
        render.optional_number(checkpoint_info.searcher_metric(c)),
        json.dumps(_metadata(c), indent=4, sort_keys=True),
    ]


def _metadata(c: v1.Checkpoint) -> dict[str, Any]:
    return structs.python(c.metadata)


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Checkpoint:
        return await get(s, args.uuid)

    c = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.message_dict(c)))
    else:
        print(render.table(DESCRIBE_HEADERS, [describe_row(c)]))
    return 0


def fetch_files(c: v1.Checkpoint, output_dir: str | None, *, quiet: bool, mode: str) -> None:
    """Download ``c`` and say where it went (only the path with ``quiet``)."""
    if mode == "master":
        raise errors.InvalidArgument(
            "--mode master is not offered by pydet: the master does not serve checkpoint "
            "files; use --mode direct or auto"
        )
    if c.state == v1.CheckpointState.DELETED:
        raise errors.FailedPrecondition(f"checkpoint {c.uuid} was deleted")
    storage = structs.python(c.storage)
    path = checkpoint_files.download(c.uuid, storage, output_dir, metadata=_metadata(c))
    if quiet:
        print(path)
        return
    print("Local checkpoint path:")
    print(path, "\n")
    print(render.table(DESCRIBE_HEADERS, [describe_row(c)]))


def download(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Checkpoint:
        return await get(s, args.uuid)

    fetch_files(rpc.run(args.master, body), args.output_dir, quiet=args.quiet, mode=args.mode)
    return 0


def _uuids(text: str) -> list[str]:
    uuids = [u.strip() for u in text.split(",") if u.strip()]
    if not uuids:
        raise errors.InvalidArgument("no checkpoint UUID given")
    return uuids


def delete(args: argparse.Namespace) -> int:
    uuids = _uuids(args.uuids)
    if not args.yes and not render.confirmed(
        f"deleting {len(uuids)} checkpoint(s)",
        "Deleting checkpoints deletes all their files in the checkpoint storage. Proceed?",
    ):
        print("Aborting deletion of checkpoints.")
        return 1

    async def body(s: client.Session) -> None:
        await s.call(s.stub.delete_checkpoints(v1.DeleteCheckpointsRequest(uuids=uuids)))

    rpc.run(args.master, body)
    print(f"Deleted checkpoints {','.join(uuids)}")
    return 0


def remove_files(args: argparse.Namespace) -> int:
    uuids = _uuids(args.uuids)
    if (
        args.glob
        and not args.yes
        and not render.confirmed(
            f"removing files from {len(uuids)} checkpoint(s)",
            "All files matching the globs will be deleted from these checkpoints in their storage."
            " Proceed?",
        )
    ):
        print("Stopping removal of files from checkpoints.")
        return 1
    req = v1.CheckpointsRemoveFilesRequest(checkpoint_uuids=uuids, checkpoint_globs=args.glob)

    async def body(s: client.Session) -> None:
        await s.call(s.stub.checkpoints_remove_files(req))

    rpc.run(args.master, body)
    if args.glob:
        print(f"Removed the matching files from checkpoints {','.join(uuids)}")
    else:
        print(f"Refreshed the files of checkpoints {','.join(uuids)} from their storage")
    return 0
