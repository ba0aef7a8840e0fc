"""JSON routes for workspaces, projects and experiments' moves, at Determined's paths:
``/api/v1/workspaces[/{id}[/projects|/archive|/unarchive]]``,
``/api/v1/projects/{id}[/archive|/unarchive|/move|/notes|/experiments/move]``,
``/api/v1/projects/key/{key}``, ``/api/v1/resource-pools/{name}/workspace-bindings``,
``/api/v1/workspaces/{id}/available-resource-pools``, ``/api/v1/experiments/{id}/move`` and
``/api/v1/experiment/labels``. Each reads Determined's request message (bodies in protobuf's
JSON mapping), is authorized by the same rule as its RPC, and calls the same façade."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from determined.api.gen import v1
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service

T = TypeVar("T")


async def archiving(
    request: Request,
    kind: str,
    target: T,
    field: str,
    change: Callable[[T, bool], Awaitable[None]],
) -> Response:
    """POST .../archive or .../unarchive of a workspace, project or model (``kind``), named
    ``target`` in its request's ``field``."""
    verb = "Archive" if request.url.path.endswith("/archive") else "Unarchive"
    rpc = f"{verb}{kind}"
    await gateway_auth.authorize(request, rpc, getattr(v1, f"{rpc}Request")(**{field: target}))
    await change(target, verb == "Archive")
    return codec.message(getattr(v1, f"{rpc}Response")())


def routes(service: Service) -> list[Route]:
    async def list_workspaces(request: Request) -> Response:
        req = codec.query_message(request, v1.GetWorkspacesRequest)
        await gateway_auth.authorize(request, "GetWorkspaces", req)
        return codec.message(await service.org.get_workspaces(req))

    async def create_workspace(request: Request) -> Response:
        req = await codec.body(request, v1.PostWorkspaceRequest)
        await gateway_auth.authorize(request, "PostWorkspace", req)
        user_id = gateway_auth.caller(request).id
        return codec.message(await service.org.post_workspace(req, user_id=user_id))

    async def get_workspace(request: Request) -> Response:
        req = v1.GetWorkspaceRequest(id=codec.integer(request, "id"))
        await gateway_auth.authorize(request, "GetWorkspace", req)
        return codec.message(await service.org.get_workspace(req))

    async def patch_workspace(request: Request) -> Response:
        patch = await codec.body(request, v1.PatchWorkspace)
        req = v1.PatchWorkspaceRequest(id=codec.integer(request, "id"), workspace=patch)
        await gateway_auth.authorize(request, "PatchWorkspace", req)
        return codec.message(await service.org.patch_workspace(req))

    async def delete_workspace(request: Request) -> Response:
        req = v1.DeleteWorkspaceRequest(id=codec.integer(request, "id"))
        await gateway_auth.authorize(request, "DeleteWorkspace", req)
        return codec.message(await service.org.delete_workspace(req))

    async def archive_workspace(request: Request) -> Response:
        target = codec.integer(request, "id")
        return await archiving(request, "Workspace", target, "id", service.org.archive_workspace)

    async def workspace_projects(request: Request) -> Response:
        req = codec.query_message(request, v1.GetWorkspaceProjectsRequest)
        req.id = codec.integer(request, "id")
        await gateway_auth.authorize(request, "GetWorkspaceProjects", req)
        return codec.message(await service.org.get_workspace_projects(req))

    async def create_project(request: Request) -> Response:
        req = await codec.body(request, v1.PostProjectRequest)
        req.workspace_id = codec.integer(request, "id")
        await gateway_auth.authorize(request, "PostProject", req)
        user_id = gateway_auth.caller(request).id
        return codec.message(await service.org.post_project(req, user_id=user_id))

    async def get_project(request: Request) -> Response:
        req = v1.GetProjectRequest(id=codec.integer(request, "id"))
        await gateway_auth.authorize(request, "GetProject", req)
        return codec.message(await service.org.get_project(req))

    async def project_by_key(request: Request) -> Response:
        req = v1.GetProjectByKeyRequest(key=str(request.path_params["key"]))
        await gateway_auth.authorize(request, "GetProjectByKey", req)
        return codec.message(await service.org.get_project_by_key(req))

    async def patch_project(request: Request) -> Response:
        patch = await codec.body(request, v1.PatchProject)
        req = v1.PatchProjectRequest(id=codec.integer(request, "id"), project=patch)
        await gateway_auth.authorize(request, "PatchProject", req)
        return codec.message(await service.org.patch_project(req))

    async def delete_project(request: Request) -> Response:
        req = v1.DeleteProjectRequest(id=codec.integer(request, "id"))
        await gateway_auth.authorize(request, "DeleteProject", req)
        return codec.message(await service.org.delete_project(req))

    async def archive_project(request: Request) -> Response:
        target = codec.integer(request, "id")
        return await archiving(request, "Project", target, "id", service.org.archive_project)

    async def move_project(request: Request) -> Response:
        req = await codec.body(request, v1.MoveProjectRequest)
        req.project_id = codec.integer(request, "id")
        await gateway_auth.authorize(request, "MoveProject", req)
        return codec.message(await service.org.move_project(req))

    async def add_note(request: Request) -> Response:
        note = await codec.body(request, v1.Note)
        req = v1.AddProjectNoteRequest(project_id=codec.integer(request, "id"), note=note)
        await gateway_auth.authorize(request, "AddProjectNote", req)
        return codec.message(await service.org.add_project_note(req))

    async def put_notes(request: Request) -> Response:
        req = await codec.body(request, v1.PutProjectNotesRequest)
        req.project_id = codec.integer(request, "id")
        await gateway_auth.authorize(request, "PutProjectNotes", req)
        return codec.message(await service.org.put_project_notes(req))

    async def move_experiments(request: Request) -> Response:
        req = await codec.body(request, v1.MoveExperimentsRequest)
        req.project_id = codec.integer(request, "id")
        await gateway_auth.authorize(request, "MoveExperiments", req)
        return codec.message(await service.org.move_experiments(req))

    async def move_experiment(request: Request) -> Response:
        req = await codec.body(request, v1.MoveExperimentRequest)
        req.experiment_id = codec.integer(request, "id")
        await gateway_auth.authorize(request, "MoveExperiment", req)
        return codec.message(await service.org.move_experiment(req))

    async def experiment_labels(request: Request) -> Response:
        req = codec.query_message(request, v1.GetExperimentLabelsRequest)
        await gateway_auth.authorize(request, "GetExperimentLabels", req)
        return codec.message(await service.org.get_experiment_labels(req))

    async def pool_bindings(request: Request) -> Response:
        """POST adds, DELETE removes, PUT replaces a pool's workspace bindings (admins)."""
        pool = str(request.path_params["pool"])
        if request.method == "POST":
            add = await codec.body(request, v1.BindRpToWorkspaceRequest)
            add.resource_pool_name = pool
            await gateway_auth.authorize(request, "BindRPToWorkspace", add)
            return codec.message(await service.org.bind_rp_to_workspace(add))
        if request.method == "DELETE":
            remove = await codec.body(request, v1.UnbindRpFromWorkspaceRequest)
            remove.resource_pool_name = pool
            await gateway_auth.authorize(request, "UnbindRPFromWorkspace", remove)
            return codec.message(await service.org.unbind_rp_from_workspace(remove))
        put = await codec.body(request, v1.OverwriteRpWorkspaceBindingsRequest)
        put.resource_pool_name = pool
        await gateway_auth.authorize(request, "OverwriteRPWorkspaceBindings", put)
        return codec.message(await service.org.overwrite_rp_workspace_bindings(put))

    async def pool_workspaces(request: Request) -> Response:
        req = codec.query_message(request, v1.ListWorkspacesBoundToRpRequest)
        req.resource_pool_name = str(request.path_params["pool"])
        await gateway_auth.authorize(request, "ListWorkspacesBoundToRP", req)
        return codec.message(await service.org.list_workspaces_bound_to_rp(req))

    async def workspace_pools(request: Request) -> Response:
        req = codec.query_message(request, v1.ListRPsBoundToWorkspaceRequest)
        req.workspace_id = codec.integer(request, "id")
        await gateway_auth.authorize(request, "ListRPsBoundToWorkspace", req)
        return codec.message(await service.org.list_rps_bound_to_workspace(req))

    bindings = "/api/v1/resource-pools/{pool:str}/workspace-bindings"
    return [
        Route(bindings, pool_bindings, methods=["POST", "DELETE", "PUT"]),
        Route(bindings, pool_workspaces, methods=["GET"]),
        Route("/api/v1/workspaces/{id:int}/available-resource-pools", workspace_pools),
        Route("/api/v1/workspaces", list_workspaces, methods=["GET"]),
        Route("/api/v1/workspaces", create_workspace, methods=["POST"]),
        Route("/api/v1/workspaces/{id:int}", get_workspace, methods=["GET"]),
        Route("/api/v1/workspaces/{id:int}", patch_workspace, methods=["PATCH"]),
        Route("/api/v1/workspaces/{id:int}", delete_workspace, methods=["DELETE"]),
        Route("/api/v1/workspaces/{id:int}/archive", archive_workspace, methods=["POST"]),
        Route("/api/v1/workspaces/{id:int}/unarchive", archive_workspace, methods=["POST"]),
        Route("/api/v1/workspaces/{id:int}/projects", workspace_projects, methods=["GET"]),
        Route("/api/v1/workspaces/{id:int}/projects", create_project, methods=["POST"]),
        Route("/api/v1/projects/key/{key:str}", project_by_key, methods=["GET"]),
        Route("/api/v1/projects/{id:int}", get_project, methods=["GET"]),
        Route("/api/v1/projects/{id:int}", patch_project, methods=["PATCH"]),
        Route("/api/v1/projects/{id:int}", delete_project, methods=["DELETE"]),
        Route("/api/v1/projects/{id:int}/archive", archive_project, methods=["POST"]),
        Route("/api/v1/projects/{id:int}/unarchive", archive_project, methods=["POST"]),
        Route("/api/v1/projects/{id:int}/move", move_project, methods=["POST"]),
        Route("/api/v1/projects/{id:int}/notes", add_note, methods=["POST"]),
        Route("/api/v1/projects/{id:int}/notes", put_notes, methods=["PUT"]),
        Route("/api/v1/projects/{id:int}/experiments/move", move_experiments, methods=["POST"]),
        # Before the experiments' own /{id}/{action} routes, which would take "move".
        Route("/api/v1/experiments/{id:int}/move", move_experiment, methods=["POST"]),
        Route("/api/v1/experiment/labels", experiment_labels, methods=["GET"]),
    ]
