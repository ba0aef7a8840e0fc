"""JSON routes for commands, notebooks and shells (the WebUI's tasks, Determined's
``/api/v1/commands``, ``/api/v1/notebooks``, ``/api/v1/shells``): the same operations as
their Launch, Get, Kill and Set...Priority RPCs, checked against the same rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import betterproto2
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import structs
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service
from pydet.master.tasks.generic import GenericTask, TaskType


@dataclass(frozen=True)
class Kind:
    """One kind's routes: ``plural`` is its path and list key ("commands"), ``noun`` its
    key and RPC name ("command", "Command")."""

    task_type: TaskType
    plural: str
    noun: str
    rpc: str
    to_proto: Callable[[GenericTask], betterproto2.Message]
    # The request message each rule reads, from the task's id (and a priority).
    request: Callable[..., betterproto2.Message]


def log_routes(service: Service) -> list[Route]:
    """A task's lines by its id, as Determined's ``/api/v1/tasks/{taskId}/logs`` streams
    them: one ``{"result": <TaskLogsResponse>}`` a line (TaskLogsRequest's filters as query
    parameters; the WebUI's Tasks page follows them by pydet's ``afterId``)."""

    async def task_logs(request: Request) -> Response:
        req = codec.query_message(request, v1.TaskLogsRequest)
        req.task_id = str(request.path_params["id"])
        if "." not in req.task_id:  # a trial's task ids are "EXPERIMENT.TRIAL"
            await service.generic.get(req.task_id)  # an unknown task: a 404 before the stream
        return codec.stream(service.task_logs(req))

    return [Route("/api/v1/tasks/{id:str}/logs", task_logs, methods=["GET"])]


def routes(service: Service, kind: Kind) -> list[Route]:
    key = f"{kind.noun}_id"

    def answer(rpc: str, task: GenericTask, **more: Any) -> Response:
        """Determined's ``<rpc>Response`` with the task under its noun (``command``)."""
        cls = getattr(v1, f"{rpc}Response")
        return codec.message(cls(**{kind.noun: kind.to_proto(task)}, **more))

    async def launch(request: Request) -> Response:
        req = await codec.body(request, getattr(v1, f"Launch{kind.rpc}Request"))
        # Launch*'s rule reads the workspace it goes into, as over gRPC.
        await gateway_auth.authorize(request, f"Launch{kind.rpc}", req)
        text = json.dumps(structs.python(req.config)) if req.config is not None else ""
        preview = bool(getattr(req, "preview", False))  # a notebook's only, as Determined's
        task = await service.launch_task(
            kind.task_type,
            gateway_auth.caller(request).username,
            text,
            template_name=req.template_name,
            context=req.context,
            workspace_id=req.workspace_id,
            preview=preview,
        )
        config = structs.struct(task.config)
        if preview:  # the config as the master fills it; nothing launched
            return codec.message(getattr(v1, f"Launch{kind.rpc}Response")(config=config))
        return answer(f"Launch{kind.rpc}", task, config=config)

    async def list_all(request: Request) -> Response:
        req = codec.query_message(request, getattr(v1, f"Get{kind.rpc}sRequest"))
        await gateway_auth.authorize(request, f"Get{kind.rpc}s", req)
        found, page = await service.list_tasks(kind.task_type, req)
        cls = getattr(v1, f"Get{kind.rpc}sResponse")
        return codec.message(
            cls(**{kind.plural: [kind.to_proto(t) for t in found]}, pagination=page)
        )

    async def get_one(request: Request) -> Response:
        task_id = str(request.path_params["id"])
        await gateway_auth.authorize(request, f"Get{kind.rpc}", kind.request(**{key: task_id}))
        task = await service.generic.get(task_id, kind.task_type)
        return answer(f"Get{kind.rpc}", task, config=structs.struct(task.config))

    async def kill(request: Request) -> Response:
        task_id = str(request.path_params["id"])
        await gateway_auth.authorize(request, f"Kill{kind.rpc}", kind.request(**{key: task_id}))
        return answer(f"Kill{kind.rpc}", await service.kill_task(task_id, kind.task_type))

    async def set_priority(request: Request) -> Response:
        task_id = str(request.path_params["id"])
        req = await codec.body(request, getattr(v1, f"Set{kind.rpc}PriorityRequest"))
        setattr(req, key, task_id)
        await gateway_auth.authorize(request, f"Set{kind.rpc}Priority", req)
        task = await service.set_task_priority(task_id, req.priority, kind.task_type)
        return answer(f"Set{kind.rpc}Priority", task)

    base = f"/api/v1/{kind.plural}"
    return [
        Route(base, list_all, methods=["GET"]),
        Route(base, launch, methods=["POST"]),
        Route(base + "/{id:str}", get_one, methods=["GET"]),
        Route(base + "/{id:str}/kill", kill, methods=["POST"]),
        Route(base + "/{id:str}/set_priority", set_priority, methods=["POST"]),
    ]
