"""`det model|m`: the model registry, as Determined's CLI has it (list, create, describe,
list-versions, register-version, move, delete) and `describe-version`. A model is named by
its name (or its id)."""

from __future__ import annotations

import argparse
import datetime
import json
from typing import Any

from determined.api.gen import v1
from determined.common import checkpoint_info, client, structs
from pydet.cli import Subparsers, render, rpc, workspace

MODEL_HEADERS = (
    "ID",
    "Name",
    "Description",
    "Workspace ID",
    "Creation Time",
    "Last Updated Time",
    "Metadata",
)
VERSION_HEADERS = (
    "Version #",
    "Name",
    "Trial ID",
    "Batch #",
    "Checkpoint UUID",
    "Searcher Metric",
    "Metadata",
)
_SORT = ("name", "description", "creation_time", "last_updated_time")


def add_parser(nouns: Subparsers) -> None:
    model = nouns.add_parser("model", aliases=["m"], help="manage the model registry")
    # `det model` alone lists them, as in Determined.
    model.set_defaults(
        func=list_models,
        workspace_names=None,
        sort_by="last_updated_time",
        order_by="asc",
        json=False,
    )
    verbs = model.add_subparsers(dest="verb", metavar="COMMAND")

    p = verbs.add_parser("list", aliases=["ls"], help="list all models in the registry")
    p.add_argument(
        "-w", "--workspace-names", help="only the models of these (comma-separated) workspaces"
    )
    p.add_argument("--sort-by", choices=_SORT, default="last_updated_time")
    p.add_argument("--order-by", choices=("asc", "desc"), default="asc")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_models)

    p = verbs.add_parser("create", help="create a model")
    p.add_argument("name", metavar="NAME", help="its name (unique in the cluster)")
    p.add_argument("-w", "--workspace-name", help="its workspace (default: Uncategorized)")
    p.add_argument("--description", default="", help="what it is")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=create)

    p = verbs.add_parser("describe", help="describe a model (and one of its versions)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, default=-1, help="this version too (-1: the latest)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)

    p = verbs.add_parser("describe-version", help="describe one version of a model")
    p.add_argument("name", metavar="NAME")
    p.add_argument("version", metavar="VERSION", type=int)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe_version)

    p = verbs.add_parser("list-versions", help="list the versions of a model")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_versions)

    p = verbs.add_parser("register-version", help="register a checkpoint as the next version")
    p.add_argument("name", metavar="NAME")
    p.add_argument("uuid", metavar="UUID", help="the checkpoint (it must have completed)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=register_version)

    p = verbs.add_parser("move", help="move a model to another workspace")
    p.add_argument("name", metavar="NAME")
    p.add_argument("-w", "--workspace-name", required=True, help="the destination")
    p.set_defaults(func=move)

    p = verbs.add_parser("delete", help="delete a model and its versions")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=delete)


def _time(value: datetime.datetime | None) -> str:
    return render.local_time(value.timestamp()) if value is not None else ""


def _metadata(value: Any) -> str:
    return json.dumps(value or {}, indent=2)


def _show_models(models: list[v1.Model]) -> None:
    rows = [
        [
            m.id,
            m.name,
            m.description,
            m.workspace_id,
            _time(m.creation_time),
            _time(m.last_updated_time),
            _metadata(structs.to_dict(m.metadata)),
        ]
        for m in models
    ]
    print(render.table(MODEL_HEADERS, rows))


def _show_versions(versions: list[v1.ModelVersion]) -> None:
    rows = []
    for v in versions:
        c = v.checkpoint or v1.Checkpoint()
        rows.append(
            [
                v.version,
                v.name,
                checkpoint_info.trial_id(c) or "",
                c.steps_completed,
                c.uuid,
                render.optional_number(checkpoint_info.searcher_metric(c)),
                render.compact_json(json.dumps(structs.python(c.metadata))),
            ]
        )
    print(render.table(VERSION_HEADERS, rows))


async def get_model(s: client.Session, name: str) -> v1.Model:
    resp = await s.call(s.stub.get_model(v1.GetModelRequest(model_name=name)))
    return rpc.present(resp.model, "model")


def list_models(args: argparse.Namespace) -> int:
    req = v1.GetModelsRequest(
        sort_by=v1.GetModelsRequestSortBy[args.sort_by.upper()],
        order_by=v1.OrderBy[args.order_by.upper()],
        workspace_names=[w for w in (args.workspace_names or "").split(",") if w],
    )

    async def body(s: client.Session) -> list[v1.Model]:
        return list((await s.call(s.stub.get_models(req))).models)

    models = rpc.run(args.master, body)
    if args.json:
        print(render.to_json([render.proto_json(m) for m in models]))
    else:
        _show_models(models)
    return 0


def create(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Model:
        req = v1.PostModelRequest(name=args.name, description=args.description)
        if args.workspace_name:
            req.workspace_id = (await workspace.by_name(s, args.workspace_name)).id
        return rpc.present((await s.call(s.stub.post_model(req))).model, "model")

    created = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.proto_json(created)))
    else:
        _show_models([created])
    return 0


async def _latest(s: client.Session, name: str) -> v1.ModelVersion | None:
    req = v1.GetModelVersionsRequest(
        model_name=name,
        sort_by=v1.GetModelVersionsRequestSortBy.VERSION,
        order_by=v1.OrderBy.DESC,
        limit=1,
    )
    found = (await s.call(s.stub.get_model_versions(req))).model_versions
    return found[0] if found else None


async def _version(s: client.Session, name: str, number: int) -> v1.ModelVersion | None:
    if number == -1:
        return await _latest(s, name)
    req = v1.GetModelVersionRequest(model_name=name, model_version_num=number)
    return rpc.present((await s.call(s.stub.get_model_version(req))).model_version, "version")


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> tuple[v1.Model, v1.ModelVersion | None]:
        return await get_model(s, args.name), await _version(s, args.name, args.version)

    model, version = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.proto_json(model)))
        return 0
    _show_models([model])
    if version is not None:
        print()
        _show_versions([version])
    return 0


def describe_version(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.ModelVersion | None:
        return await _version(s, args.name, args.version)

    version = rpc.run(args.master, body)
    assert version is not None  # a number that is not there is NotFound
    if args.json:
        print(render.to_json(render.proto_json(version)))
        return 0
    _show_versions([version])
    if version.notes:
        print(f"\nNotes:\n{version.notes}")
    return 0


def list_versions(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetModelVersionsResponse:
        req = v1.GetModelVersionsRequest(model_name=args.name)
        return await s.call(s.stub.get_model_versions(req))

    resp = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.proto_json(resp)))
        return 0
    _show_models([rpc.present(resp.model, "model")])
    print()
    _show_versions(list(resp.model_versions))
    return 0


def register_version(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.PostModelVersionResponse:
        req = v1.PostModelVersionRequest(model_name=args.name, checkpoint_uuid=args.uuid)
        return await s.call(s.stub.post_model_version(req))

    resp = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.proto_json(resp)))
        return 0
    version = rpc.present(resp.model_version, "model version")
    _show_models([rpc.present(version.model, "model")])
    print()
    _show_versions([version])
    return 0


def move(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        destination = await workspace.by_name(s, args.workspace_name)
        req = v1.MoveModelRequest(model_name=args.name, destination_workspace_id=destination.id)
        await s.call(s.stub.move_model(req))

    rpc.run(args.master, body)
    print(f"Moved model {args.name} to workspace {args.workspace_name}.")
    return 0


def delete(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        await s.call(s.stub.delete_model(v1.DeleteModelRequest(model_name=args.name)))

    rpc.run(args.master, body)
    print(f"Deleted model {args.name}.")
    return 0
