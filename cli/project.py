"""`det project|p`: a workspace's projects, as Determined's CLI has them (list,
list-experiments, create, describe, edit, archive, unarchive, delete) and `move` to another
workspace. A project is named by its workspace's name and its own."""

from __future__ import annotations

import argparse

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, listing, render, rpc, workspace


def add_parser(nouns: Subparsers) -> None:
    proj = nouns.add_parser("project", aliases=["p"], help="manage projects")
    verbs = proj.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    p = verbs.add_parser("list", aliases=["ls"], help="list the projects of a workspace")
    p.add_argument("workspace_name", metavar="WORKSPACE")
    workspace.add_sort_flags(p, "projects")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=workspace.list_projects)

    p = _named(verbs, "list-experiments", "list the experiments of a project")
    _experiment_flags(p)
    workspace.add_sort_flags(p, "experiments")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_experiments)

    p = verbs.add_parser("create", help="create a project")
    p.add_argument("workspace_name", metavar="WORKSPACE")
    p.add_argument("name", metavar="NAME", help="its name (unique in its workspace)")
    p.add_argument("--description", default="", help="what it is for")
    p.add_argument("--key", help="its key (1 to 5 letters and digits; default: made up)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=create)

    p = _named(verbs, "describe", "describe a project and list its experiments")
    _experiment_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)

    p = _named(verbs, "edit", "rename a project or change its description or key")
    p.add_argument("--new_name", "--new-name", dest="new_name", help="its new name")
    p.add_argument("--description", help="its new description")
    p.add_argument("--key", help="its new key")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=edit)

    for verb in ("archive", "unarchive"):
        _named(verbs, verb, f"{verb} a project").set_defaults(
            func=archive, archiving=verb == "archive"
        )

    p = _named(verbs, "move", "move a project (with its experiments) to another workspace")
    p.add_argument("destination", metavar="DESTINATION_WORKSPACE")
    p.set_defaults(func=move)

    p = _named(verbs, "delete", "delete a project that holds no experiment")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=delete)


def _named(verbs: Subparsers, name: str, help_text: str) -> argparse.ArgumentParser:
    p = verbs.add_parser(name, help=help_text)
    p.add_argument("workspace_name", metavar="WORKSPACE")
    p.add_argument("project_name", metavar="PROJECT")
    return p


def _experiment_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-a",
        "--all",
        action="store_true",
        help="show all experiments (including archived and other users')",
    )


async def by_name(s: client.Session, workspace_name: str, project_name: str) -> v1.Project:
    """The project ``project_name`` of workspace ``workspace_name``; NotFound naming the one
    that is missing."""
    w = await workspace.by_name(s, workspace_name)
    req = v1.GetWorkspaceProjectsRequest(id=w.id, name=project_name)
    found = [
        p
        for p in (await s.call(s.stub.get_workspace_projects(req))).projects
        if p.name == project_name
    ]
    if not found:
        raise errors.NotFound(f"project {project_name!r} not found in workspace {workspace_name!r}")
    return found[0]


def _show(project: v1.Project, as_json: bool) -> None:
    if as_json:
        print(render.to_json(render.proto_json(project)))
    else:
        print(render.table(workspace.PROJECT_HEADERS, workspace.project_rows([project])))


async def _experiments(
    s: client.Session, project: v1.Project, args: argparse.Namespace
) -> list[v1.Experiment]:
    req = v1.GetExperimentsRequest(
        project_id=project.id,
        sort_by=v1.GetExperimentsRequestSortBy[str(getattr(args, "sort_by", "id")).upper()],
        order_by=v1.OrderBy.DESC if getattr(args, "order_by", "asc") == "desc" else v1.OrderBy.ASC,
    )
    if not args.all:
        me = rpc.present((await s.call(s.stub.get_me(v1.GetMeRequest()))).user, "user")
        req.archived = False
        req.users = [me.username]
    return list((await s.call(s.stub.get_experiments(req))).experiments)


def _print_experiments(experiments: list[v1.Experiment], args: argparse.Namespace) -> None:
    headers = [*render.EXPERIMENT_HEADERS, *(["Archived"] if args.all else [])]
    rows = [render.experiment_row(e) + ([e.archived] if args.all else []) for e in experiments]
    print(render.table(headers, rows))


def list_experiments(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> list[v1.Experiment]:
        return await _experiments(s, await by_name(s, args.workspace_name, args.project_name), args)

    experiments = listing.page(rpc.run(args.master, body), args)
    if args.json:
        print(render.to_json([render.message_dict(e) for e in experiments]))
    else:
        _print_experiments(experiments, args)
    return 0


def create(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Project:
        w = await workspace.by_name(s, args.workspace_name)
        req = v1.PostProjectRequest(
            workspace_id=w.id, name=args.name, description=args.description, key=args.key
        )
        return rpc.present((await s.call(s.stub.post_project(req))).project, "project")

    _show(rpc.run(args.master, body), args.json)
    return 0


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> tuple[v1.Project, list[v1.Experiment]]:
        found = await by_name(s, args.workspace_name, args.project_name)
        return found, ([] if args.json else await _experiments(s, found, args))

    found, experiments = rpc.run(args.master, body)
    _show(found, args.json)
    if not args.json:
        print("\nAssociated Experiments")
        _print_experiments(experiments, args)
    return 0


def edit(args: argparse.Namespace) -> int:
    patch = v1.PatchProject(name=args.new_name, description=args.description, key=args.key)

    async def body(s: client.Session) -> v1.Project:
        found = await by_name(s, args.workspace_name, args.project_name)
        req = v1.PatchProjectRequest(id=found.id, project=patch)
        return rpc.present((await s.call(s.stub.patch_project(req))).project, "project")

    _show(rpc.run(args.master, body), args.json)
    return 0


def archive(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        found = await by_name(s, args.workspace_name, args.project_name)
        if args.archiving:
            await s.call(s.stub.archive_project(v1.ArchiveProjectRequest(id=found.id)))
        else:
            await s.call(s.stub.unarchive_project(v1.UnarchiveProjectRequest(id=found.id)))

    rpc.run(args.master, body)
    done = "archived" if args.archiving else "un-archived"
    print(f"Successfully {done} project {args.project_name}.")
    return 0


def move(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        found = await by_name(s, args.workspace_name, args.project_name)
        destination = await workspace.by_name(s, args.destination)
        req = v1.MoveProjectRequest(project_id=found.id, destination_workspace_id=destination.id)
        await s.call(s.stub.move_project(req))

    rpc.run(args.master, body)
    print(f"Moved project {args.project_name} to workspace {args.destination}.")
    return 0


def delete(args: argparse.Namespace) -> int:
    if not args.yes and not render.confirmed(
        f"deleting project {args.project_name!r}",
        f"Delete project {args.project_name!r} of workspace {args.workspace_name!r} and its"
        " notes? This cannot be undone ('det project archive' hides it instead).",
    ):
        print("Aborting project deletion.")
        return 1

    async def body(s: client.Session) -> None:
        found = await by_name(s, args.workspace_name, args.project_name)
        await s.call(s.stub.delete_project(v1.DeleteProjectRequest(id=found.id)))

    rpc.run(args.master, body)
    print(f"Successfully deleted project {args.project_name}.")
    return 0
