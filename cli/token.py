"""`det token|tkn`: access tokens for scripts and CI, as Determined 0.38's CLI has them.

``create [USERNAME] [-e DAYS | --lifespan DURATION] [-d TEXT]`` prints the token once;
``list [USERNAME] [--show-inactive/-a]``, ``describe ID...``, ``edit ID -d TEXT``,
``revoke ID``; ``login TOKEN`` makes later commands act with the token (it is cached like a
session). A script can also set ``DET_USER`` and ``DET_USER_TOKEN`` instead of logging in,
or send it to the REST API as ``Authorization: Bearer TOKEN``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from determined.api.gen import v1
from determined.common import client, credentials, errors
from pydet.cli import Subparsers, names, render, rpc

# Determined's columns.
HEADERS = ("ID", "User ID", "Description", "Created At", "Expires At", "Revoked", "Token Type")


def add_parser(nouns: Subparsers) -> None:
    token = nouns.add_parser("token", aliases=["tkn"], help="manage access tokens")
    verbs = token.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    p = verbs.add_parser("describe", help="describe access tokens")
    p.add_argument("token_id", type=int, nargs="+", help="the ids of the tokens")
    _formats(p)
    p.set_defaults(func=describe)

    p = verbs.add_parser("list", aliases=["ls"], help="list access tokens")
    p.add_argument("username", nargs="?", default=None, help="only this user's tokens")
    p.add_argument(
        "-a",
        "--show-inactive",
        action="store_true",
        help="revoked and expired tokens too",
    )
    _formats(p)
    p.set_defaults(func=list_tokens)

    p = verbs.add_parser("revoke", help="revoke an access token (at once, for good)")
    p.add_argument("token_id", type=int, help="the id of the token")
    p.add_argument("--yes", action="store_true", help="accepted for scripts; revoke never asks")
    p.set_defaults(func=revoke)

    p = verbs.add_parser("create", help="create an access token (it is shown only once)")
    p.add_argument("username", nargs="?", default=None, help="whose token (default: yours)")
    span = p.add_mutually_exclusive_group()
    span.add_argument(
        "-e",
        "--expiration-days",
        type=int,
        default=None,
        help="days it lasts (-1: the longest the master allows; default: the master's)",
    )
    span.add_argument(
        "--lifespan",
        default=None,
        help="how long it lasts as a duration (72h, 30m, 90s); -1: the longest allowed",
    )
    p.add_argument("-d", "--description", default="", help="what the token is for")
    _formats(p)
    p.set_defaults(func=create)

    p = verbs.add_parser("edit", help="change an access token's description")
    p.add_argument("token_id", type=int, help="the id of the token")
    p.add_argument("-d", "--description", default=None, help="its new description")
    _formats(p)
    p.set_defaults(func=edit)

    p = verbs.add_parser("login", help="act with an access token from now on")
    p.add_argument("token", help="the access token")
    p.set_defaults(func=login)


def _formats(p: argparse.ArgumentParser) -> None:
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--yaml", action="store_true", help="print YAML")


def _print(args: argparse.Namespace, value: Any) -> bool:
    """``value`` as --json or --yaml asked; whether it was printed."""
    if getattr(args, "json", False):
        print(render.to_json(value))
    elif getattr(args, "yaml", False):
        print(render.to_yaml(value), end="")
    else:
        return False
    return True


def _table(tokens: Sequence[v1.TokenInfo]) -> str:
    rows = [
        [
            t.id,
            t.user_id,
            t.description,
            render.local_time(t.created_at),
            render.local_time(t.expiry),
            t.revoked,
            f"TOKEN_TYPE_{render.state_name(t.token_type)}",
        ]
        for t in tokens
    ]
    return render.table(HEADERS, rows)


def _show(args: argparse.Namespace, tokens: Sequence[v1.TokenInfo]) -> None:
    if not _print(args, [render.message_dict(t) for t in tokens]):
        print(_table(tokens))


def describe(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetAccessTokensResponse:
        req = v1.GetAccessTokensRequest(token_ids=args.token_id, show_inactive=True)
        return await s.call(s.stub.get_access_tokens(req))

    found = rpc.run(args.master, body).token_info
    missing = sorted(set(args.token_id) - {t.id for t in found})
    if missing:
        raise errors.NotFound(f"access token {missing[0]} not found (or it is not yours to see)")
    _show(args, found)
    return 0


def list_tokens(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.GetAccessTokensResponse:
        req = v1.GetAccessTokensRequest(
            username=args.username or "", show_inactive=args.show_inactive
        )
        return await s.call(s.stub.get_access_tokens(req))

    _show(args, rpc.run(args.master, body).token_info)
    return 0


def _patch(args: argparse.Namespace, req: v1.PatchAccessTokenRequest) -> v1.TokenInfo:
    async def body(s: client.Session) -> v1.PatchAccessTokenResponse:
        return await s.call(s.stub.patch_access_token(req))

    return rpc.present(rpc.run(args.master, body).token_info, "token")


def revoke(args: argparse.Namespace) -> int:
    info = _patch(args, v1.PatchAccessTokenRequest(token_id=args.token_id, set_revoked=True))
    print(render.to_json({"token_info": render.message_dict(info)}))
    print(f"Successfully revoked token {args.token_id}.")
    return 0


def edit(args: argparse.Namespace) -> int:
    req = v1.PatchAccessTokenRequest(token_id=args.token_id, description=args.description)
    info = _patch(args, req)
    if not _print(args, {"token_info": render.message_dict(info)}):
        print(render.to_json({"token_info": render.message_dict(info)}))
        print(f"Successfully updated token with ID: {args.token_id}.")
    return 0


def _lifespan(args: argparse.Namespace) -> str | None:
    if args.lifespan is not None:
        return str(args.lifespan)
    if args.expiration_days is None:
        return None
    # Determined's CLI sends days as hours in Go's duration syntax.
    return "-1" if args.expiration_days == -1 else f"{24 * args.expiration_days}h"


def create(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.PostAccessTokenResponse:
        username = args.username
        if username is None:
            me = await s.call(s.stub.get_me(v1.GetMeRequest()))
            username = rpc.present(me.user, "user").username
        (user_id,) = await names.user_ids(s, [username])
        req = v1.PostAccessTokenRequest(
            user_id=user_id, lifespan=_lifespan(args), description=args.description
        )
        return await s.call(s.stub.post_access_token(req))

    made = rpc.run(args.master, body)
    if not _print(args, render.message_dict(made)):
        print(f"TokenID: {made.token_id}\nAccess-Token: {made.token}")
    return 0


def login(args: argparse.Namespace) -> int:
    address = client.master_address(args.master)

    async def body(s: client.Session) -> v1.GetMeResponse:
        s.token = args.token
        return await s.call(s.stub.get_me(v1.GetMeRequest()))

    user = rpc.present(rpc.run(address, body, authenticated=False).user, "user")
    credentials.remember(address, user.username, args.token, active=True)
    print(f"Authenticated as {user.username}.")
    return 0
