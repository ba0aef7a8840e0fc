"""`det user ...`: log in and out, and manage users (Determined's command names)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, agent_user, auth, render, rpc


def add_parser(nouns: Subparsers) -> None:
    user = nouns.add_parser("user", aliases=["u"], help="log in and out; manage users")
    verbs = user.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    p = verbs.add_parser("login", help="log in (the password is read without echo)")
    p.add_argument("username", nargs="?", help=f"who to log in as (default: {auth.DEFAULT_USER})")
    p.set_defaults(func=login)

    p = verbs.add_parser("logout", help="end this user's session on the master")
    p.add_argument(
        "-a", "--all", action="store_true", help="end every session cached for this master"
    )
    p.set_defaults(func=logout)

    p = verbs.add_parser("whoami", help="show who is logged in")
    p.set_defaults(func=whoami)

    p = verbs.add_parser("list", aliases=["ls"], help="list active users")
    p.add_argument("-a", "--all", action="store_true", help="deactivated users too")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_users)

    p = verbs.add_parser("rename", help="change a user's name (one's own; admins: anyone's)")
    p.add_argument("target_user", help="the user's name now")
    p.add_argument("new_username", help="their new name")
    p.set_defaults(func=rename)

    p = verbs.add_parser("edit", help="change a user (their display name; admins: the rest)")
    p.add_argument("target_user", help="the user")
    p.add_argument("--display-name", default=None, help="the name the WebUI shows")
    p.add_argument("--username", default=None, help="a new username")
    p.add_argument(
        "--active", type=_boolean, metavar="(true|false)", default=None, help="(de)activate"
    )
    p.add_argument(
        "--admin",
        type=_boolean,
        metavar="(true|false)",
        default=None,
        help="make an admin (ClusterAdmin) or not",
    )
    p.add_argument(
        "--remote",
        type=_boolean,
        metavar="(true|false)",
        default=None,
        help="a remote (single sign-on) user, without a password (admins only)",
    )
    p.set_defaults(func=edit)

    p = verbs.add_parser("create", help="create a user (admins only)")
    p.add_argument("username")
    p.add_argument("--admin", action="store_true", help="give the user admin rights")
    p.add_argument(
        "--password",
        help="the new user's password (default: $DET_NEW_PASSWORD, else asked twice)",
    )
    p.add_argument(
        "--remote",
        action="store_true",
        help="a user who signs on elsewhere (an identity provider): no password",
    )
    p.set_defaults(func=create)

    p = verbs.add_parser("change-password", help="change your password or (admins) another's")
    p.add_argument("username", nargs="?", help="whose password (default: yours)")
    p.set_defaults(func=change_password)

    for verb, active in (("activate", True), ("deactivate", False)):
        p = verbs.add_parser(verb, help=f"{verb} a user (admins only)")
        p.add_argument("username")
        p.set_defaults(func=set_active, active=active)

    agent_user.add_parser(verbs)


def _new_password(label: str, given: str | None = None) -> str:
    if given is not None:
        return given
    env = os.environ.get("DET_NEW_PASSWORD")
    if env is not None:
        return env
    if not sys.stdin.isatty():
        raise errors.InvalidArgument(
            f"no terminal to ask for {label}'s new password on: set DET_NEW_PASSWORD"
        )
    first = getpass.getpass(f"New password for user '{label}': ")
    if getpass.getpass("Confirm password: ") != first:
        raise errors.InvalidArgument("the passwords do not match")
    return first


def login(args: argparse.Namespace) -> int:
    address = client.master_address(args.master)
    username = args.username or auth.wanted_user(address) or auth.DEFAULT_USER

    async def body(s: client.Session) -> str:
        return await auth.login(s, username, auth.read_password(username), active=True)

    rpc.run(args.master, body, authenticated=False)
    print(f"Logged in to {address} as {username}")
    return 0


def logout(args: argparse.Namespace) -> int:
    address = client.master_address(args.master)
    if args.all:
        users = auth.cached_users(address)
    else:
        username = auth.wanted_user(address)
        cached = username is not None and auth.cached_token(address, username) is not None
        users = [username] if username is not None and cached else []
    if not users:
        print(f"Not logged in to {address}")
        return 0

    async def body(s: client.Session) -> None:
        for username in users:
            s.token = auth.cached_token(address, username)
            try:
                await s.call(s.stub.logout(v1.LogoutRequest()))
            except errors.Unauthenticated:
                pass  # already over on the master's side

    rpc.run(args.master, body, authenticated=False)
    for username in users:
        auth.forget(address, username)
    print(f"Logged out of {address} ({', '.join(users)})")
    return 0


def whoami(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetMeResponse:
        return await s.call(s.stub.get_me(v1.GetMeRequest()))

    user = rpc.present(rpc.run(args.master, body).user, "user")
    print(f"You are logged in as user '{user.username}'" + (" (admin)" if user.admin else ""))
    return 0


def list_users(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetUsersResponse:
        return await s.call(s.stub.get_users(v1.GetUsersRequest()))

    users = [u for u in rpc.run(args.master, body).users if args.all or u.active]
    if args.json:
        print(render.to_json([render.message_dict(u) for u in users]))
        return 0
    rows = [[u.username, u.admin, u.active, u.display_name] for u in users]
    print(render.table(["Username", "Admin", "Active", "Display Name"], rows))
    return 0


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "t", "yes", "y", "1"):
        return True
    if lowered in ("false", "f", "no", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def _patch(args: argparse.Namespace, username: str, change: v1.PatchUser) -> v1.User:
    """Determined's PatchUser: the user by id, and what changes."""

    async def body(s: client.Session) -> v1.PatchUserResponse:
        target = await s.call(
            s.stub.get_user_by_username(v1.GetUserByUsernameRequest(username=username))
        )
        user_id = target.user.id if target.user is not None else 0
        req = v1.PatchUserRequest(user_id=user_id, user=change)
        return await s.call(s.stub.patch_user(req))

    return rpc.present(rpc.run(args.master, body).user, "user")


def rename(args: argparse.Namespace) -> int:
    _patch(args, args.target_user, v1.PatchUser(username=args.new_username))
    print(f"Renamed user {args.target_user} to {args.new_username}")
    return 0


def edit(args: argparse.Namespace) -> int:
    """Determined's ``det user edit``: the fields given change, and are named."""
    change = v1.PatchUser()
    changes = []
    if args.display_name is not None:
        change.display_name = args.display_name
        changes.append("Display Name")
    if args.remote is not None:
        change.remote = args.remote
        changes.append("Remote")
    if args.active is not None:
        change.active = args.active
        changes.append("Active")
    if args.username is not None:
        change.username = args.username
        changes.append("Username")
    if args.admin is not None:
        change.admin = args.admin
        changes.append("Admin")
    if not changes:
        raise errors.InvalidArgument("No field provided. Use 'det user edit -h' for usage.")
    _patch(args, args.target_user, change)
    print("Changes made to the following fields: " + ", ".join(changes))
    return 0


def create(args: argparse.Namespace) -> int:
    password = "" if args.remote else _new_password(args.username, args.password)

    async def body(s: client.Session) -> v1.PostUserResponse:
        req = v1.PostUserRequest(
            username=args.username, password=password, admin=args.admin, remote=args.remote
        )
        return await s.call(s.stub.post_user(req))

    rpc.run(args.master, body)
    kind = " (admin)" if args.admin else ""
    print(f"Created {'remote ' if args.remote else ''}user {args.username}{kind}")
    return 0


def change_password(args: argparse.Namespace) -> int:
    address = client.master_address(args.master)
    username = args.username or auth.wanted_user(address)
    if username is None:
        raise auth.not_logged_in(address)
    password = _new_password(username)

    async def body(s: client.Session) -> None:
        req = v1.SetUserPasswordRequest(username=username, password=password)
        await s.call(s.stub.set_user_password(req))

    rpc.run(args.master, body)
    print(f"Changed the password of {username}")
    return 0


def set_active(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.PatchUserResponse:
        req = v1.PatchUserRequest(username=args.username, active=args.active)
        return await s.call(s.stub.patch_user(req))

    rpc.run(args.master, body)
    print(f"{'Activated' if args.active else 'Deactivated'} user {args.username}")
    return 0
