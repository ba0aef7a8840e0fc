"""`det master info|config|logs|cluster-message` and `det version`: which master answers, its
settings and its own log, and the message every user of the cluster sees."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from determined import __version__
from determined.api.gen import v1
from determined.common import client, errors, timestamps
from pydet.cli import Subparsers, render, rpc, trial

# Determined's LogLevel names (the master's --log.level choices).
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _json_or_yaml(p: argparse.ArgumentParser) -> None:
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--yaml", action="store_true", help="print YAML (the default)")


def add_parser(nouns: Subparsers) -> None:
    master = nouns.add_parser("master", help="the master: info, config, logs, cluster message")
    verbs = master.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("info", help="show the master's version and cluster id")
    _json_or_yaml(p)
    p.set_defaults(func=info)

    config = verbs.add_parser("config", help="show the master's config (admins)")
    _json_or_yaml(config)
    config.set_defaults(func=show_config)
    what = config.add_subparsers(dest="config_verb", metavar="COMMAND")
    p = what.add_parser("show", help="show the master's config (the default)")
    _json_or_yaml(p)
    p.set_defaults(func=show_config)
    p = what.add_parser("set", help="change the master's log settings until it restarts")
    p.add_argument(
        "--log.level",
        dest="log_level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=argparse.SUPPRESS,
        help="the master's log level",
    )
    p.add_argument(
        "--log.color",
        dest="log_color",
        choices=("on", "off"),
        default=argparse.SUPPRESS,
        help="color in the master's log",
    )
    p.set_defaults(func=set_config)

    p = verbs.add_parser("logs", help="print the master's own log")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p.add_argument(
        "--tail", type=int, metavar="N", help="only the last N lines (default: all kept)"
    )
    p.set_defaults(func=logs)

    message = verbs.add_parser(
        "cluster-message", help="set, clear or show the message every user sees"
    )
    actions = message.add_subparsers(dest="message_verb", metavar="COMMAND", required=True)
    p = actions.add_parser("set", help="set the cluster-wide message (admins)")
    p.add_argument("-m", "--message", help="the text (at most 250 characters)")
    p.add_argument(
        "-s",
        "--start",
        type=trial.rfc3339,
        metavar="TIME",
        help="when to start showing it (RFC 3339, e.g. 2021-10-26T23:17:12Z; default: now)",
    )
    until = p.add_mutually_exclusive_group()
    until.add_argument(
        "-e", "--end", type=trial.rfc3339, metavar="TIME", help="when to stop (default: never)"
    )
    until.add_argument(
        "-d", "--duration", metavar="D", help="how long to show it: 30m, 24h, 5d, 2w"
    )
    p.set_defaults(func=set_message)
    p = actions.add_parser("clear", help="stop showing the cluster-wide message (admins)")
    p.add_argument("-c", "--clear", action="store_true", help="(Determined's; no effect)")
    p.set_defaults(func=clear_message)
    p = actions.add_parser("get", help="show the cluster-wide message (admins)")
    _json_or_yaml(p)
    p.set_defaults(func=get_message)

    p = nouns.add_parser("version", help="show the CLI's and the master's versions")
    p.set_defaults(func=version)


def _print(args: argparse.Namespace, value: Any) -> None:
    if args.json:
        print(render.to_json(value))
    else:
        sys.stdout.write(yaml.safe_dump(value, sort_keys=False, default_flow_style=False))


def message_dict(m: v1.ClusterMessage) -> dict[str, Any]:
    """A cluster message as Determined's CLI prints it: RFC 3339 times."""
    return {
        "message": m.message,
        "startTime": render.iso_utc(m.start_time),
        "endTime": None if m.end_time is None else render.iso_utc(m.end_time),
        "createdTime": render.iso_utc(m.created_time),
    }


def info(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetMasterResponse:
        return await s.call(s.stub.get_master(v1.GetMasterRequest()))

    resp = rpc.run(args.master, body)
    if args.json or args.yaml:
        out = render.message_dict(resp)
        out["address"] = client.master_address(args.master)
        if resp.cluster_message is not None:
            out["cluster_message"] = message_dict(resp.cluster_message)
        _print(args, out)
        return 0
    print(f"Master:       {client.master_address(args.master)}")
    print(f"Version:      {resp.version}")
    print(f"Cluster ID:   {resp.cluster_id}")
    print(f"Cluster name: {resp.cluster_name}")
    if resp.cluster_message is not None:
        print(f"Message:      {resp.cluster_message.message}")
    return 0


def show_config(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> str:
        resp = await s.call(s.stub.get_master_config(v1.GetMasterConfigRequest()))
        return resp.config

    _print(args, json.loads(rpc.run(args.master, body) or "{}"))
    return 0


def set_config(args: argparse.Namespace) -> int:
    log = v1.LogConfig()
    paths = []
    if "log_level" in args:
        log.level = args.log_level
        paths.append("log.level")
    if "log_color" in args:
        log.color = args.log_color == "on"
        paths.append("log.color")
    if not paths:
        raise errors.InvalidArgument(
            "give at least one setting to change: --log.level and --log.color are supported"
        )

    async def body(s: client.Session) -> None:
        req = v1.PatchMasterConfigRequest(log=log, field_mask=paths)
        await s.call(s.stub.patch_master_config(req))

    rpc.run(args.master, body)
    print("Changed the master config (until the master restarts; its config file is unchanged).")
    return 0


def logs(args: argparse.Namespace) -> int:
    if args.tail is not None and args.tail < 0:
        raise errors.InvalidArgument(f"--tail: must be 0 or more, got {args.tail}")
    if args.tail == 0 and not args.follow:
        return 0
    # From the start, the last N, or (--tail 0) past the end: only the lines to come.
    offset = 0 if args.tail is None else -args.tail if args.tail else 1 << 30

    async def body(s: client.Session) -> None:
        req = v1.MasterLogsRequest(offset=offset, follow=args.follow)
        async for resp in rpc.stream(s, s.stub.master_logs(req)):
            e = resp.log_entry
            if e is not None:
                sys.stdout.write(render.master_log_line(e) + "\n")
                sys.stdout.flush()

    rpc.run(args.master, body)
    return 0


def set_message(args: argparse.Namespace) -> int:
    if not args.message:
        raise errors.InvalidArgument("give the message with -m/--message")
    req = v1.SetClusterMessageRequest(
        message=args.message,
        start_time=timestamps.to_datetime(args.start),
        end_time=timestamps.to_datetime(args.end),
        duration=args.duration,
    )

    async def body(s: client.Session) -> None:
        await s.call(s.stub.set_cluster_message(req))

    rpc.run(args.master, body)
    print("Set the cluster-wide message.")
    return 0


def clear_message(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        await s.call(s.stub.delete_cluster_message(v1.DeleteClusterMessageRequest()))

    rpc.run(args.master, body)
    print("Cleared the cluster-wide message.")
    return 0


def get_message(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetClusterMessageResponse:
        return await s.call(s.stub.get_cluster_message(v1.GetClusterMessageRequest()))

    found = rpc.run(args.master, body).cluster_message
    _print(args, {"clusterMessage": None if found is None else message_dict(found)})
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
