"""`det user-group`: user groups, as Determined 0.38's CLI has them (create, delete, list,
describe, add-user, remove-user, change-name). Groups are managed by users whose role
updates groups (ClusterAdmin); a user sees the groups they are in."""

from __future__ import annotations

import argparse

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, listing, names, render, rpc

# Determined's columns (its render_objects titles the field names).
GROUP_KEYS = ("groupId", "name", "numMembers")
USER_KEYS = ("id", "username", "displayName", "admin", "active", "agentUserGroup", "modifiedAt")


def add_parser(nouns: Subparsers) -> None:
    group = nouns.add_parser("user-group", help="manage user groups")
    verbs = group.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    p = verbs.add_parser("create", help="create a user group")
    p.add_argument("group_name", help="name of the user group to create")
    p.add_argument(
        "--add-user",
        action="append",
        default=[],
        help="a user to add to it (may be given several times)",
    )
    p.set_defaults(func=create)

    p = verbs.add_parser("delete", help="delete a user group")
    p.add_argument("group_name", help="name of the user group to delete")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=delete)

    p = verbs.add_parser("list", aliases=["ls"], help="list user groups")
    listing.add_pagination(p)
    p.add_argument("--groups-user-belongs-to", default=None, help="only this user's groups")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_groups)

    p = verbs.add_parser("describe", help="describe a user group and list its members")
    p.add_argument("group_name", help="name of the user group")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)

    for verb, adding in (("add-user", True), ("remove-user", False)):
        p = verbs.add_parser(
            verb, help=f"{'add users to' if adding else 'remove users from'} a group"
        )
        p.add_argument("group_name", help="name of the user group")
        p.add_argument("usernames", help="comma-separated usernames")
        p.set_defaults(func=change_members, adding=adding)

    p = verbs.add_parser("change-name", help="rename a user group")
    p.add_argument("old_group_name", help="its name now")
    p.add_argument("new_group_name", help="its new name")
    p.set_defaults(func=change_name)


def _usernames(text: str) -> list[str]:
    found = [u.strip() for u in text.split(",") if u.strip()]
    if not found:
        raise errors.InvalidArgument("usernames: name at least one user")
    return found


def create(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.CreateGroupResponse:
        ids = await names.user_ids(s, args.add_user)
        req = v1.CreateGroupRequest(name=args.group_name, add_users=ids)
        return await s.call(s.stub.create_group(req))

    group = rpc.present(rpc.run(args.master, body).group, "group")
    print(f"user group with name {group.name} and ID {group.group_id} created")
    if group.users:
        print(f"{', '.join(u.username for u in group.users)} was added to the group")
    return 0


def delete(args: argparse.Namespace) -> int:
    if not args.yes and not render.confirmed(
        f"deleting group {args.group_name!r}",
        "Deleting a group deletes it and its members' membership for good. Proceed?",
    ):
        print("Skipping group deletion.")
        return 1

    async def body(s: client.Session) -> int:
        group_id = await names.group_id(s, args.group_name)
        await s.call(s.stub.delete_group(v1.DeleteGroupRequest(group_id=group_id)))
        return group_id

    group_id = rpc.run(args.master, body)
    print(f"user group with name {args.group_name} and ID {group_id} deleted")
    return 0


def list_groups(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetGroupsResponse:
        user_id = 0
        if args.groups_user_belongs_to:
            (user_id,) = await names.user_ids(s, [args.groups_user_belongs_to])
        limit = args.limit if args.pages == "1" else 0
        req = v1.GetGroupsRequest(user_id=user_id, offset=args.offset, limit=limit)
        return await s.call(s.stub.get_groups(req))

    found = rpc.run(args.master, body).groups
    if args.json:
        print(render.to_json({"groups": [render.message_dict(g) for g in found]}))
        return 0
    rows = [
        {"groupId": g.group.group_id, "name": g.group.name, "numMembers": g.num_members}
        for g in found
        if g.group is not None
    ]
    print(render.objects(GROUP_KEYS, rows))
    return 0


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetGroupResponse:
        group_id = await names.group_id(s, args.group_name)
        return await s.call(s.stub.get_group(v1.GetGroupRequest(group_id=group_id)))

    group = rpc.present(rpc.run(args.master, body).group, "group")
    if args.json:
        print(render.to_json(render.message_dict(group)))
        return 0
    print(f"group ID {group.group_id} group name {group.name} with users added")
    rows = [
        {
            "id": u.id,
            "username": u.username,
            "displayName": u.display_name or None,
            "admin": u.admin,
            "active": u.active,
            "agentUserGroup": None,
            "modifiedAt": render.local_time(u.modified_at),
        }
        for u in group.users
    ]
    print(render.objects(USER_KEYS, rows))
    return 0


def change_members(args: argparse.Namespace) -> int:
    usernames = _usernames(args.usernames)

    async def body(s: client.Session) -> tuple[v1.GroupDetails | None, list[int]]:
        group_id = await names.group_id(s, args.group_name)
        ids = await names.user_ids(s, usernames)
        req = v1.UpdateGroupRequest(group_id=group_id)
        if args.adding:
            req.add_users = ids
        else:
            req.remove_users = ids
        return (await s.call(s.stub.update_group(req))).group, ids

    found, ids = rpc.run(args.master, body)
    group = rpc.present(found, "group")
    print(f"user group with ID {group.group_id} name {group.name}")
    done = "added to group" if args.adding else "removed from the group"
    for user_id, username in zip(ids, usernames, strict=True):
        print(f"user {done} with username {username} and ID {user_id}")
    return 0


def change_name(args: argparse.Namespace) -> int:
    if not args.new_group_name.strip():
        raise errors.InvalidArgument("new_group_name: must not be empty")

    async def body(s: client.Session) -> v1.UpdateGroupResponse:
        group_id = await names.group_id(s, args.old_group_name)
        req = v1.UpdateGroupRequest(group_id=group_id, name=args.new_group_name)
        return await s.call(s.stub.update_group(req))

    group = rpc.present(rpc.run(args.master, body).group, "group")
    print(
        f"user group with ID {group.group_id} name changed from {args.old_group_name} to"
        f" {group.name}"
    )
    return 0
