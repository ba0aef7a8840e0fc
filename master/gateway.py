"""The HTTP side of the master: JSON over the same Service the gRPC API uses, server-sent
events for live updates, and the WebUI's static files.

Routes live in one module per area (``gateway_experiments``, ``gateway_cluster``,
``gateway_stream``, ``gateway_spa``); this module assembles them and maps errors, here and
nowhere else: the shared hierarchy's HTTP status with its message, anything unexpected as
a logged 500 with a generic message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from determined.common import errors
from master import gateway_cluster, gateway_codec, gateway_experiments, gateway_spa, gateway_stream
from master.service import Service

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]


def error_response(exc: BaseException) -> JSONResponse:
    if isinstance(exc, errors.DetError):
        return JSONResponse({"error": exc.message}, status_code=exc.http_status)
    return JSONResponse({"error": "internal error in the master; see its log"}, status_code=500)


def mapped(handler: Handler) -> Handler:
    async def wrapper(request: Request) -> Response:
        try:
            return await handler(request)
        except errors.DetError as e:
            return error_response(e)
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response(RuntimeError())

    return wrapper


def _mapped_routes(routes: list[Route]) -> list[Route]:
    return [
        Route(r.path, mapped(r.endpoint), methods=sorted(r.methods or ()), name=r.name)
        for r in routes
    ]


def build(service: Service) -> Starlette:
    async def health(request: Request) -> Response:
        info = service.master_info()
        return JSONResponse(
            {"status": "ok", "version": info.version, "cluster_id": info.cluster_id}
        )

    async def master(request: Request) -> Response:
        return gateway_codec.message(service.master_info())

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

    api = [
        Route("/health", health, methods=["GET"]),
        Route("/api/v1/master", master, methods=["GET"]),
        *gateway_experiments.routes(service),
        *gateway_cluster.routes(service),
        *gateway_stream.routes(service.events),
    ]
    return Starlette(
        routes=[*_mapped_routes(api), *gateway_spa.routes()],
        exception_handlers={HTTPException: http_error},
    )
