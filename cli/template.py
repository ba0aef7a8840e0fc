"""`det template list|describe|create|set|set-value config|remove`: config fragments that
experiments' configs are merged over (``template:`` in a config, or ``det experiment create
--template NAME``)."""

from __future__ import annotations

import argparse
import json

import yaml

from determined.api.gen import v1
from determined.common import client, errors, expconf
from pydet.cli import Subparsers, config, render, rpc, workspace


def add_parser(nouns: Subparsers) -> None:
    template = nouns.add_parser("template", aliases=["tpl"], help="manage config templates")
    verbs = template.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("list", aliases=["ls"], help="list templates")
    p.add_argument("-d", "--details", action="store_true", help="show each template's config")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_templates)
    p = verbs.add_parser("describe", help="print a template's config (YAML)")
    p.add_argument("template_name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)
    p = verbs.add_parser("set", help="create or replace a template from a YAML file")
    p.add_argument("template_name", metavar="NAME")
    p.add_argument("template_file", metavar="FILE", help="the config fragment (YAML)")
    p.set_defaults(func=set_template, mode="put")
    p = verbs.add_parser("create", help="create a template (one of the same name is an error)")
    p.add_argument("template_name", metavar="NAME")
    p.add_argument("template_file", metavar="FILE", help="the config fragment (YAML)")
    p.add_argument(
        "-w",
        "--workspace-name",
        metavar="WORKSPACE",
        help="the workspace it belongs to (default: Uncategorized)",
    )
    p.set_defaults(func=set_template, mode="create")
    values = verbs.add_parser("set-value", help="change a part of an existing template")
    parts = values.add_subparsers(dest="part", metavar="PART", required=True)
    p = parts.add_parser("config", help="replace an existing template's config")
    p.add_argument("template_name", metavar="NAME")
    p.add_argument("template_file", metavar="FILE", help="the config fragment (YAML)")
    p.set_defaults(func=set_template, mode="replace")
    p = verbs.add_parser("remove", aliases=["rm"], help="remove a template")
    p.add_argument("template_name", metavar="NAME")
    p.set_defaults(func=remove)


def _yaml(t: v1.Template) -> str:
    return yaml.safe_dump(json.loads(t.config or "{}"), sort_keys=False).rstrip()


def list_templates(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> tuple[list[v1.Template], dict[int, str]]:
        resp = await s.call(s.stub.get_templates(v1.GetTemplatesRequest()))
        every = await s.call(s.stub.get_workspaces(v1.GetWorkspacesRequest()))
        return list(resp.templates), {w.id: w.name for w in every.workspaces}

    found, names = rpc.run(args.master, body)
    if args.json:
        print(
            render.to_json(
                [{**render.message_dict(t), "config": json.loads(t.config)} for t in found]
            )
        )
        return 0
    headers: tuple[str, ...] = ("Name", "Owner", "Workspace")
    rows = [[t.name, t.username, names.get(t.workspace_id, "missing workspace")] for t in found]
    if args.details:
        headers = (*headers, "Config")
        rows = [[*row, _yaml(t)] for row, t in zip(rows, found, strict=True)]
    print(render.table(headers, rows))
    return 0


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Template:
        req = v1.GetTemplateRequest(template_name=args.template_name)
        return rpc.present((await s.call(s.stub.get_template(req))).template, "template")

    found = rpc.run(args.master, body)
    print(render.to_json(json.loads(found.config)) if args.json else _yaml(found))
    return 0


def set_template(args: argparse.Namespace) -> int:
    try:
        fragment = expconf.load_yaml(config.read_text(args.template_file))
    except expconf.InvalidConfig as e:
        raise errors.InvalidArgument(f"{args.template_file}: {'; '.join(e.errors)}") from None
    template = v1.Template(name=args.template_name, config=json.dumps(fragment))

    async def body(s: client.Session) -> None:
        if args.mode == "create":
            if getattr(args, "workspace_name", None):
                template.workspace_id = (await workspace.by_name(s, args.workspace_name)).id
            await s.call(s.stub.post_template(v1.PostTemplateRequest(template=template)))
        elif args.mode == "replace":
            req = v1.PatchTemplateConfigRequest(
                template_name=args.template_name, config=template.config
            )
            await s.call(s.stub.patch_template_config(req))
        else:
            await s.call(s.stub.put_template(v1.PutTemplateRequest(template=template)))

    rpc.run(args.master, body)
    done = {"create": "Created", "replace": "Changed the config of", "put": "Set"}[args.mode]
    print(f"{done} template {args.template_name}")
    return 0


def remove(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        req = v1.DeleteTemplateRequest(template_name=args.template_name)
        await s.call(s.stub.delete_template(req))

    rpc.run(args.master, body)
    print(f"Removed template {args.template_name}")
    return 0
