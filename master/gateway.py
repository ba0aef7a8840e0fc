"""The HTTP side of the master: JSON over the same service the gRPC API uses, and the
WebUI's static files. Errors map through the shared hierarchy's HTTP statuses."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Awaitable, Callable
from typing import Any

import betterproto2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors
from master.service import Service

WEBUI_DIST = pathlib.Path(__file__).resolve().parent.parent / "webui" / "dist"

Handler = Callable[[Request], Awaitable[Response]]


def _json(message: betterproto2.Message) -> JSONResponse:
    return JSONResponse(
        message.to_dict(casing=betterproto2.Casing.SNAKE, include_default_values=True)
    )


def _int(request: Request, name: str) -> int:
    raw = request.path_params.get(name) or request.query_params.get(name) or "0"
    try:
        return int(raw)
    except ValueError:
        raise errors.InvalidArgument(f"{name}: expected an integer, got {raw!r}") from None


def build(service: Service) -> Starlette:
    async def health(request: Request) -> Response:
        info = service.master_info()
        return JSONResponse(
            {"status": "ok", "version": info.version, "cluster_id": info.cluster_id}
        )

    async def experiments(request: Request) -> Response:
        q = request.query_params
        archived = q.get("archived")
        req = v1.GetExperimentsRequest(
            limit=int(q.get("limit", "0") or 0),
            offset=int(q.get("offset", "0") or 0),
            name=q.get("name", ""),
            order_by=q.get("order_by", "id"),
            descending=q.get("descending", "false").lower() == "true",
            archived=None if archived is None else archived.lower() == "true",
        )
        return _json(await service.get_experiments(req))

    async def experiment(request: Request) -> Response:
        return _json(await service.get_experiment(_int(request, "experiment_id")))

    async def trials(request: Request) -> Response:
        trials = await service.get_experiment_trials(_int(request, "experiment_id"))
        return _json(v1.GetExperimentTrialsResponse(trials=trials))

    async def agents(request: Request) -> Response:
        return _json(v1.GetAgentsResponse(agents=service.get_agents()))

    async def index(request: Request) -> Response:
        page = WEBUI_DIST / "index.html"
        if page.is_file():
            return HTMLResponse(page.read_text())
        return HTMLResponse(
            "<!doctype html><title>pydet</title><h1>pydet master</h1>"
            "<p>The WebUI is not built; the JSON API is at <a href='/api/v1/experiments'>"
            "/api/v1/experiments</a>.</p>"
        )

    def mapped(handler: Handler) -> Handler:
        async def wrapper(request: Request) -> Response:
            try:
                return await handler(request)
            except errors.DetError as e:
                return JSONResponse({"error": e.message}, status_code=e.http_status)

        return wrapper

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

    routes = [
        Route("/health", mapped(health)),
        Route("/api/v1/master", mapped(lambda r: _async(_json(service.master_info())))),
        Route("/api/v1/experiments", mapped(experiments)),
        Route("/api/v1/experiments/{experiment_id:int}", mapped(experiment)),
        Route("/api/v1/experiments/{experiment_id:int}/trials", mapped(trials)),
        Route("/api/v1/agents", mapped(agents)),
        Route("/", index),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: not_found})


async def _async(value: Any) -> Any:
    return value


def dumps(obj: Any) -> str:
    return json.dumps(obj)
