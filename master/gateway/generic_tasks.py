"""JSON routes for generic tasks, at Determined's paths: ``POST /api/v1/generic-tasks``,
``GET /api/v1/tasks/{id}/config`` and ``POST /api/v1/tasks/{id}/kill|pause|unpause``; each
reads the RPC's request, is authorized by its rule and calls the same façade."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from determined.api.gen import v1
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service


def routes(service: Service) -> list[Route]:
    async def create(request: Request) -> Response:
        req = await codec.body(request, v1.CreateGenericTaskRequest)
        await gateway_auth.authorize(request, "CreateGenericTask", req)
        task = await service.create_generic_task(req, gateway_auth.caller(request).username)
        return codec.message(v1.CreateGenericTaskResponse(task_id=task.id))

    async def config(request: Request) -> Response:
        req = v1.GetGenericTaskConfigRequest(task_id=str(request.path_params["id"]))
        await gateway_auth.authorize(request, "GetGenericTaskConfig", req)
        text = await service.generic_task_config(req.task_id)
        return codec.message(v1.GetGenericTaskConfigResponse(config=text))

    async def steer(request: Request) -> Response:
        task_id = str(request.path_params["id"])
        action = request.url.path.rsplit("/", 1)[1]
        if action == "kill":
            kill = await codec.body(request, v1.KillGenericTaskRequest)
            kill.task_id = task_id
            await gateway_auth.authorize(request, "KillGenericTask", kill)
            await service.steer_generic_task(task_id, "kill", root=kill.kill_from_root)
            return codec.message(v1.KillGenericTaskResponse())
        if action == "pause":
            pause = v1.PauseGenericTaskRequest(task_id=task_id)
            await gateway_auth.authorize(request, "PauseGenericTask", pause)
            await service.steer_generic_task(task_id, "pause")
            return codec.message(v1.PauseGenericTaskResponse())
        unpause = v1.UnpauseGenericTaskRequest(task_id=task_id)
        await gateway_auth.authorize(request, "UnpauseGenericTask", unpause)
        await service.steer_generic_task(task_id, "unpause")
        return codec.message(v1.UnpauseGenericTaskResponse())

    return [
        Route("/api/v1/generic-tasks", create, methods=["POST"]),
        Route("/api/v1/tasks/{id:str}/config", config, methods=["GET"]),
        *(
            Route(f"/api/v1/tasks/{{id:str}}/{action}", steer, methods=["POST"])
            for action in ("kill", "pause", "unpause")
        ),
    ]
