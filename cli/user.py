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
    p.set_defaults(func=logout)

    p = verbs.add_parser("whoami", help="show who is logged in")
    p.set_defaults(func=whoami)

    p = verbs.add_parser("list", aliases=["ls"], help="list users")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_users)

    p = verbs.add_parser("create", help="create a user (admins only)")
    p.add_argument("username")
    p.add_argument("--admin", action="store_true", help="give the user admin rights")
    p.add_argument(
        "--password",
        help="the new user's password (default: $DET_NEW_PASSWORD, else asked twice)",
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
    username = auth.wanted_user(address)
    if username is None or auth.cached_token(address, username) is None:
        print(f"Not logged in to {address}")
        return 0

    async def body(s: client.Session) -> None:
        s.token = auth.cached_token(address, username)
        try:
            await s.call(s.stub.logout(v1.LogoutRequest()))
        except errors.Unauthenticated:
            pass  # already over on the master's side

    rpc.run(args.master, body, authenticated=False)
    auth.forget(address, username)
    print(f"Logged out of {address} ({username})")
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

    users = rpc.run(args.master, body).users
    if args.json:
        print(render.to_json([render.message_dict(u) for u in users]))
        return 0
    rows = [[u.username, u.admin, u.active] for u in users]
    print(render.table(["Username", "Admin", "Active"], rows))
    return 0


def create(args: argparse.Namespace) -> int:
    password = _new_password(args.username, args.password)

    async def body(s: client.Session) -> v1.PostUserResponse:
        req = v1.PostUserRequest(username=args.username, password=password, admin=args.admin)
        return await s.call(s.stub.post_user(req))

    rpc.run(args.master, body)
    print(f"Created user {args.username}" + (" (admin)" if args.admin else ""))
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
