"""What `det cmd`, `det notebook` and `det shell` share (Determined's ``ntsc``): their config
from ``--config-file`` and ``--config`` overrides, the context they take, their lists, and
kill, priority, config and logs by id (or an unambiguous prefix of one).

Light to import, so that `det cmd run` starts quickly: the parsers need nothing heavy, and
what the other verbs need (the generated API, YAML, the config parser) is imported where
they use it.
"""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from determined.common import errors
from pydet.cli import log_flags

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common import client

HEADERS = ("ID", "Owner", "Description", "State", "Exit Status", "Resource Pool")
# --sort-by's names (Determined's, its table's keys) for the fields they sort by.
SORT_KEYS = {
    "id": "id",
    "username": "username",
    "description": "description",
    "state": "state",
    "exitStatus": "exit_status",
    "resourcePool": "resource_pool",
    "startTime": "start_time",
}


class Task(Protocol):
    """A Command, Notebook or Shell message: what lists show of each."""

    id: str
    username: str
    description: str
    state: Any
    exit_status: str
    resource_pool: str


@dataclass(frozen=True)
class Api:
    """One kind's calls: ``noun`` names it in messages ("command"), ``launched`` in the
    launch line ("command", "notebook", "shell")."""

    noun: str
    list_all: Callable[[client.Session, int], Awaitable[Sequence[Any]]]
    get: Callable[[client.Session, str], Awaitable[tuple[Any, str]]]
    kill: Callable[[client.Session, str], Awaitable[Any]]
    set_priority: Callable[[client.Session, str, int], Awaitable[Any]]


def api_for(noun: str) -> Api:
    """A kind's calls by Determined's names (``noun`` "notebook": GetNotebooks, GetNotebook,
    KillNotebook, SetNotebookPriority)."""
    kind = noun.capitalize()
    key = f"{noun}_id"

    def request(name: str, **fields: Any) -> Any:
        from determined.api.gen import v1

        return getattr(v1, f"{name}Request")(**fields)

    def stub(s: client.Session, name: str) -> Any:
        return getattr(s.stub, "".join("_" + c.lower() if c.isupper() else c for c in name)[1:])

    async def list_all(s: client.Session, workspace_id: int = 0) -> Sequence[Any]:
        message = request(f"Get{kind}s", workspace_id=workspace_id)
        got = await s.call(stub(s, f"Get{kind}s")(message))
        return list(getattr(got, f"{noun}s"))

    async def get(s: client.Session, task_id: str) -> tuple[Any, str]:
        from pydet.cli import rpc

        got = await s.call(stub(s, f"Get{kind}")(request(f"Get{kind}", **{key: task_id})))
        import json

        from determined.common import structs

        return rpc.present(getattr(got, noun), noun), json.dumps(structs.python(got.config))

    async def kill(s: client.Session, task_id: str) -> Any:
        return await s.call(stub(s, f"Kill{kind}")(request(f"Kill{kind}", **{key: task_id})))

    async def set_priority(s: client.Session, task_id: str, priority: int) -> Any:
        message = request(f"Set{kind}Priority", **{key: task_id, "priority": priority})
        return await s.call(stub(s, f"Set{kind}Priority")(message))

    return Api(noun, list_all, get, kill, set_priority)


def add_config_flags(p: argparse.ArgumentParser, noun: str) -> None:
    add_source_flags(p, noun)
    p.add_argument(
        "-v",
        "--volume",
        action="append",
        default=[],
        metavar="HOST:CONTAINER",
        help="bind-mount a host path into the task (repeatable)",
    )
    p.add_argument("--template", help=f"a template to apply to the {noun}'s config")
    add_workspace_flag(p)
    p.add_argument(
        "-d", "--detach", action="store_true", help="run in the background and print the ID"
    )


def add_source_flags(p: argparse.ArgumentParser, noun: str) -> None:
    """Its config (--config-file, --config) and its files (-c/--context, -i/--include)."""
    p.add_argument(
        "--config-file", metavar="FILE", help=f"{noun} config file (.yaml)", default=None
    )
    add_override_flag(p)
    add_context_flags(p)


def add_override_flag(p: argparse.ArgumentParser) -> None:
    """--config KEY=VALUE (repeatable), into ``config_overrides``."""
    p.add_argument(
        "--config",
        dest="config_overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, nested keys joined by dots (repeatable)",
    )


def add_context_flags(p: argparse.ArgumentParser) -> None:
    """-c/--context and -i/--include (``context_of`` packs them)."""
    p.add_argument(
        "-c",
        "--context",
        type=pathlib.Path,
        metavar="DIR",
        help="a directory whose contents are the task's working directory (at most 95 MiB)",
    )
    p.add_argument(
        "-i",
        "--include",
        type=pathlib.Path,
        action="append",
        default=[],
        metavar="PATH",
        help="a file or directory copied into the working directory, keeping its name (repeatable)",
    )


def add_workspace_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-w", "--workspace-name", metavar="NAME", help="workspace name (the task belongs to it)"
    )


def check_workspace(name: str, workspace: Any) -> int:
    """The id of ``workspace`` (named ``name``), which must not be archived."""
    if workspace.archived:
        raise errors.FailedPrecondition(f"workspace {name!r} is archived")
    return int(workspace.id)


async def workspace_id(s: client.Session, args: argparse.Namespace) -> int:
    """The id of the workspace -w/--workspace-name names; 0 without it."""
    name = getattr(args, "workspace_name", None)
    if not name:
        return 0
    from pydet.cli import workspace

    return check_workspace(name, await workspace.by_name(s, name))


def load_config(args: argparse.Namespace, entrypoint: Sequence[str] = ()) -> str:
    """The config (YAML) from ``--config-file``, ``--config`` overrides, ``--volume`` mounts
    and, when the config has none, ``entrypoint``; checked here first, as the master will.
    Without a file or overrides it is JSON, and neither YAML nor the parser is loaded."""
    if not (args.config_file or args.config_overrides or args.template):
        data: dict[str, Any] = {}
        _add_volumes(data, args.volume)
        if entrypoint:
            data["entrypoint"] = list(entrypoint)
        import json

        return json.dumps(data) if data else ""
    import yaml

    from determined.common import expconf
    from pydet.cli import config

    data = expconf.load_yaml(config.read_text(args.config_file)) if args.config_file else {}
    try:
        overrides = [config.parse_override(text) for text in args.config_overrides]
    except argparse.ArgumentTypeError as e:
        raise errors.InvalidArgument(f"--config {e}") from None
    data = config.apply_overrides(data, overrides)
    _add_volumes(data, args.volume)
    if not data.get("entrypoint") and entrypoint:
        data["entrypoint"] = list(entrypoint)
    if args.template is None:
        try:
            expconf.parse_command_config(data, entrypoint=bool(entrypoint))
        except expconf.InvalidConfig as e:
            what = f"config file {args.config_file}" if args.config_file else "config"
            problems = "\n".join(f"  {p}" for p in e.errors)
            raise errors.InvalidArgument(f"invalid {what}:\n{problems}") from None
    return yaml.safe_dump(data, sort_keys=False) if data else ""


def _add_volumes(data: dict[str, Any], volumes: Sequence[str]) -> None:
    for volume in volumes:
        host, sep, container = volume.partition(":")
        if not sep or not host or not container:
            raise errors.InvalidArgument(f"--volume {volume}: expected HOST_PATH:CONTAINER_PATH")
        data.setdefault("bind_mounts", []).append({"host_path": host, "container_path": container})


def context_of(args: argparse.Namespace) -> bytes:
    """The packed ``--context`` and ``--include`` paths; empty when neither is given."""
    includes = [str(p) for p in args.include]
    if args.context is None and not includes:
        return b""
    import tempfile

    from determined.common.context import pack_context

    if args.context is not None:
        if not args.context.is_dir():
            raise errors.InvalidArgument(f"--context {args.context}: not a directory")
        return pack_context(args.context, includes=includes)
    with tempfile.TemporaryDirectory(prefix="det-context-") as empty:
        return pack_context(empty, includes=includes)


def launched(kind: str, task_id: str, name: str) -> None:
    """Determined's line, which scripts parse."""
    print(f"Launched {kind} (id: {task_id}, name: {name}).", flush=True)


async def expand(s: client.Session, api: Api, prefix: str) -> str:
    """A full task id from an id or an unambiguous prefix of a live one's."""
    if len(prefix) == 36:
        return prefix
    ids = [t.id for t in await api.list_all(s, 0) if t.id.startswith(prefix)]
    if len(ids) > 1:
        raise errors.InvalidArgument(f"{api.noun} id prefix {prefix!r} is not unique")
    if not ids:
        raise errors.NotFound(f"{api.noun} {prefix} not found")
    return str(ids[0])


def add_noun(nouns: Any, api: Api, help: str, aliases: Sequence[str] = ()) -> Any:
    """The kind's noun (`det notebook`), listing them when given no verb, with its list
    verb; returns its verbs for the kind's own."""
    noun = nouns.add_parser(api.noun, aliases=list(aliases), help=help)
    verbs = noun.add_subparsers(dest="verb", metavar="COMMAND")
    noun.set_defaults(
        func=lambda args: list_tasks(args, api), csv=False, json=False, quiet=False, all=False
    )
    add_list_parser(verbs, api, f"{api.noun}s")
    return verbs


def add_list_parser(verbs: Any, api: Api, plural: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = verbs.add_parser("list", aliases=["ls"], help=f"list {plural}")
    p.add_argument("-q", "--quiet", action="store_true", help="only display the IDs")
    p.add_argument(
        "-a", "--all", action="store_true", help=f"show all {plural} (including other users')"
    )
    p.add_argument(
        "-w", "--workspace-name", metavar="NAME", help=f"only {plural} of this workspace"
    )
    add_sort_flags(p, SORT_KEYS)
    add_format_flags(p)
    p.set_defaults(func=lambda args: list_tasks(args, api))
    return p


def add_format_flags(p: argparse.ArgumentParser) -> None:
    formats = p.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true", help="print JSON")
    formats.add_argument("--csv", action="store_true", help="print CSV")


def add_sort_flags(p: argparse.ArgumentParser, keys: Mapping[str, str]) -> None:
    """Determined's --sort-by (a field, by its table's name) and --order-by (asc, desc)."""
    p.add_argument(
        "--sort-by", choices=sorted(keys), default="startTime", help="sort by the given field"
    )
    p.add_argument(
        "--order-by", choices=("asc", "desc"), default="asc", help="ascending or descending"
    )


def sorted_tasks(
    tasks: Sequence[Any], args: argparse.Namespace, keys: Mapping[str, str]
) -> list[Any]:
    """``tasks`` in the order --sort-by and --order-by ask for (start time, oldest first,
    without them)."""
    field = keys[getattr(args, "sort_by", "startTime")]
    return sorted(
        tasks, key=lambda t: getattr(t, field), reverse=getattr(args, "order_by", "asc") == "desc"
    )


def add_common_parsers(verbs: Any, api: Api) -> None:
    """config, logs, kill and set priority, by id."""
    noun = api.noun
    id_dest = f"{noun}_id"
    p = verbs.add_parser("config", help=f"display a {noun}'s config")
    p.add_argument(id_dest, metavar=f"{noun.upper()}_ID")
    p.set_defaults(func=lambda args: show_config(args, api))

    p = verbs.add_parser("logs", help=f"print a {noun}'s logs")
    p.add_argument("task_id", metavar=f"{noun.upper()}_ID")
    log_flags.add_log_flags(p)
    p.add_argument("--json", action="store_true", help="print each line as a JSON object")
    p.set_defaults(func=lambda args: print_logs(args, api))

    p = verbs.add_parser("kill", help=f"kill {noun}s")
    p.add_argument(id_dest, nargs="+", metavar=f"{noun.upper()}_ID")
    p.add_argument("-f", "--force", action="store_true", help="ignore errors")
    p.set_defaults(func=lambda args: kill(args, api))

    p = verbs.add_parser("set", help=f"set {noun} attributes")
    setters = p.add_subparsers(dest="attribute", metavar="ATTRIBUTE", required=True)
    p = setters.add_parser("priority", help=f"set a {noun}'s priority")
    p.add_argument(id_dest, metavar=f"{noun.upper()}_ID")
    p.add_argument("priority", type=int, help="priority (1-99, lower runs first)")
    p.set_defaults(func=lambda args: set_priority(args, api))


def state_name(t: Task) -> str:
    """A task's state by its name (``STATE_RUNNING``), from the full client's message (an
    enum member) or the light one's (its number)."""
    if isinstance(t.state, int) and not hasattr(t.state, "proto_name"):
        from determined.api import lite

        return "STATE_" + lite.enum_name("TensorboardState", t.state)
    return str(t.state.proto_name or t.state.name)


def config_struct(text: str) -> Any:
    """A launch request's config (YAML or JSON text, as ``load_config`` gives it) as the
    Struct the request carries; None for no config."""
    if not text:
        return None
    from determined.common import expconf, structs

    return structs.struct(expconf.load_yaml(text))


def row(t: Task) -> list[Any]:
    return [
        t.id,
        t.username,
        t.description,
        state_name(t).removeprefix("STATE_"),
        t.exit_status or "N/A",
        t.resource_pool,
    ]


def list_tasks(args: argparse.Namespace, api: Api) -> int:
    from determined.api.gen import v1
    from pydet.cli import listing, render, rpc

    async def body(s: client.Session) -> list[Any]:
        tasks = list(await api.list_all(s, await workspace_id(s, args)))
        if args.all:
            return tasks
        me = rpc.present((await s.call(s.stub.get_me(v1.GetMeRequest()))).user, "user")
        return [t for t in tasks if t.username == me.username]

    tasks = sorted_tasks(rpc.run(args.master, body), args, SORT_KEYS)
    if args.quiet:
        for t in tasks:
            print(t.id)
        return 0
    shown = [{**render.message_dict(t), "state": state_name(t)} for t in tasks]
    listing.show(args, HEADERS, [row(t) for t in tasks], shown)
    return 0


def describe(args: argparse.Namespace, api: Api) -> int:
    """One task's row (Determined's `det command describe`), or its JSON with --json."""
    from pydet.cli import listing, render, rpc

    async def body(s: client.Session) -> Any:
        return (await api.get(s, await expand(s, api, getattr(args, f"{api.noun}_id"))))[0]

    task = rpc.run(args.master, body)
    listing.show(args, HEADERS, [row(task)], render.message_dict(task))
    return 0


def show_config(args: argparse.Namespace, api: Api) -> int:
    import json

    import yaml

    from pydet.cli import render, rpc

    async def body(s: client.Session) -> str:
        task_id = await expand(s, api, getattr(args, f"{api.noun}_id"))
        return (await api.get(s, task_id))[1]

    found = json.loads(rpc.run(args.master, body) or "{}")
    if getattr(args, "json", False):
        print(render.to_json(found))
    else:
        print(yaml.safe_dump(found, sort_keys=False), end="")
    return 0


def kill(args: argparse.Namespace, api: Api) -> int:
    from pydet.cli import rpc

    async def body(s: client.Session) -> None:
        for prefix in getattr(args, f"{api.noun}_id"):
            try:
                task_id = await expand(s, api, prefix)
                await api.kill(s, task_id)
                print(f"Killed {api.noun} {task_id}")
            except errors.DetError as e:
                if not args.force:
                    raise
                print(f"Skipping: {e.message}")

    rpc.run(args.master, body)
    return 0


def set_priority(args: argparse.Namespace, api: Api) -> int:
    from pydet.cli import rpc

    async def body(s: client.Session) -> str:
        task_id = await expand(s, api, getattr(args, f"{api.noun}_id"))
        await api.set_priority(s, task_id, args.priority)
        return task_id

    task_id = rpc.run(args.master, body)
    print(f"Set priority of {api.noun} {task_id} to {args.priority}")
    return 0


def logs_request(task_id: str, args: argparse.Namespace) -> v1.TaskLogsRequest:
    from determined.api.gen import v1

    return v1.TaskLogsRequest(
        task_id=task_id,
        follow=getattr(args, "follow", False),
        head=getattr(args, "head", None) or 0,
        tail=getattr(args, "tail", None) or 0,
        rank_ids=list(getattr(args, "rank_ids", [])),
        min_level=v1.LogLevel[args.level.upper()]
        if getattr(args, "level", None)
        else v1.LogLevel.UNSPECIFIED,
        search_text=getattr(args, "search", None) or "",
        allocation_ids=list(getattr(args, "allocation_ids", [])),
        agent_ids=list(getattr(args, "agent_ids", [])),
        container_ids=list(getattr(args, "container_ids", [])),
        stdtypes=list(getattr(args, "stdtypes", [])),
        sources=list(getattr(args, "sources", [])),
        timestamp_before=getattr(args, "timestamp_before", None),
        timestamp_after=getattr(args, "timestamp_after", None),
    )


def print_logs(args: argparse.Namespace, api: Api | None = None) -> int:
    """Print a task's lines (``det task logs`` and each kind's ``logs``), each as a JSON
    object with ``--json``."""
    import json

    from pydet.cli import render, rpc

    as_json = getattr(args, "json", False)

    async def body(s: client.Session) -> None:
        task_id = args.task_id if api is None else await expand(s, api, args.task_id)
        request = logs_request(task_id, args)
        async for response in rpc.stream(s, s.stub.task_logs(request)):
            for line in response.logs:
                print(json.dumps(render.message_dict(line)) if as_json else render.log_line(line))
            if response.logs:
                print(end="", flush=True)

    rpc.run(args.master, body)
    return 0
