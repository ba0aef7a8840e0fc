"""The agent user and group tasks run as on the agents (Determined's agent user group):
`det user link-with-agent-user USER`, and `det workspace create|edit --agent-uid ...`
(a workspace's, over its tasks' owners' own). Admins set them; an agent running as root
runs each task as its identity, one that is not root refuses such tasks."""

from __future__ import annotations

import argparse

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, rpc

FLAGS = ("agent_uid", "agent_user", "agent_gid", "agent_group")


def add_flags(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """--agent-uid, --agent-user, --agent-gid, --agent-group (given together)."""
    p.add_argument("--agent-uid", type=int, required=required, metavar="UID", help="its uid")
    p.add_argument("--agent-user", required=required, metavar="NAME", help="its user name")
    p.add_argument("--agent-gid", type=int, required=required, metavar="GID", help="its gid")
    p.add_argument("--agent-group", required=required, metavar="NAME", help="its group name")


def group_of(args: argparse.Namespace) -> v1.AgentUserGroup | None:
    """The identity the flags give; None when none is given, an error when only some are."""
    given = {f: getattr(args, f, None) for f in FLAGS}
    if all(v is None for v in given.values()):
        return None
    missing = [f"--{f.replace('_', '-')}" for f, v in given.items() if v is None]
    if missing:
        raise errors.InvalidArgument(
            f"{', '.join(missing)}: the agent uid, user, gid and group are given together"
        )
    return v1.AgentUserGroup(**given)


def add_parser(user_verbs: Subparsers) -> None:
    p = user_verbs.add_parser(
        "link-with-agent-user", help="run a user's tasks as this agent user and group (admins)"
    )
    p.add_argument("det_username", metavar="USER")
    add_flags(p, required=True)
    p.set_defaults(func=link)


def link(args: argparse.Namespace) -> int:
    change = v1.PatchUser(agent_user_group=group_of(args))

    async def body(s: client.Session) -> None:
        found = await s.call(
            s.stub.get_user_by_username(v1.GetUserByUsernameRequest(username=args.det_username))
        )
        user = rpc.present(found.user, "user")
        await s.call(s.stub.patch_user(v1.PatchUserRequest(user_id=user.id, user=change)))

    rpc.run(args.master, body)
    print(
        f"Linked user {args.det_username} with agent user {args.agent_user} (uid "
        f"{args.agent_uid}) and group {args.agent_group} (gid {args.agent_gid})"
    )
    return 0
