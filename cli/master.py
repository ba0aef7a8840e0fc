"""`det master info`: which master answers, for scripts that check before they submit."""

from __future__ import annotations

import argparse

from determined.api.gen import v1
from determined.common import client
from pydet.cli import Subparsers, render, rpc


def add_parser(nouns: Subparsers) -> None:
    master = nouns.add_parser("master", help="show the master's version and cluster id")
    verbs = master.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("info", help="show the master's version and cluster id")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=info)


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
