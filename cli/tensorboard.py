"""`det tensorboard start|list|open|logs|config|set priority|kill`: TensorBoards over trials'
TensorBoard files, run as tasks on agents and reached through the master's ``/proxy/<id>/``
(Determined's command names, flags and columns)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import webbrowser
from typing import Any

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, listing, ntsc, render, rpc, trial

HEADERS = (
    "ID",
    "Owner",
    "Description",
    "State",
    "Experiment IDs",
    "Trial IDs",
    "Exit Status",
    "Resource Pool",
)
# How long `start` waits for the TensorBoard to serve before it gives up waiting.
START_TIMEOUT = 300.0


def add_parser(nouns: Subparsers) -> None:
    tb = nouns.add_parser("tensorboard", help="manage TensorBoard instances")
    verbs = tb.add_subparsers(dest="verb", metavar="COMMAND")
    tb.set_defaults(
        func=list_tensorboards,
        csv=False,
        json=False,
        quiet=False,
        all=False,
        sort_by="startTime",
        order_by="asc",
    )

    p = verbs.add_parser("list", aliases=["ls"], help="list TensorBoard instances")
    p.add_argument("-q", "--quiet", action="store_true", help="only display the IDs")
    p.add_argument(
        "-a", "--all", action="store_true", help="show all TensorBoards (including other users')"
    )
    listing.add_format_flags(p)
    ntsc.add_sort_flags(p, ntsc.SORT_KEYS)
    p.add_argument(
        "-w", "--workspace-name", metavar="NAME", help="only TensorBoards of this workspace"
    )
    p.set_defaults(func=list_tensorboards)

    p = verbs.add_parser("start", help="start a new TensorBoard instance")
    p.add_argument(
        "experiment_ids",
        type=int,
        nargs="*",
        metavar="EXPERIMENT_ID",
        help="experiments whose trials (at most 100) to load into TensorBoard",
    )
    p.add_argument(
        "-t",
        "--trial-ids",
        type=int,
        nargs="+",
        default=[],
        metavar="TRIAL_ID",
        help="trials to load into TensorBoard (at most 100)",
    )
    ntsc.add_workspace_flag(p)
    ntsc.add_source_flags(p, "TensorBoard")
    p.add_argument("--no-browser", action="store_true", help="don't open TensorBoard in a browser")
    p.add_argument(
        "-d", "--detach", action="store_true", help="run in the background and print the ID"
    )
    p.set_defaults(func=start, volume=[], template=None)

    p = verbs.add_parser("open", help="open an existing TensorBoard instance")
    p.add_argument("tensorboard_id", metavar="TENSORBOARD_ID")
    p.add_argument("--no-browser", action="store_true", help="only print its URL")
    p.set_defaults(func=open_tensorboard)

    p = verbs.add_parser("logs", help="print a TensorBoard instance's logs")
    p.add_argument("task_id", metavar="TENSORBOARD_ID")
    trial.add_log_flags(p)
    p.add_argument("--json", action="store_true", help="print each line as a JSON object")
    p.set_defaults(func=lambda args: ntsc.print_logs(args, API))

    what = verbs.add_parser("set", help="change a TensorBoard instance's settings")
    fields = what.add_subparsers(dest="field", metavar="FIELD", required=True)
    p = fields.add_parser("priority", help="its place in the queue (1-99, lower first)")
    p.add_argument("tensorboard_id", metavar="TENSORBOARD_ID")
    p.add_argument("priority", type=int, metavar="PRIORITY")
    p.set_defaults(func=lambda args: ntsc.set_priority(args, API))

    p = verbs.add_parser("config", help="print a TensorBoard instance's config")
    p.add_argument("tensorboard_id", metavar="TENSORBOARD_ID")
    p.add_argument("--json", action="store_true", help="print JSON rather than YAML")
    p.set_defaults(func=lambda args: ntsc.show_config(args, API))

    p = verbs.add_parser("kill", help="kill TensorBoard instances")
    p.add_argument("tensorboard_id", nargs="+", metavar="TENSORBOARD_ID")
    p.add_argument("-f", "--force", action="store_true", help="ignore errors")
    p.set_defaults(func=kill)


async def _list(s: client.Session, workspace_id: int = 0) -> list[v1.Tensorboard]:
    request = v1.GetTensorboardsRequest(workspace_id=workspace_id)
    return list((await s.call(s.stub.get_tensorboards(request))).tensorboards)


async def _get(s: client.Session, task_id: str) -> tuple[v1.Tensorboard, str]:
    """The TensorBoard, and its config: what it shows and the resources it takes."""
    got = await s.call(s.stub.get_tensorboard(v1.GetTensorboardRequest(tensorboard_id=task_id)))
    tb = rpc.present(got.tensorboard, "tensorboard")
    config = {
        "description": tb.description,
        "experiment_ids": list(tb.experiment_ids),
        "trial_ids": list(tb.trial_ids),
        "resources": {"resource_pool": tb.resource_pool, "slots": 0, "priority": tb.priority},
    }
    return tb, json.dumps(config)


async def _kill(s: client.Session, task_id: str) -> Any:
    return await s.call(s.stub.kill_tensorboard(v1.KillTensorboardRequest(tensorboard_id=task_id)))


async def _set_priority(s: client.Session, task_id: str, priority: int) -> Any:
    request = v1.SetTensorboardPriorityRequest(tensorboard_id=task_id, priority=priority)
    return await s.call(s.stub.set_tensorboard_priority(request))


API = ntsc.Api("tensorboard", _list, _get, _kill, _set_priority)


def row(t: v1.Tensorboard) -> list[Any]:
    return [
        t.id,
        t.username,
        t.description,
        t.state.proto_name,
        ", ".join(map(str, t.experiment_ids)),
        ", ".join(map(str, t.trial_ids)),
        t.exit_status or "N/A",
        t.resource_pool,
    ]


def url_of(master: str | None, service_address: str) -> str:
    address = client.master_address(master)
    host, port = client.parse_address(address)
    tls = client.uses_tls(address, os.environ.get("DET_MASTER_CERT_FILE"))
    return f"{'https' if tls else 'http'}://{host}:{port}{service_address}"


def list_tensorboards(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> list[v1.Tensorboard]:
        found = await _list(s, await ntsc.workspace_id(s, args))
        if args.all:
            return found
        me = rpc.present((await s.call(s.stub.get_me(v1.GetMeRequest()))).user, "user")
        return [t for t in found if t.username == me.username]

    tensorboards = ntsc.sorted_tasks(rpc.run(args.master, body), args, ntsc.SORT_KEYS)
    if args.quiet:
        for t in tensorboards:
            print(t.id)
        return 0
    listing.show(
        args,
        HEADERS,
        [row(t) for t in tensorboards],
        [render.message_dict(t) for t in tensorboards],
    )
    return 0


def _show(args: argparse.Namespace, t: v1.Tensorboard) -> None:
    url = url_of(args.master, t.service_address)
    print(f"TensorBoard is running at: {url}")
    if not args.no_browser:
        webbrowser.open(url)


def start(args: argparse.Namespace) -> int:
    if not args.experiment_ids and not args.trial_ids:
        raise errors.InvalidArgument("name experiment ids or --trial-ids to load into TensorBoard")
    request = v1.LaunchTensorboardRequest(
        experiment_ids=args.experiment_ids,
        trial_ids=args.trial_ids,
        config=ntsc.config_struct(ntsc.load_config(args)),
        context=ntsc.context_of(args),
    )

    async def body(s: client.Session) -> v1.Tensorboard:
        request.workspace_id = await ntsc.workspace_id(s, args)
        resp = await s.call(s.stub.launch_tensorboard(request))
        t = rpc.present(resp.tensorboard, "tensorboard")
        if args.detach:
            return t
        ntsc.launched("tensorboard", t.id, t.description)
        deadline = time.monotonic() + START_TIMEOUT
        while t.state not in (v1.TensorboardState.RUNNING, v1.TensorboardState.TERMINATED):
            if time.monotonic() > deadline:
                raise errors.DetError(
                    f"tensorboard {t.id} is still {t.state.proto_name} after {START_TIMEOUT:.0f}s; "
                    f"see `det tensorboard list` (it keeps starting in the background)"
                )
            await asyncio.sleep(0.5)
            got = await s.call(
                s.stub.get_tensorboard(v1.GetTensorboardRequest(tensorboard_id=t.id))
            )
            t = rpc.present(got.tensorboard, "tensorboard")
        return t

    t = rpc.run(args.master, body)
    if args.detach:
        print(t.id)
        return 0
    if t.state != v1.TensorboardState.RUNNING:
        raise errors.DetError(f"tensorboard {t.id} ended before it served: {t.exit_status}")
    _show(args, t)
    return 0


def open_tensorboard(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Tensorboard:
        got = await s.call(
            s.stub.get_tensorboard(v1.GetTensorboardRequest(tensorboard_id=args.tensorboard_id))
        )
        return rpc.present(got.tensorboard, "tensorboard")

    t = rpc.run(args.master, body)
    if t.state != v1.TensorboardState.RUNNING:
        raise errors.FailedPrecondition(
            f"tensorboard {t.id} is {t.state.proto_name}; it must be STATE_RUNNING to open"
        )
    _show(args, t)
    return 0


def kill(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        for tb_id in args.tensorboard_id:
            try:
                await s.call(
                    s.stub.kill_tensorboard(v1.KillTensorboardRequest(tensorboard_id=tb_id))
                )
                print(f"Killed tensorboard {tb_id}")
            except errors.DetError:
                if not args.force:
                    raise

    rpc.run(args.master, body)
    return 0
