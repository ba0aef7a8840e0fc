"""``/proxy/<task id>/...``: a task's web page (a TensorBoard's) through the master's own
address, as Determined serves it.

The request needs a user's session (the ``det_session`` cookie or a Bearer token), and the
user must own the task or hold UPDATE_NSC (admins do); task and agent tokens are refused. It
is forwarded, without the master's credentials, to the host:port the task reported, and the
answer is
streamed back as it arrives. The task's server is told its path prefix, so its links and
redirects already point under ``/proxy/<task id>/``. aiohttp is the client: the agents'
docker runtime already depends on it (through aiodocker).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie

import aiohttp
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from determined.common import errors
from pydet.master.auth import rules as authz
from pydet.master.auth.authenticator import Authenticator
from pydet.master.auth.callers import UserCaller
from pydet.master.gateway import auth as gateway_auth
from pydet.master.service import Service

log = logging.getLogger(__name__)

# Headers that describe one hop, not the message; never forwarded either way.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)
_CHUNK = 64 * 1024
_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10.0, sock_read=300.0)


def _check_cross_site(request: Request) -> None:
    """A page on another site must not drive a task's page with the user's cookie."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise errors.PermissionDenied("cross-site requests are refused")


def _outgoing_headers(request: Request) -> dict[str, str]:
    headers = {}
    for name, value in request.headers.items():
        lower = name.lower()
        if lower in _HOP or lower == "authorization" or lower == "cookie":
            continue
        headers[name] = value
    # The task's own cookies pass; the master's session does not leave the master.
    cookie = SimpleCookie()
    cookie.load(request.headers.get("cookie", ""))
    kept = [f"{k}={m.coded_value}" for k, m in cookie.items() if k != gateway_auth.COOKIE]
    if kept:
        headers["Cookie"] = "; ".join(kept)
    return headers


def routes(auth: Authenticator, service: Service) -> list[Route]:
    async def authorized(request: Request) -> str:
        _check_cross_site(request)
        caller = await auth.authenticate(gateway_auth.token_of(request))
        if not isinstance(caller, UserCaller):
            raise errors.PermissionDenied("a task's page is for users; task tokens are refused")
        task_id = request.path_params["task_id"]
        address, owner = service.tensorboards.proxy_address(task_id)
        await authz.owns_task(caller, task_id, owner, request.app.state.lookup, "open")
        return address

    async def slash(request: Request) -> Response:
        await authorized(request)
        return RedirectResponse(f"/proxy/{request.path_params['task_id']}/", status_code=307)

    async def forward(request: Request) -> Response:
        address = await authorized(request)
        url = f"http://{address}{request.url.path}"
        if request.url.query:
            url += f"?{request.url.query}"
        body = await request.body()
        session = aiohttp.ClientSession(timeout=_TIMEOUT, auto_decompress=False)
        try:
            upstream = await session.request(
                request.method,
                url,
                headers=_outgoing_headers(request),
                data=body or None,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            await session.close()
            raise errors.Unavailable(
                f"task {request.path_params['task_id']} does not answer at {address}: {e}"
            ) from None
        headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}

        async def stream() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.content.iter_chunked(_CHUNK):
                    yield chunk
            finally:
                upstream.release()
                await session.close()

        return StreamingResponse(stream(), status_code=upstream.status, headers=headers)

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    return [
        Route("/proxy/{task_id}", slash, methods=methods),
        Route("/proxy/{task_id}/{path:path}", forward, methods=methods),
    ]
