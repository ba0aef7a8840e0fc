"""What a user writes on an experiment after creating it, as Determined's det has it:
`det experiment label add|remove`, `det experiment set name|description` and
`det experiment delete-tb-files` (its TensorBoard files in the checkpoint storage)."""

from __future__ import annotations

import argparse

from determined.api.gen import v1
from determined.common import client
from pydet.cli import Subparsers, rpc


def add_label_parser(verbs: Subparsers) -> None:
    p = verbs.add_parser("label", help="manage experiment labels")
    what = p.add_subparsers(dest="label_verb", metavar="COMMAND", required=True)
    for verb, help_text in (("add", "add a label"), ("remove", "remove a label")):
        q = what.add_parser(verb, help=help_text)
        q.add_argument("experiment_id", type=int, metavar="EXPERIMENT_ID")
        q.add_argument("label", help="the label")
        q.set_defaults(func=label)


def add_setters(what: Subparsers) -> None:
    """`det experiment set name|description` (under the `set` command's fields)."""
    for field in ("name", "description"):
        q = what.add_parser(field, help=f"set the experiment's {field}")
        q.add_argument("experiment_id", type=int, metavar="EXPERIMENT_ID")
        q.add_argument("value", metavar=field.upper(), help=f"the new {field}")
        q.set_defaults(func=set_text)


def add_delete_tb_files_parser(verbs: Subparsers) -> None:
    p = verbs.add_parser(
        "delete-tb-files", help="delete the experiment's TensorBoard files from its storage"
    )
    p.add_argument("experiment_id", type=int, metavar="EXPERIMENT_ID")
    p.set_defaults(func=delete_tb_files)


def label(args: argparse.Namespace) -> int:
    exp_id, text = args.experiment_id, args.label

    async def body(s: client.Session) -> None:
        if args.label_verb == "add":
            req = v1.PutExperimentLabelRequest(experiment_id=exp_id, label=text)
            await s.call(s.stub.put_experiment_label(req))
        else:
            gone = v1.DeleteExperimentLabelRequest(experiment_id=exp_id, label=text)
            await s.call(s.stub.delete_experiment_label(gone))

    rpc.run(args.master, body)
    if args.label_verb == "add":
        print(f"Added label '{text}' to experiment {exp_id}")
    else:
        print(f"Removed label '{text}' from experiment {exp_id}")
    return 0


def set_text(args: argparse.Namespace) -> int:
    patch = v1.PatchExperiment(id=args.experiment_id, **{args.field: args.value})

    async def body(s: client.Session) -> None:
        await s.call(s.stub.patch_experiment(v1.PatchExperimentRequest(experiment=patch)))

    rpc.run(args.master, body)
    print(f"Set {args.field} of experiment {args.experiment_id} to '{args.value}'")
    return 0


def delete_tb_files(args: argparse.Namespace) -> int:
    req = v1.DeleteTensorboardFilesRequest(experiment_id=args.experiment_id)

    async def body(s: client.Session) -> None:
        await s.call(s.stub.delete_tensorboard_files(req))

    rpc.run(args.master, body)
    print(f"Deleted the TensorBoard files of experiment {args.experiment_id}")
    return 0
