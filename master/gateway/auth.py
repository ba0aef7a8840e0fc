"""Who may use the HTTP API, and from where.

Every ``/api/v1`` route but login needs a user's session: the ``det_session`` cookie that
login sets (HttpOnly, SameSite=Strict) or an ``Authorization: Bearer`` header for scripts.
Login answers Determined's LoginResponse: a script gets its token in the body, as from
Determined; a browser's login (it sends Origin with every POST) gets an empty token there,
the session being the cookie alone, which the page's scripts cannot read.
Task and agent tokens are refused here; tasks and agents speak gRPC. A state-changing
request must come from the master's own origin (its Origin header, when a browser sends
one, names this host) and, when the cookie is its session, must be ``application/json``;
that is what a page on another site cannot send without a CORS preflight, which this master
never answers. (A Bearer header is no ambient credential: a page cannot make a browser send
one, so such requests need no Content-Type.)
Changes to an experiment or job are checked against the same rule table as the gRPC API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors
from pydet.master.auth import rules as authz
from pydet.master.auth.authenticator import Authenticator
from pydet.master.auth.callers import UserCaller
from pydet.master.gateway import codec

COOKIE = "det_session"
OPEN_PATHS = frozenset({"/health", "/api/v1/auth/login"})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _bearer(request: HTTPConnection) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def token_of(request: HTTPConnection) -> str | None:
    return _bearer(request) or request.cookies.get(COOKIE) or None


def check_same_origin(request: Request) -> None:
    """Refuse a state-changing request that a page on another site could have sent."""
    if request.method in _SAFE_METHODS:
        return
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise errors.PermissionDenied("cross-site requests are refused")
    origin = request.headers.get("origin")
    if origin is not None:
        host = request.headers.get("host", "")
        if origin == "null" or urlsplit(origin).netloc.lower() != host.lower():
            raise errors.PermissionDenied(f"requests from origin {origin} are refused")
    # A page can make the browser send its cookie, never an Authorization header: a script's
    # Bearer request may leave the Content-Type out (Determined's clients POST actions
    # without a body).
    if request.method in ("POST", "PUT", "PATCH") and _bearer(request) is None:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise errors.InvalidArgument("request body: Content-Type must be application/json")


async def authenticate(request: Request, auth: Authenticator) -> UserCaller | None:
    """Check the request's credentials; None for the few open paths."""
    check_same_origin(request)
    if request.url.path in OPEN_PATHS:
        return None
    token = token_of(request)
    caller = await auth.authenticate(token)
    if not isinstance(caller, UserCaller):
        raise errors.PermissionDenied("the HTTP API is for users; tasks and agents use gRPC")
    request.state.caller = caller

    async def still_valid() -> bool:
        try:
            await auth.authenticate(token)
        except errors.DetError:
            return False
        return True

    request.state.session_check = still_valid
    return caller


def session_check(request: Request) -> Callable[[], Awaitable[bool]] | None:
    """For long responses (event streams): whether the request's session is still valid."""
    check = getattr(request.state, "session_check", None)
    return check if callable(check) else None


def caller(request: Request) -> UserCaller:
    found = getattr(request.state, "caller", None)
    if not isinstance(found, UserCaller):
        raise errors.Unauthenticated("no credentials: log in first")
    return found


async def authorize(request: Request, rpc: str, message: Any) -> None:
    """Check a change against the RPC's rule, as the gRPC API does."""
    lookup: authz.Lookup = request.app.state.lookup
    await authz.authorize(f"/v1.Determined/{rpc}", caller(request), message, lookup)


def _session_cookie(response: Response, request: Request, token: str, max_age: int) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


def routes(auth: Authenticator, session_lifetime: float) -> list[Route]:
    async def login(request: Request) -> Response:
        req = await codec.body(request, v1.LoginRequest)
        if req.is_hashed:
            raise errors.InvalidArgument(
                "isHashed: pydet takes the password itself (over TLS), not a client-side hash"
            )
        peer = request.client.host if request.client else ""
        resp = await auth.login(req.username, req.password, peer)
        token = resp.token
        if request.headers.get("origin") is not None:
            # A browser (it sends Origin with every POST): the session is the HttpOnly cookie
            # alone, out of reach of the page's scripts.
            resp.token = ""
        out = codec.message(resp)
        _session_cookie(out, request, token, int(session_lifetime))
        return out

    async def logout(request: Request) -> Response:
        await auth.logout(caller(request))
        out = JSONResponse({})
        out.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return out

    async def me(request: Request) -> Response:
        return codec.message(v1.GetMeResponse(user=await auth.me(caller(request))))

    return [
        Route("/api/v1/auth/login", login, methods=["POST"]),
        Route("/api/v1/auth/logout", logout, methods=["POST"]),
        Route("/api/v1/me", me, methods=["GET"]),
    ]
