"""JSON routes for TensorBoards (the WebUI's "TensorBoard" button): the same operations as
the LaunchTensorboard, GetTensorboards, GetTensorboard and KillTensorboard RPCs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from determined.api.gen import v1
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service
from pydet.master.tasks import tensorboards
from pydet.master.tasks.generic import TaskType


def routes(service: Service) -> list[Route]:
    async def launch(request: Request) -> Response:
        req = await codec.body(request, v1.LaunchTensorboardRequest)
        await gateway_auth.authorize(request, "LaunchTensorboard", req)
        tb = await service.launch_tensorboard(gateway_auth.caller(request).username, req)
        return codec.message(v1.LaunchTensorboardResponse(tensorboard=tb))

    async def list_all(request: Request) -> Response:
        req = codec.query_message(request, v1.GetTensorboardsRequest)
        await gateway_auth.authorize(request, "GetTensorboards", req)
        found, page = await service.list_tasks(TaskType.TENSORBOARD, req)
        boards = [tensorboards.to_proto(t) for t in found]
        return codec.message(v1.GetTensorboardsResponse(tensorboards=boards, pagination=page))

    async def get_one(request: Request) -> Response:
        tb_id = str(request.path_params["id"])
        req = v1.GetTensorboardRequest(tensorboard_id=tb_id)
        await gateway_auth.authorize(request, "GetTensorboard", req)
        tb = await service.tensorboards.get(tb_id)
        return codec.message(v1.GetTensorboardResponse(tensorboard=tensorboards.to_proto(tb)))

    async def kill(request: Request) -> Response:
        tb_id = str(request.path_params["id"])
        await gateway_auth.authorize(
            request, "KillTensorboard", v1.KillTensorboardRequest(tensorboard_id=tb_id)
        )
        tb = await service.kill_tensorboard(tb_id)
        return codec.message(v1.KillTensorboardResponse(tensorboard=tb))

    return [
        Route("/api/v1/tensorboards", list_all, methods=["GET"]),
        Route("/api/v1/tensorboards", launch, methods=["POST"]),
        Route("/api/v1/tensorboards/{id:str}", get_one, methods=["GET"]),
        Route("/api/v1/tensorboards/{id:str}/kill", kill, methods=["POST"]),
    ]
