"""`det resource-pool bindings add|remove|replace|list-workspaces`: resource pools bound to
workspaces (a bound pool runs only its workspaces' experiments and tasks; an unbound one is
shared; `det workspace list-pools` lists a workspace's). Binding is for admins."""

from __future__ import annotations

import argparse

from determined.api.gen import v1
from determined.common import client
from pydet.cli import Subparsers, render, rpc


def add_parsers(pool_verbs: Subparsers) -> None:
    """The `bindings` verbs under `det resource-pool`."""
    bindings = pool_verbs.add_parser("bindings", help="manage resource pool bindings")
    verbs = bindings.add_subparsers(dest="bindings_verb", metavar="COMMAND", required=True)
    for verb, what in (
        ("add", "bind a resource pool to workspaces (as well as those it is bound to)"),
        ("remove", "remove a resource pool's bindings to workspaces"),
        ("replace", "make these workspaces the only ones a resource pool is bound to"),
    ):
        p = verbs.add_parser(verb, help=what)
        p.add_argument("pool_name", metavar="POOL", help="the resource pool")
        p.add_argument(
            "workspace_names", metavar="WORKSPACE", nargs="+", help="the workspaces, by name"
        )
        p.set_defaults(func=change, change=verb)
    p = verbs.add_parser("list-workspaces", help="list the workspaces a resource pool is bound to")
    p.add_argument("pool_name", metavar="POOL", help="the resource pool")
    p.set_defaults(func=list_workspaces)


_DONE = {
    "add": 'added bindings between the resource pool "{}" and the workspaces: {}',
    "remove": 'removed bindings between the resource pool "{}" and the workspaces: {}',
    "replace": 'the resource pool "{}" is now bound to the workspaces: {} (and no others)',
}


def change(args: argparse.Namespace) -> int:
    pool, names = args.pool_name, list(args.workspace_names)

    async def body(s: client.Session) -> None:
        if args.change == "add":
            req = v1.BindRpToWorkspaceRequest(resource_pool_name=pool, workspace_names=names)
            await s.call(s.stub.bind_rp_to_workspace(req))
        elif args.change == "remove":
            unbind = v1.UnbindRpFromWorkspaceRequest(resource_pool_name=pool, workspace_names=names)
            await s.call(s.stub.unbind_rp_from_workspace(unbind))
        else:
            replace = v1.OverwriteRpWorkspaceBindingsRequest(
                resource_pool_name=pool, workspace_names=names
            )
            await s.call(s.stub.overwrite_rp_workspace_bindings(replace))

    rpc.run(args.master, body)
    print(_DONE[args.change].format(pool, ", ".join(names)))
    return 0


def list_workspaces(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> list[str]:
        req = v1.ListWorkspacesBoundToRpRequest(resource_pool_name=args.pool_name)
        ids = set((await s.call(s.stub.list_workspaces_bound_to_rp(req))).workspace_ids)
        if not ids:
            return []
        every = await s.call(s.stub.get_workspaces(v1.GetWorkspacesRequest()))
        return [w.name for w in every.workspaces if w.id in ids]

    names = rpc.run(args.master, body)
    shown = ", ".join(names) if names else "(none: the pool is shared by every workspace)"
    print(render.table(("resource pool", "workspaces"), [[args.pool_name, shown]]))
    return 0
