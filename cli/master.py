"""`det master info` and `det version`: which master answers, for scripts that check before
they submit."""

from __future__ import annotations

import argparse
import sys

import yaml

from determined import __version__
from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, render, rpc


def add_parser(nouns: Subparsers) -> None:
    master = nouns.add_parser("master", help="show the master's version and cluster id")
    verbs = master.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("info", help="show the master's version and cluster id")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=info)

    p = nouns.add_parser("version", help="show the CLI's and the master's versions")
    p.set_defaults(func=version)


def info(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetMasterResponse:
        return await s.call(s.stub.get_master(v1.GetMasterRequest()))

    resp = rpc.run(args.master, body)
    if args.json:
        out = render.message_dict(resp)
        out["address"] = client.master_address(args.master)
        print(render.to_json(out))
        return 0
    print(f"Master:       {client.master_address(args.master)}")
    print(f"Version:      {resp.version}")
    print(f"Cluster ID:   {resp.cluster_id}")
    print(f"Cluster name: {resp.cluster_name}")
    return 0


def version(args: argparse.Namespace) -> int:
    """Determined's `det version`: the client's and the master's versions as YAML; a master
    that cannot be reached leaves its part empty, with a hint, and is not an error."""

    async def body(s: client.Session) -> v1.GetMasterResponse:
        return await s.call(s.stub.get_master(v1.GetMasterRequest()))

    address = client.master_address(args.master)
    master = {"cluster_id": "", "cluster_name": "", "version": ""}
    try:
        resp = rpc.run(args.master, body)
        master = {
            "cluster_id": resp.cluster_id,
            "cluster_name": resp.cluster_name,
            "version": resp.version,
        }
    except errors.Unavailable:
        print(
            f"Master not found at {address}. Hint: set DET_MASTER to the master's address or "
            "use the '-m' flag.",
            file=sys.stderr,
        )
    info = {"client": {"version": __version__}, "master": master, "master_address": address}
    sys.stdout.write(yaml.safe_dump(info, sort_keys=False, default_flow_style=False))
    return 0
