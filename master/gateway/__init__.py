"""The HTTP side of the master: JSON over the same Service the gRPC API uses, server-sent
events for live updates, and the WebUI's static files.

Routes live in one module per area of this package (``experiments``, ``cluster``,
``webhooks``, ``tensorboards``, ``commands``, ``workspaces``, ``models``, ``access``,
``stream``, ``spa``, ``auth``, ``proxy``; ``codec`` writes messages in protobuf's JSON
mapping and reads request bodies and query strings as messages, as Determined's
grpc-gateway does); this module assembles them, puts every API route behind
``auth.authenticate``, and maps errors, here and nowhere else: the shared hierarchy's HTTP
status with its message, anything unexpected as a logged 500 with a generic message.

A transport: it may use ``service`` (the façade), ``auth`` (sessions and the rule of
every route) and ``events`` (the streams); no domain package imports it.
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors
from pydet.master.auth import rules as authz
from pydet.master.auth.access import Access
from pydet.master.auth.authenticator import Authenticator
from pydet.master.commands import commands as command_protos
from pydet.master.commands import notebooks as notebook_protos
from pydet.master.commands import shells as shell_protos
from pydet.master.gateway import access as gateway_access
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import checkpoints as gateway_checkpoints
from pydet.master.gateway import cluster as gateway_cluster
from pydet.master.gateway import codec as gateway_codec
from pydet.master.gateway import commands as gateway_commands
from pydet.master.gateway import experiments as gateway_experiments
from pydet.master.gateway import generic_tasks as gateway_generic_tasks
from pydet.master.gateway import models as gateway_models
from pydet.master.gateway import proxy as gateway_proxy
from pydet.master.gateway import spa as gateway_spa
from pydet.master.gateway import stream as gateway_stream
from pydet.master.gateway import tensorboards as gateway_tensorboards
from pydet.master.gateway import webhooks as gateway_webhooks
from pydet.master.gateway import workspaces as gateway_workspaces
from pydet.master.service import Service
from pydet.master.tasks.generic import TaskType

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]

# What Starlette's own errors (an unknown method, say) are as gRPC codes.
_GRPC_OF_HTTP = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "UNIMPLEMENTED"}


def error_response(exc: BaseException) -> JSONResponse:
    """Determined's error body (``{"error": {"code", "reason", "error"}}``) with the error's
    HTTP status; anything unexpected a generic 500."""
    if isinstance(exc, errors.DetError):
        return gateway_codec.error(exc.message, exc.http_status, exc.grpc_status)
    return gateway_codec.error("internal error in the master; see its log", 500, "INTERNAL")


def mapped(handler: Handler, auth: Authenticator | None = None) -> Handler:
    """``handler`` behind authentication (when ``auth`` is given) and the error mapping."""

    async def wrapper(request: Request) -> Response:
        try:
            if auth is not None:
                await gateway_auth.authenticate(request, auth)
            return await handler(request)
        except errors.DetError as e:
            return error_response(e)
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response(RuntimeError())

    return wrapper


def _mapped_routes(routes: list[Route], auth: Authenticator) -> list[Route]:
    return [
        Route(r.path, mapped(r.endpoint, auth), methods=sorted(r.methods or ()), name=r.name)
        for r in routes
    ]


def _task_kinds(service: Service) -> list[gateway_commands.Kind]:
    """The kinds of task the JSON API launches, lists and steers like Determined's."""

    return [
        gateway_commands.Kind(
            TaskType.COMMAND,
            "commands",
            "command",
            "Command",
            command_protos.to_proto,
            v1.KillCommandRequest,
        ),
        gateway_commands.Kind(
            TaskType.NOTEBOOK,
            "notebooks",
            "notebook",
            "Notebook",
            notebook_protos.to_proto,
            v1.KillNotebookRequest,
        ),
        gateway_commands.Kind(
            TaskType.SHELL,
            "shells",
            "shell",
            "Shell",
            shell_protos.to_proto,
            v1.KillShellRequest,
        ),
    ]


def build(
    service: Service,
    auth: Authenticator,
    lookup: authz.Lookup,
    *,
    session_lifetime: float = 7 * 24 * 3600.0,
    webui_dir: pathlib.Path | None = None,
) -> Starlette:
    async def health(request: Request) -> Response:
        info = service.master_info()
        return JSONResponse(
            {"status": "ok", "version": info.version, "cluster_id": info.cluster_id}
        )

    async def master(request: Request) -> Response:
        return gateway_codec.message(service.master_info())

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        grpc_status = _GRPC_OF_HTTP.get(exc.status_code, "UNKNOWN")
        return gateway_codec.error(str(exc.detail), exc.status_code, grpc_status)

    api = [
        Route("/health", health, methods=["GET"]),
        Route("/api/v1/master", master, methods=["GET"]),
        # Before the experiments' routes: /experiments/{id}/move is not an action of theirs.
        *gateway_workspaces.routes(service),
        *gateway_models.routes(service),
        *gateway_experiments.routes(service),
        *gateway_cluster.routes(service),
        *gateway_stream.routes(service.events),
        *gateway_webhooks.routes(service),
        *gateway_tensorboards.routes(service),
        *gateway_checkpoints.routes(service),
        *(
            route
            for kind in _task_kinds(service)
            for route in gateway_commands.routes(service, kind)
        ),
        *gateway_commands.log_routes(service),
        *gateway_generic_tasks.routes(service),
        *gateway_auth.routes(auth, session_lifetime),
        *gateway_access.routes(Access(auth, lookup)),
    ]
    app = Starlette(
        routes=[
            *_mapped_routes(api, auth),
            # The proxy authenticates itself: its rules differ from the JSON API's (and its
            # WebSockets answer their refusals themselves).
            *(
                Route(r.path, mapped(r.endpoint), methods=sorted(r.methods or ()))
                if isinstance(r, Route)
                else r
                for r in gateway_proxy.routes(auth, service)
            ),
            *gateway_spa.routes(webui_dir),
        ],
        exception_handlers={HTTPException: http_error},
    )
    app.state.lookup = lookup
    return app
