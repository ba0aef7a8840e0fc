"""`det config-policies|cp describe|set|delete [-w WORKSPACE]`: the policies every new
experiment (or task) is held to, global (admins set them) or a workspace's (its owner or an
admin sets them; the global ones win over them); master/cluster/policies.py applies them."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from determined.api.gen import v1
from determined.common import client
from pydet.cli import Subparsers, config, render, rpc, workspace

WORKLOADS = ("experiment", "tasks")


def add_parser(nouns: Subparsers) -> None:
    cp = nouns.add_parser(
        "config-policies", aliases=["cp"], help="manage config policies (invariant configs, limits)"
    )
    verbs = cp.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("describe", help="show the config policies of a workload type")
    _workload(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--yaml", action="store_true", help="print YAML (the default)")
    p.set_defaults(func=describe)
    p = verbs.add_parser("set", help="replace the config policies of a workload type (admins)")
    _workload(p)
    p.add_argument(
        "config_file",
        metavar="FILE",
        help="YAML or JSON with invariant_config and/or constraints",
    )
    p.set_defaults(func=set_policies)
    p = verbs.add_parser("delete", help="delete the config policies of a workload type (admins)")
    _workload(p)
    p.set_defaults(func=delete)


def _workload(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "workload_type",
        type=str.lower,
        choices=WORKLOADS,
        help="experiment, or tasks (notebooks, TensorBoards, shells, commands)",
    )
    p.add_argument(
        "-w",
        "--workspace-name",
        metavar="WORKSPACE",
        help="a workspace's policies rather than the global ones",
    )


async def _workspace_id(s: client.Session, args: argparse.Namespace) -> int:
    return (await workspace.by_name(s, args.workspace_name)).id


def _kind(args: argparse.Namespace) -> str:
    return "NTSC" if args.workload_type == "tasks" else "EXPERIMENT"


def _show(text: str, *, as_json: bool = False) -> None:
    policies = json.loads(text or "{}")
    if as_json:
        print(render.to_json(policies))
    else:
        sys.stdout.write(yaml.safe_dump(policies, sort_keys=False, default_flow_style=False))


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> str:
        if args.workspace_name:
            scoped = v1.GetWorkspaceConfigPoliciesRequest(
                workspace_id=await _workspace_id(s, args), workload_type=_kind(args)
            )
            return (await s.call(s.stub.get_workspace_config_policies(scoped))).config_policies
        req = v1.GetGlobalConfigPoliciesRequest(workload_type=_kind(args))
        return (await s.call(s.stub.get_global_config_policies(req))).config_policies

    _show(rpc.run(args.master, body), as_json=args.json)
    return 0


def set_policies(args: argparse.Namespace) -> int:
    text = config.read_text(args.config_file)

    async def body(s: client.Session) -> str:
        if args.workspace_name:
            scoped = v1.PutWorkspaceConfigPoliciesRequest(
                workspace_id=await _workspace_id(s, args),
                workload_type=_kind(args),
                config_policies=text,
            )
            return (await s.call(s.stub.put_workspace_config_policies(scoped))).config_policies
        req = v1.PutGlobalConfigPoliciesRequest(workload_type=_kind(args), config_policies=text)
        return (await s.call(s.stub.put_global_config_policies(req))).config_policies

    stored = rpc.run(args.master, body)
    where = f"workspace {args.workspace_name}" if args.workspace_name else "global"
    print(f"Set {where} {args.workload_type} config policies:")
    _show(stored)
    return 0


def delete(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        if args.workspace_name:
            scoped = v1.DeleteWorkspaceConfigPoliciesRequest(
                workspace_id=await _workspace_id(s, args), workload_type=_kind(args)
            )
            await s.call(s.stub.delete_workspace_config_policies(scoped))
            return
        req = v1.DeleteGlobalConfigPoliciesRequest(workload_type=_kind(args))
        await s.call(s.stub.delete_global_config_policies(req))

    rpc.run(args.master, body)
    where = f"workspace {args.workspace_name}'s" if args.workspace_name else "the global"
    print(f"Deleted {where} {args.workload_type} config policies")
    return 0
