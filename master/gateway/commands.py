"""JSON routes for commands, notebooks and shells (the WebUI's tasks, Determined's
``/api/v1/commands``, ``/api/v1/notebooks``, ``/api/v1/shells``): the same operations as
their Launch, Get, Kill and Set...Priority RPCs, checked against the same rules."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import betterproto2
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service
from pydet.master.tasks.generic import GenericTask, TaskType


@dataclass(frozen=True)
class Kind:
    """One kind's routes: ``plural`` is its path and list key ("commands"), ``noun`` its
    key and RPC name ("command", "Command"); ``launch`` makes one from a config's text and
    a template's name."""

    task_type: TaskType
    plural: str
    noun: str
    rpc: str
    to_proto: Callable[[GenericTask], betterproto2.Message]
    launch: Callable[[str, str, str], Awaitable[GenericTask]]
    # The request message each rule reads, from the task's id (and a priority).
    request: Callable[..., betterproto2.Message]


def _config_text(body: dict[str, Any]) -> str:
    config = body.get("config")
    if config is None:
        return ""
    if isinstance(config, str):
        return config
    if isinstance(config, dict):
        return json.dumps(config)
    raise errors.InvalidArgument("config: expected an object or YAML text")


def log_routes(service: Service) -> list[Route]:
    """A task's lines by its id (the WebUI's Tasks page follows them by ``after_id``), as
    the TaskLogs RPC has them."""

    async def task_logs(request: Request) -> Response:
        req = v1.TaskLogsRequest(
            task_id=str(request.path_params["id"]),
            tail=codec.integer(request, "tail"),
            after_id=codec.integer(request, "after_id"),
        )
        await gateway_auth.authorize(request, "TaskLogs", req)
        lines: list[dict[str, Any]] = []
        async for batch in service.task_logs(req):
            lines.extend(codec.to_dict(line) for line in batch)
        return JSONResponse(lines)

    return [Route("/api/v1/tasks/{id:str}/logs", task_logs, methods=["GET"])]


def routes(service: Service, kind: Kind) -> list[Route]:
    key = f"{kind.noun}_id"

    def shown(task: GenericTask) -> dict[str, Any]:
        return codec.to_dict(kind.to_proto(task))

    async def launch(request: Request) -> Response:
        body = await codec.json_body(request)
        if not isinstance(body, dict):
            raise errors.InvalidArgument("request body: expected a JSON object")
        template = body.get("template_name", body.get("templateName")) or ""
        if not isinstance(template, str):
            raise errors.InvalidArgument("template_name: expected a string")
        # Launch*'s rule reads no field of its message: kind.request stands in for it.
        await gateway_auth.authorize(request, f"Launch{kind.rpc}", kind.request())
        task = await kind.launch(
            gateway_auth.caller(request).username, _config_text(body), template
        )
        return JSONResponse({kind.noun: shown(task), "config": task.config})

    async def list_all(request: Request) -> Response:
        await gateway_auth.authorize(request, f"Get{kind.rpc}s", kind.request())
        users = codec.strings(request, "users")
        return JSONResponse(
            {kind.plural: [shown(t) for t in service.live_tasks(kind.task_type, users)]}
        )

    async def get_one(request: Request) -> Response:
        task_id = str(request.path_params["id"])
        await gateway_auth.authorize(request, f"Get{kind.rpc}", kind.request(**{key: task_id}))
        task = await service.generic.get(task_id, kind.task_type)
        return JSONResponse({kind.noun: shown(task), "config": task.config})

    async def kill(request: Request) -> Response:
        task_id = str(request.path_params["id"])
        await gateway_auth.authorize(request, f"Kill{kind.rpc}", kind.request(**{key: task_id}))
        task = await service.kill_task(task_id, kind.task_type)
        return JSONResponse({kind.noun: shown(task)})

    async def set_priority(request: Request) -> Response:
        task_id = str(request.path_params["id"])
        await gateway_auth.authorize(
            request, f"Set{kind.rpc}Priority", kind.request(**{key: task_id})
        )
        body = await codec.json_body(request)
        if not isinstance(body, dict):
            raise errors.InvalidArgument("request body: expected a JSON object")
        priority = codec.field(body, "priority", int)
        if priority is None:
            raise errors.InvalidArgument("priority: required")
        task = await service.set_task_priority(task_id, priority, kind.task_type)
        return JSONResponse({kind.noun: shown(task)})

    base = f"/api/v1/{kind.plural}"
    return [
        Route(base, list_all, methods=["GET"]),
        Route(base, launch, methods=["POST"]),
        Route(base + "/{id:str}", get_one, methods=["GET"]),
        Route(base + "/{id:str}/kill", kill, methods=["POST"]),
        Route(base + "/{id:str}/set_priority", set_priority, methods=["POST"]),
    ]
