"""JSON routes for the model registry, at Determined's paths: ``/api/v1/models[/{model}[/
archive|/unarchive|/move|/versions[/{n}]]]`` and ``/api/v1/model/labels``, where ``{model}``
is a model's name or id. Each reads Determined's request message (bodies in protobuf's JSON
mapping), is authorized by the same rule as its RPC, and calls the same façade."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from determined.api.gen import v1
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.gateway.workspaces import archiving
from pydet.master.service import Service


def _name(request: Request) -> str:
    return str(request.path_params["model_name"])


def routes(service: Service) -> list[Route]:
    async def list_models(request: Request) -> Response:
        req = codec.query_message(request, v1.GetModelsRequest)
        await gateway_auth.authorize(request, "GetModels", req)
        return codec.message(await service.org.get_models(req))

    async def create_model(request: Request) -> Response:
        req = await codec.body(request, v1.PostModelRequest)
        await gateway_auth.authorize(request, "PostModel", req)
        user_id = gateway_auth.caller(request).id
        return codec.message(await service.org.post_model(req, user_id=user_id))

    async def get_model(request: Request) -> Response:
        req = v1.GetModelRequest(model_name=_name(request))
        await gateway_auth.authorize(request, "GetModel", req)
        return codec.message(await service.org.get_model(req))

    async def patch_model(request: Request) -> Response:
        patch = await codec.body(request, v1.PatchModel)
        req = v1.PatchModelRequest(model_name=_name(request), model=patch)
        await gateway_auth.authorize(request, "PatchModel", req)
        return codec.message(await service.org.patch_model(req))

    async def delete_model(request: Request) -> Response:
        req = v1.DeleteModelRequest(model_name=_name(request))
        await gateway_auth.authorize(request, "DeleteModel", req)
        return codec.message(await service.org.delete_model(req))

    async def archive_model(request: Request) -> Response:
        return await archiving(
            request, "Model", _name(request), "model_name", service.org.archive_model
        )

    async def move_model(request: Request) -> Response:
        # Determined's route takes the destination in the query string; a body may carry it.
        req = await codec.body(request, v1.MoveModelRequest)
        req.model_name = _name(request)
        req.destination_workspace_id = codec.integer(
            request, "destination_workspace_id", req.destination_workspace_id
        )
        await gateway_auth.authorize(request, "MoveModel", req)
        return codec.message(await service.org.move_model(req))

    async def model_labels(request: Request) -> Response:
        req = codec.query_message(request, v1.GetModelLabelsRequest)
        await gateway_auth.authorize(request, "GetModelLabels", req)
        return codec.message(await service.org.get_model_labels(req))

    async def list_versions(request: Request) -> Response:
        req = codec.query_message(request, v1.GetModelVersionsRequest)
        req.model_name = _name(request)
        await gateway_auth.authorize(request, "GetModelVersions", req)
        return codec.message(await service.org.get_model_versions(req))

    async def register_version(request: Request) -> Response:
        req = await codec.body(request, v1.PostModelVersionRequest)
        req.model_name = _name(request)
        await gateway_auth.authorize(request, "PostModelVersion", req)
        user_id = gateway_auth.caller(request).id
        return codec.message(await service.org.post_model_version(req, user_id=user_id))

    async def get_version(request: Request) -> Response:
        req = v1.GetModelVersionRequest(
            model_name=_name(request),
            model_version_num=codec.integer(request, "model_version_num"),
        )
        await gateway_auth.authorize(request, "GetModelVersion", req)
        return codec.message(await service.org.get_model_version(req))

    async def patch_version(request: Request) -> Response:
        patch = await codec.body(request, v1.PatchModelVersion)
        req = v1.PatchModelVersionRequest(
            model_name=_name(request),
            model_version_num=codec.integer(request, "model_version_num"),
            model_version=patch,
        )
        await gateway_auth.authorize(request, "PatchModelVersion", req)
        return codec.message(await service.org.patch_model_version(req))

    async def delete_version(request: Request) -> Response:
        req = v1.DeleteModelVersionRequest(
            model_name=_name(request),
            model_version_num=codec.integer(request, "model_version_num"),
        )
        await gateway_auth.authorize(request, "DeleteModelVersion", req)
        return codec.message(await service.org.delete_model_version(req))

    model = "/api/v1/models/{model_name:str}"
    version = f"{model}/versions/{{model_version_num:int}}"
    return [
        Route("/api/v1/models", list_models, methods=["GET"]),
        Route("/api/v1/models", create_model, methods=["POST"]),
        Route("/api/v1/model/labels", model_labels, methods=["GET"]),
        Route(model, get_model, methods=["GET"]),
        Route(model, patch_model, methods=["PATCH"]),
        Route(model, delete_model, methods=["DELETE"]),
        Route(f"{model}/archive", archive_model, methods=["POST"]),
        Route(f"{model}/unarchive", archive_model, methods=["POST"]),
        Route(f"{model}/move", move_model, methods=["POST"]),
        Route(f"{model}/versions", list_versions, methods=["GET"]),
        Route(f"{model}/versions", register_version, methods=["POST"]),
        Route(version, get_version, methods=["GET"]),
        Route(version, patch_version, methods=["PATCH"]),
        Route(version, delete_version, methods=["DELETE"]),
    ]
