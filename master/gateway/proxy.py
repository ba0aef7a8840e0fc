"""``/proxy/<task id>/...``: a task's web page or service through the master's own address,
as Determined serves it: HTTP requests, WebSockets (a notebook's kernels and terminals), and
a shell's TCP port tunnelled through a WebSocket (its ssh's ProxyCommand).

Every request and WebSocket needs a user's session (the ``det_session`` cookie or a Bearer
token), and the user must own the task or hold UPDATE_NSC (admins do); task and agent tokens
are refused, and a refusal says nothing about the task. A state-changing request or a
WebSocket must come from the master's own origin. It goes, without the master's credentials,
only where ``tasks.generic`` allows for the task (its own agent's address, a port declared
for it), with the headers its kind adds (a notebook's token, which its users never see);
answers are streamed back as they arrive and each one counts as the task's activity (idle
timeouts). The task's server is told its path prefix, so its links and redirects already
point under ``/proxy/<task id>/``. HTTP requests go over ``upstream``'s connections, kept
open per task; aiohttp is the WebSockets' client (the agents' docker runtime already
depends on it, through aiodocker).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from determined.common import errors
from pydet.master.auth import rules as authz
from pydet.master.auth.authenticator import Authenticator
from pydet.master.auth.callers import UserCaller
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway.upstream import UpstreamError, Upstreams
from pydet.master.service import Service
from pydet.master.tasks.generic import ProxyTarget

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
# A WebSocket's handshake headers: the client to upstream makes its own.
_HANDSHAKE = frozenset(
    {
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
        "sec-websocket-accept",
    }
)
# A request's own, not passed on: the master's credentials (the task's headers and cookies
# are added back), and the framing of a body that is forwarded whole.
_REQUEST_ONLY = frozenset({"authorization", "cookie", "content-length", "expect"})
# What the tunnel reads from a shell's port at once at most: large, so that a copy costs
# few writes (a read returns what has arrived, so nothing waits for it).
_CHUNK = 1024 * 1024
# How long a request waits for the agent of its task to connect (after a master restart
# the agent reconnects within seconds) before it is answered 503.
_AGENT_WAIT = 15.0
_WS_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10.0)


def _check_cross_site(conn: HTTPConnection, *, websocket: bool = False) -> None:
    """A page on another site must not drive a task's page with the user's cookie (a
    WebSocket is never subject to the same-origin policy, so its Origin is checked too)."""
    if not websocket and conn.scope.get("method") in ("GET", "HEAD", "OPTIONS"):
        return
    if conn.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise errors.PermissionDenied("cross-site requests are refused")
    origin = conn.headers.get("origin")
    if websocket and origin is not None:
        host = conn.headers.get("host", "")
        if origin == "null" or urlsplit(origin).netloc.lower() != host.lower():
            raise errors.PermissionDenied(f"WebSockets from origin {origin} are refused")


def _outgoing_headers(conn: HTTPConnection, target: ProxyTarget) -> dict[str, str]:
    headers = {}
    for name, value in conn.headers.items():
        lower = name.lower()
        if lower in _HOP or lower in _HANDSHAKE or lower in _REQUEST_ONLY:
            continue
        headers[name] = value
    # The task's own cookies pass; the master's session does not leave the master.
    cookie = SimpleCookie()
    cookie.load(conn.headers.get("cookie", ""))
    kept = [f"{k}={m.coded_value}" for k, m in cookie.items() if k != gateway_auth.COOKIE]
    if kept:
        headers["Cookie"] = "; ".join(kept)
    headers.update(target.headers)
    return headers


def _denied(e: errors.DetError) -> Response:
    return JSONResponse({"error": e.message}, status_code=e.http_status)


async def _pipe(*pumps: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run the pumps until the first of them ends, then stop the others."""
    tasks = [asyncio.create_task(pump()) for pump in pumps]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def routes(auth: Authenticator, service: Service) -> list[BaseRoute]:
    upstreams = Upstreams()

    async def authorized(conn: HTTPConnection, *, websocket: bool = False) -> ProxyTarget:
        _check_cross_site(conn, websocket=websocket)
        caller = await auth.authenticate(gateway_auth.token_of(conn))
        if not isinstance(caller, UserCaller):
            raise errors.PermissionDenied("a task's page is for users; task tokens are refused")
        task_id = conn.path_params["task_id"]
        owner = service.generic.owner_of(task_id)
        if owner is not None:  # else proxy_target says there is no such task
            await authz.owns_task(caller, task_id, owner, conn.app.state.lookup, "open")
        target = await service.generic.proxy_target_once_connected(task_id, _AGENT_WAIT)
        service.generic.record_activity(task_id)
        return target

    async def slash(request: Request) -> Response:
        await authorized(request)
        return RedirectResponse(f"/proxy/{request.path_params['task_id']}/", status_code=307)

    async def forward(request: Request) -> Response:
        target = await authorized(request)
        if target.tcp:
            raise errors.InvalidArgument(
                f"task {target.task_id} serves a TCP port: reach it through a WebSocket "
                "(det shell open)"
            )
        body = await request.body()
        # The target as the client sent it, still percent-encoded.
        path = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
        if query := request.scope.get("query_string", b""):
            path += "?" + query.decode("latin-1")
        try:
            upstream = await upstreams.request(
                target.address,
                request.method,
                path,
                list(_outgoing_headers(request, target).items()),
                body,
            )
        except UpstreamError as e:
            raise errors.Unavailable(
                f"task {target.task_id} does not answer at {target.address}: {e}"
            ) from None

        async def stream() -> AsyncIterator[bytes]:
            try:
                async for piece in upstream.body():
                    yield piece
            finally:
                upstream.close()

        response = StreamingResponse(stream(), status_code=upstream.status)
        # Raw, so that repeated headers (Set-Cookie) pass as they came.
        response.raw_headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in upstream.headers
            if k.lower() not in _HOP
        ]
        return response

    async def websocket(ws: WebSocket) -> None:
        try:
            target = await authorized(ws, websocket=True)
            if target.tcp:
                await _tunnel(ws, target)
            else:
                await _forward_websocket(ws, target)
        except errors.DetError as e:
            if ws.client_state is WebSocketState.CONNECTING:
                await ws.send_denial_response(_denied(e))

    async def _forward_websocket(ws: WebSocket, target: ProxyTarget) -> None:
        url = f"ws://{target.address}{ws.url.path}"
        if ws.url.query:
            url += f"?{ws.url.query}"
        offered = [str(p) for p in ws.scope.get("subprotocols") or ()]
        async with aiohttp.ClientSession(timeout=_WS_TIMEOUT) as session:
            try:
                upstream = await session.ws_connect(
                    url,
                    headers=_outgoing_headers(ws, target),
                    protocols=offered,
                    max_msg_size=0,
                    autoping=True,
                )
            except aiohttp.WSServerHandshakeError as e:
                await ws.send_denial_response(
                    JSONResponse(
                        {"error": f"the task refused the WebSocket: {e.message}"}, e.status
                    )
                )
                return
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                raise errors.Unavailable(
                    f"task {target.task_id} does not answer at {target.address}: {e}"
                ) from None
            await ws.accept(subprotocol=upstream.protocol)
            activity = service.generic.record_activity

            async def up() -> None:
                while True:
                    message = await ws.receive()
                    if message["type"] == "websocket.disconnect":
                        await upstream.close(code=int(message.get("code") or 1000))
                        return
                    activity(target.task_id)
                    if message.get("bytes") is not None:
                        await upstream.send_bytes(message["bytes"])
                    elif message.get("text") is not None:
                        await upstream.send_str(message["text"])

            async def down() -> None:
                async for message in upstream:
                    activity(target.task_id)
                    if message.type == aiohttp.WSMsgType.TEXT:
                        await ws.send_text(message.data)
                    elif message.type == aiohttp.WSMsgType.BINARY:
                        await ws.send_bytes(message.data)
                with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):
                    await ws.close(code=upstream.close_code or 1000)

            try:
                await _pipe(up, down)
            finally:
                await upstream.close()

    async def _tunnel(ws: WebSocket, target: ProxyTarget) -> None:
        host, _, port = target.address.rpartition(":")
        try:
            reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except OSError as e:
            raise errors.Unavailable(
                f"task {target.task_id} does not answer at {target.address}: {e.strerror or e}"
            ) from None
        await ws.accept()
        activity = service.generic.record_activity

        async def up() -> None:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("bytes")
                if data is None:
                    data = (message.get("text") or "").encode()
                activity(target.task_id)
                writer.write(data)
                await writer.drain()

        async def down() -> None:
            while data := await reader.read(_CHUNK):
                activity(target.task_id)
                await ws.send_bytes(data)
            with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):
                await ws.close()

        try:
            await _pipe(up, down)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    return [
        Route("/proxy/{task_id}", slash, methods=methods),
        Route("/proxy/{task_id}/{path:path}", forward, methods=methods),
        WebSocketRoute("/proxy/{task_id}", websocket),
        WebSocketRoute("/proxy/{task_id}/{path:path}", websocket),
    ]
