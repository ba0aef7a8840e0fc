"""`det workspace|w`: workspaces, as Determined's CLI has them (list, list-projects, create,
describe, edit, archive, unarchive, delete, list-pools). A workspace is named by its name."""

from __future__ import annotations

import argparse
import json
from typing import Any

from determined.api.gen import v1
from determined.common import client, errors, expconf, structs
from pydet.cli import Subparsers, agent_user, config, listing, render, rpc

WORKSPACE_HEADERS = ("ID", "Name", "# Projects", "Default Compute Pool", "Default Aux Pool")
PROJECT_HEADERS = ("ID", "Key", "Name", "Description", "# Experiments", "# Active Experiments")

_ORDER = {"asc": v1.OrderBy.ASC, "desc": v1.OrderBy.DESC}


def add_sort_flags(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--sort-by", choices=("id", "name"), default="id", help=f"sort {what} by this field"
    )
    p.add_argument("--order-by", choices=tuple(_ORDER), default="asc", help="ascending or not")
    listing.add_pagination(p)


def add_parser(nouns: Subparsers) -> None:
    ws = nouns.add_parser("workspace", aliases=["w"], help="manage workspaces")
    # `det workspace` alone lists them, as in Determined.
    ws.set_defaults(func=list_workspaces, sort_by="id", order_by="asc", json=False)
    ws.set_defaults(limit=200, offset=0, pages="all")
    verbs = ws.add_subparsers(dest="verb", metavar="COMMAND")

    p = verbs.add_parser("list", aliases=["ls"], help="list all workspaces")
    add_sort_flags(p, "workspaces")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_workspaces)

    p = verbs.add_parser("list-projects", help="list the projects of a workspace")
    p.add_argument("workspace_name", metavar="WORKSPACE")
    add_sort_flags(p, "projects")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_projects)

    p = verbs.add_parser("list-pools", help="list the resource pools available to a workspace")
    p.add_argument("workspace_name", metavar="WORKSPACE")
    p.set_defaults(func=list_pools)

    p = verbs.add_parser(
        "list-members", help="list the users and user groups with roles on a workspace"
    )
    p.add_argument("workspace_name", metavar="WORKSPACE")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print JSON")
    shown.add_argument("--yaml", action="store_true", help="print YAML")
    shown.add_argument("--csv", action="store_true", help="print CSV")
    p.set_defaults(func=list_members)

    p = verbs.add_parser("create", help="create a workspace")
    p.add_argument("name", metavar="NAME", help="its name (unique in the cluster)")
    _settings_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=create)

    p = verbs.add_parser("describe", help="describe a workspace")
    p.add_argument("workspace_name", metavar="WORKSPACE")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)

    p = verbs.add_parser("edit", help="rename a workspace or change its settings")
    p.add_argument("workspace_name", metavar="WORKSPACE", help="its current name")
    p.add_argument("--name", help="its new name")
    _settings_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=edit)

    for verb in ("archive", "unarchive"):
        p = verbs.add_parser(verb, help=f"{verb} a workspace")
        p.add_argument("workspace_name", metavar="WORKSPACE")
        p.set_defaults(func=archive, archiving=verb == "archive")

    p = verbs.add_parser("delete", help="delete a workspace that holds no experiment or model")
    p.add_argument("workspace_name", metavar="WORKSPACE")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=delete)


def _settings_flags(p: argparse.ArgumentParser) -> None:
    agent_user.add_flags(p)
    storage = p.add_mutually_exclusive_group()
    storage.add_argument(
        "--checkpoint-storage-config",
        metavar="JSON",
        help="its checkpoint storage (a JSON object); '{}' removes it",
    )
    storage.add_argument(
        "--checkpoint-storage-config-file",
        metavar="FILE",
        help="its checkpoint storage, from a YAML or JSON file",
    )
    p.add_argument("--default-compute-pool", metavar="POOL", help="its experiments' pool")
    p.add_argument("--default-aux-pool", metavar="POOL", help="its auxiliary tasks' pool")


def _storage(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.checkpoint_storage_config is not None:
        try:
            value = json.loads(args.checkpoint_storage_config)
        except ValueError as e:
            raise errors.InvalidArgument(f"--checkpoint-storage-config: not JSON ({e})") from None
    elif args.checkpoint_storage_config_file is not None:
        try:
            value = expconf.load_yaml(config.read_text(args.checkpoint_storage_config_file))
        except expconf.InvalidConfig as e:
            raise errors.InvalidArgument(
                f"{args.checkpoint_storage_config_file}: {'; '.join(e.errors)}"
            ) from None
    else:
        return None
    if not isinstance(value, dict):
        raise errors.InvalidArgument("checkpoint storage: expected a JSON object")
    return value


async def by_name(s: client.Session, name: str) -> v1.Workspace:
    """The workspace named ``name``; NotFound naming it."""
    req = v1.GetWorkspacesRequest(name_case_sensitive=name)
    found = (await s.call(s.stub.get_workspaces(req))).workspaces
    if not found:
        raise errors.NotFound(f"workspace {name!r} not found")
    return found[0]


def list_pools(args: argparse.Namespace) -> int:
    """The pools bound to the workspace and the shared ones."""

    async def body(s: client.Session) -> list[str]:
        w = await by_name(s, args.workspace_name)
        req = v1.ListRPsBoundToWorkspaceRequest(workspace_id=w.id)
        return list((await s.call(s.stub.list_r_ps_bound_to_workspace(req))).resource_pools)

    pools = rpc.run(args.master, body)
    headers = ("Workspace", "Available Resource Pools")
    print(render.table(headers, [[args.workspace_name, ", ".join(pools)]]))
    return 0


def _print_workspaces(workspaces: list[v1.Workspace], args: argparse.Namespace) -> None:
    if getattr(args, "json", False):
        as_json: Any = [render.proto_json(w) for w in workspaces]
        print(render.to_json(as_json[0] if args.func is not list_workspaces else as_json))
        return
    rows = [
        [w.id, w.name, w.num_projects, w.default_compute_pool, w.default_aux_pool]
        for w in workspaces
    ]
    headers: tuple[str, ...] = WORKSPACE_HEADERS
    if args.func is not list_workspaces:
        headers = (*headers, "Checkpoint Storage Config")
        for row, w in zip(rows, workspaces, strict=True):
            storage = structs.to_dict(w.checkpoint_storage_config)
            row.append(json.dumps(storage) if storage is not None else "")
    print(render.table(headers, rows))


def list_workspaces(args: argparse.Namespace) -> int:
    req = v1.GetWorkspacesRequest(
        sort_by=v1.GetWorkspacesRequestSortBy[args.sort_by.upper()],
        order_by=_ORDER[args.order_by],
    )

    async def body(s: client.Session) -> list[v1.Workspace]:
        return list((await s.call(s.stub.get_workspaces(req))).workspaces)

    _print_workspaces(listing.page(rpc.run(args.master, body), args), args)
    return 0


MEMBER_HEADERS = ("User/Group Name", "User/Group", "Role Name")


def member_rows(found: v1.GetGroupsAndUsersAssignedToWorkspaceResponse) -> list[list[Any]]:
    """One row per role assignment on the workspace: its group ("G") or user ("U"), and the
    role's name."""
    groups = {g.group_id: g.name for g in found.groups}
    users = {u.id: u.username for u in found.users_assigned_directly}
    rows: list[list[Any]] = []
    for assigned in found.assignments:
        role = assigned.role.name if assigned.role is not None else ""
        rows += [[groups[g.group_id], "G", role] for g in assigned.group_role_assignments]
        rows += [[users[u.user_id], "U", role] for u in assigned.user_role_assignments]
    return rows


def list_members(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetGroupsAndUsersAssignedToWorkspaceResponse:
        w = await by_name(s, args.workspace_name)
        req = v1.GetGroupsAndUsersAssignedToWorkspaceRequest(workspace_id=w.id)
        return await s.call(s.stub.get_groups_and_users_assigned_to_workspace(req))

    found = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.message_dict(found)))
    elif args.yaml:
        print(render.to_yaml(render.message_dict(found)), end="")
    elif args.csv:
        print(render.csv(MEMBER_HEADERS, member_rows(found)), end="")
    else:
        print(render.table(MEMBER_HEADERS, member_rows(found)))
    return 0


def project_rows(projects: list[v1.Project]) -> list[list[Any]]:
    return [
        [p.id, p.key, p.name, p.description, p.num_experiments, p.num_active_experiments]
        for p in projects
    ]


def list_projects(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> list[v1.Project]:
        w = await by_name(s, args.workspace_name)
        req = v1.GetWorkspaceProjectsRequest(
            id=w.id,
            sort_by=v1.GetWorkspaceProjectsRequestSortBy[args.sort_by.upper()],
            order_by=_ORDER[args.order_by],
        )
        return list((await s.call(s.stub.get_workspace_projects(req))).projects)

    projects = listing.page(rpc.run(args.master, body), args)
    if args.json:
        print(render.to_json([render.proto_json(p) for p in projects]))
    else:
        print(render.table(PROJECT_HEADERS, project_rows(projects)))
    return 0


def create(args: argparse.Namespace) -> int:
    req = v1.PostWorkspaceRequest(
        name=args.name,
        checkpoint_storage_config=structs.from_dict(_storage(args)),
        default_compute_pool=args.default_compute_pool or "",
        default_aux_pool=args.default_aux_pool or "",
        agent_user_group=agent_user.group_of(args),
    )

    async def body(s: client.Session) -> v1.Workspace:
        resp = await s.call(s.stub.post_workspace(req))
        return rpc.present(resp.workspace, "workspace")

    _print_workspaces([rpc.run(args.master, body)], args)
    return 0


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Workspace:
        return await by_name(s, args.workspace_name)

    _print_workspaces([rpc.run(args.master, body)], args)
    return 0


def edit(args: argparse.Namespace) -> int:
    patch = v1.PatchWorkspace(
        name=args.name,
        checkpoint_storage_config=structs.from_dict(_storage(args)),
        default_compute_resource_pool=args.default_compute_pool,
        default_aux_resource_pool=args.default_aux_pool,
        agent_user_group=agent_user.group_of(args),
    )

    async def body(s: client.Session) -> v1.Workspace:
        w = await by_name(s, args.workspace_name)
        resp = await s.call(
            s.stub.patch_workspace(v1.PatchWorkspaceRequest(id=w.id, workspace=patch))
        )
        return rpc.present(resp.workspace, "workspace")

    _print_workspaces([rpc.run(args.master, body)], args)
    return 0


def archive(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        w = await by_name(s, args.workspace_name)
        if args.archiving:
            await s.call(s.stub.archive_workspace(v1.ArchiveWorkspaceRequest(id=w.id)))
        else:
            await s.call(s.stub.unarchive_workspace(v1.UnarchiveWorkspaceRequest(id=w.id)))

    rpc.run(args.master, body)
    done = "archived" if args.archiving else "un-archived"
    print(f"Successfully {done} workspace {args.workspace_name}.")
    return 0


def delete(args: argparse.Namespace) -> int:
    if not args.yes and not render.confirmed(
        f"deleting workspace {args.workspace_name!r}",
        f"Delete workspace {args.workspace_name!r} and its projects? This cannot be undone"
        " ('det workspace archive' hides it instead).",
    ):
        print("Aborting workspace deletion.")
        return 1

    async def body(s: client.Session) -> None:
        w = await by_name(s, args.workspace_name)
        await s.call(s.stub.delete_workspace(v1.DeleteWorkspaceRequest(id=w.id)))

    rpc.run(args.master, body)
    print(f"Successfully deleted workspace {args.workspace_name}.")
    return 0
