"""JSON routes for TensorBoards (the WebUI's "TensorBoard" button): the same operations as
the LaunchTensorboard, GetTensorboards, GetTensorboard and KillTensorboard RPCs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors, protojson
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service


def _ids(body: dict[str, object], name: str) -> list[int]:
    value = body.get(name, body.get(protojson.json_name(name))) or []
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise errors.InvalidArgument(f"{name}: expected a list of integer ids")
    return [int(str(i)) for i in value]


def routes(service: Service) -> list[Route]:
    async def launch(request: Request) -> Response:
        body = await codec.json_body(request)
        if not isinstance(body, dict):
            raise errors.InvalidArgument("request body: expected a JSON object")
        req = v1.LaunchTensorboardRequest(
            experiment_ids=_ids(body, "experiment_ids"), trial_ids=_ids(body, "trial_ids")
        )
        await gateway_auth.authorize(request, "LaunchTensorboard", req)
        tb = await service.launch_tensorboard(gateway_auth.caller(request).username, req)
        return codec.message(v1.LaunchTensorboardResponse(tensorboard=tb))

    async def list_all(request: Request) -> Response:
        live = service.tensorboards.live()
        return codec.message(v1.GetTensorboardsResponse(tensorboards=[t.to_proto() for t in live]))

    async def get_one(request: Request) -> Response:
        tb = await service.tensorboards.get(str(request.path_params["id"]))
        return codec.message(v1.GetTensorboardResponse(tensorboard=tb.to_proto()))

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
