"""The façade's share for where teams keep their work: workspaces, projects, experiments'
moves between them and the model registry, requests in and responses out, for both
transports (the gRPC servicer and the gateway call the same method with the same request).

Who may make each call is checked before it gets here (``auth.rules``)."""

from __future__ import annotations

from typing import Any

from determined.api.gen import v1
from determined.common import errors, structs
from pydet.master import convert, queries
from pydet.master.models.models import ModelFilter
from pydet.master.models.registry import Registry
from pydet.master.store.db import Database
from pydet.master.users import profiles
from pydet.master.workspaces.organization import Organization
from pydet.master.workspaces.projects import Note, ProjectFilter
from pydet.master.workspaces.workspaces import KEEP, AgentIdentity, Workspace, WorkspaceFilter

_MODEL_ORDER = {
    v1.GetModelsRequestSortBy.UNSPECIFIED: "last_updated_time",
    v1.GetModelsRequestSortBy.NAME: "name",
    v1.GetModelsRequestSortBy.DESCRIPTION: "description",
    v1.GetModelsRequestSortBy.CREATION_TIME: "creation_time",
    v1.GetModelsRequestSortBy.LAST_UPDATED_TIME: "last_updated_time",
    v1.GetModelsRequestSortBy.NUM_VERSIONS: "num_versions",
    v1.GetModelsRequestSortBy.WORKSPACE: "workspace",
}
_VERSION_ORDER = {
    v1.GetModelVersionsRequestSortBy.UNSPECIFIED: "version",
    v1.GetModelVersionsRequestSortBy.VERSION: "version",
    v1.GetModelVersionsRequestSortBy.CREATION_TIME: "creation_time",
}
_WORKSPACE_ORDER = {
    v1.GetWorkspacesRequestSortBy.UNSPECIFIED: "id",
    v1.GetWorkspacesRequestSortBy.ID: "id",
    v1.GetWorkspacesRequestSortBy.NAME: "name",
}
_PROJECT_ORDER = {
    v1.GetWorkspaceProjectsRequestSortBy.UNSPECIFIED: "id",
    v1.GetWorkspaceProjectsRequestSortBy.ID: "id",
    v1.GetWorkspaceProjectsRequestSortBy.NAME: "name",
    v1.GetWorkspaceProjectsRequestSortBy.DESCRIPTION: "description",
    v1.GetWorkspaceProjectsRequestSortBy.CREATION_TIME: "creation_time",
    v1.GetWorkspaceProjectsRequestSortBy.LAST_EXPERIMENT_START_TIME: ("last_experiment_start_time"),
}


def page(offset: int, limit: int) -> tuple[int, int]:
    """A request's offset and limit, checked (0 for the limit: everything)."""
    if offset < 0:
        raise errors.InvalidArgument(f"offset: must be >= 0, got {offset}")
    if limit < 0:
        raise errors.InvalidArgument(f"limit: must be >= 0 (0 for all), got {limit}")
    return offset, limit


def pagination(offset: int, limit: int, total: int, count: int) -> v1.Pagination:
    return v1.Pagination(
        offset=offset, limit=limit, start_index=offset, end_index=offset + count, total=total
    )


def _identity(given: v1.AgentUserGroup | None) -> AgentIdentity | None:
    """An agent user and group as the workspace store keeps it (None: none, or cleared)."""
    found = profiles.agent_user_group(given)
    return None if found is None else (found.uid, found.gid, found.user, found.group)


def sort_key(table: dict[Any, str], value: Any) -> str:
    try:
        return table[value]
    except KeyError:
        raise errors.InvalidArgument(f"sort_by: unknown value {value!r}") from None


class Organizing:
    def __init__(self, org: Organization, registry: Registry, db: Database) -> None:
        self.org = org
        self.registry = registry
        self._db = db

    # -- workspaces ------------------------------------------------------------------------------

    async def get_workspace(self, req: v1.GetWorkspaceRequest) -> v1.GetWorkspaceResponse:
        found = await self.org.workspaces.get(req.id)
        return v1.GetWorkspaceResponse(workspace=convert.workspace(found))

    async def get_workspaces(self, req: v1.GetWorkspacesRequest) -> v1.GetWorkspacesResponse:
        offset, limit = page(req.offset, req.limit)
        found, total = await self.org.workspaces.select(
            WorkspaceFilter(
                name=req.name,
                exact_name=req.name_case_sensitive,
                archived=req.archived,
                users=tuple(req.users),
                user_ids=tuple(req.user_ids),
                order_by=sort_key(_WORKSPACE_ORDER, req.sort_by),
                descending=req.order_by == v1.OrderBy.DESC,
                offset=offset,
                limit=limit,
            )
        )
        return v1.GetWorkspacesResponse(
            workspaces=[convert.workspace(w) for w in found],
            pagination=pagination(offset, limit, total, len(found)),
        )

    async def post_workspace(
        self, req: v1.PostWorkspaceRequest, *, user_id: int
    ) -> v1.PostWorkspaceResponse:
        created = await self.org.workspaces.create(
            req.name,
            user_id=user_id,
            checkpoint_storage=structs.to_dict(req.checkpoint_storage_config),
            default_compute_pool=req.default_compute_pool,
            default_aux_pool=req.default_aux_pool,
            agent=_identity(req.agent_user_group),
        )
        return v1.PostWorkspaceResponse(workspace=convert.workspace(created))

    async def patch_workspace(self, req: v1.PatchWorkspaceRequest) -> v1.PatchWorkspaceResponse:
        patch = req.workspace or v1.PatchWorkspace()
        compute = patch.default_compute_resource_pool
        if compute is None and patch.default_compute_pool:
            compute = patch.default_compute_pool
        aux = patch.default_aux_resource_pool
        if aux is None and patch.default_aux_pool:
            aux = patch.default_aux_pool
        changed = await self.org.workspaces.patch(
            req.id,
            name=patch.name,
            checkpoint_storage=structs.to_dict(patch.checkpoint_storage_config),
            default_compute_pool=compute,
            default_aux_pool=aux,
            agent=KEEP if patch.agent_user_group is None else _identity(patch.agent_user_group),
        )
        return v1.PatchWorkspaceResponse(workspace=convert.workspace(changed))

    async def delete_workspace(self, req: v1.DeleteWorkspaceRequest) -> v1.DeleteWorkspaceResponse:
        await self.org.workspaces.delete(req.id)
        return v1.DeleteWorkspaceResponse(completed=True)

    async def archive_workspace(self, workspace_id: int, archived: bool) -> None:
        await self.org.workspaces.set_archived(workspace_id, archived)

    # -- resource pools bound to workspaces -------------------------------------------------------

    async def _named_workspaces(self, ids: list[int], names: list[str]) -> list[Workspace]:
        """The workspaces a binding request names by id and by name, each once."""
        found = {w.id: w for w in [await self.org.workspaces.get(i) for i in ids]}
        for name in names:
            w = await self.org.workspaces.by_name(name)
            found.setdefault(w.id, w)
        if not found:
            raise errors.InvalidArgument("workspace_names: name at least one workspace")
        return list(found.values())

    async def bind_rp_to_workspace(
        self, req: v1.BindRpToWorkspaceRequest
    ) -> v1.BindRpToWorkspaceResponse:
        named = await self._named_workspaces(req.workspace_ids, req.workspace_names)
        await self.org.bindings.bind(req.resource_pool_name, named)
        return v1.BindRpToWorkspaceResponse()

    async def unbind_rp_from_workspace(
        self, req: v1.UnbindRpFromWorkspaceRequest
    ) -> v1.UnbindRpFromWorkspaceResponse:
        named = await self._named_workspaces(req.workspace_ids, req.workspace_names)
        await self.org.bindings.unbind(req.resource_pool_name, named)
        return v1.UnbindRpFromWorkspaceResponse()

    async def overwrite_rp_workspace_bindings(
        self, req: v1.OverwriteRpWorkspaceBindingsRequest
    ) -> v1.OverwriteRpWorkspaceBindingsResponse:
        named = []
        if req.workspace_ids or req.workspace_names:
            named = await self._named_workspaces(req.workspace_ids, req.workspace_names)
        await self.org.bindings.overwrite(req.resource_pool_name, named)
        return v1.OverwriteRpWorkspaceBindingsResponse()

    async def list_workspaces_bound_to_rp(
        self, req: v1.ListWorkspacesBoundToRpRequest
    ) -> v1.ListWorkspacesBoundToRpResponse:
        offset, limit = page(req.offset, req.limit)
        ids = await self.org.bindings.workspaces_of(req.resource_pool_name)
        shown = ids[offset : offset + limit] if limit else ids[offset:]
        return v1.ListWorkspacesBoundToRpResponse(
            workspace_ids=shown, pagination=pagination(offset, limit, len(ids), len(shown))
        )

    async def list_rps_bound_to_workspace(
        self, req: v1.ListRPsBoundToWorkspaceRequest
    ) -> v1.ListRPsBoundToWorkspaceResponse:
        offset, limit = page(req.offset, req.limit)
        await self.org.workspaces.get(req.workspace_id)  # NotFound naming it
        pools = await self.org.bindings.available_to(req.workspace_id)
        shown = pools[offset : offset + limit] if limit else pools[offset:]
        return v1.ListRPsBoundToWorkspaceResponse(
            resource_pools=shown, pagination=pagination(offset, limit, len(pools), len(shown))
        )

    # -- projects --------------------------------------------------------------------------------

    async def get_workspace_projects(
        self, req: v1.GetWorkspaceProjectsRequest
    ) -> v1.GetWorkspaceProjectsResponse:
        offset, limit = page(req.offset, req.limit)
        found, total = await self.org.projects.select(
            ProjectFilter(
                workspace_id=req.id,
                name=req.name,
                archived=req.archived,
                users=tuple(req.users),
                user_ids=tuple(req.user_ids),
                order_by=sort_key(_PROJECT_ORDER, req.sort_by),
                descending=req.order_by == v1.OrderBy.DESC,
                offset=offset,
                limit=limit,
            )
        )
        return v1.GetWorkspaceProjectsResponse(
            projects=[convert.project(p) for p in found],
            pagination=pagination(offset, limit, total, len(found)),
        )

    async def get_project(self, req: v1.GetProjectRequest) -> v1.GetProjectResponse:
        return v1.GetProjectResponse(project=convert.project(await self.org.projects.get(req.id)))

    async def get_project_by_key(
        self, req: v1.GetProjectByKeyRequest
    ) -> v1.GetProjectByKeyResponse:
        found = await self.org.projects.by_key(req.key)
        return v1.GetProjectByKeyResponse(project=convert.project(found))

    async def post_project(
        self, req: v1.PostProjectRequest, *, user_id: int
    ) -> v1.PostProjectResponse:
        created = await self.org.projects.create(
            req.workspace_id,
            req.name,
            user_id=user_id,
            description=req.description,
            key=req.key,
        )
        return v1.PostProjectResponse(project=convert.project(created))

    async def add_project_note(self, req: v1.AddProjectNoteRequest) -> v1.AddProjectNoteResponse:
        if req.note is None:
            raise errors.InvalidArgument("note: required (a name and its contents)")
        notes = await self.org.projects.add_note(
            req.project_id, Note(req.note.name, req.note.contents)
        )
        return v1.AddProjectNoteResponse(notes=[convert.note(n) for n in notes])

    async def put_project_notes(self, req: v1.PutProjectNotesRequest) -> v1.PutProjectNotesResponse:
        notes = await self.org.projects.set_notes(
            req.project_id, [Note(n.name, n.contents) for n in req.notes]
        )
        return v1.PutProjectNotesResponse(notes=[convert.note(n) for n in notes])

    async def patch_project(self, req: v1.PatchProjectRequest) -> v1.PatchProjectResponse:
        patch = req.project or v1.PatchProject()
        changed = await self.org.projects.patch(
            req.id, name=patch.name, description=patch.description, key=patch.key
        )
        return v1.PatchProjectResponse(project=convert.project(changed))

    async def delete_project(self, req: v1.DeleteProjectRequest) -> v1.DeleteProjectResponse:
        await self.org.projects.delete(req.id)
        return v1.DeleteProjectResponse(completed=True)

    async def move_project(self, req: v1.MoveProjectRequest) -> v1.MoveProjectResponse:
        await self.org.projects.move(req.project_id, req.destination_workspace_id)
        return v1.MoveProjectResponse()

    async def archive_project(self, project_id: int, archived: bool) -> None:
        await self.org.projects.set_archived(project_id, archived)

    # -- experiments in projects -------------------------------------------------------------

    async def move_experiment(self, req: v1.MoveExperimentRequest) -> v1.MoveExperimentResponse:
        await self.org.moves.move(req.experiment_id, req.destination_project_id)
        return v1.MoveExperimentResponse()

    async def move_experiments(self, req: v1.MoveExperimentsRequest) -> v1.MoveExperimentsResponse:
        results = await self.org.moves.move_many(
            req.experiment_ids, req.destination_project_id, source=req.project_id
        )
        return v1.MoveExperimentsResponse(
            results=[v1.ExperimentActionResult(id=i, error=e) for i, e in results.items()]
        )

    async def get_experiment_labels(
        self, req: v1.GetExperimentLabelsRequest
    ) -> v1.GetExperimentLabelsResponse:
        if req.project_id:
            await self.org.projects.get(req.project_id)
        return v1.GetExperimentLabelsResponse(
            labels=await queries.experiment_labels(self._db, req.project_id)
        )

    # -- the model registry --------------------------------------------------------------------

    async def get_model(self, req: v1.GetModelRequest) -> v1.GetModelResponse:
        return v1.GetModelResponse(
            model=convert.model(await self.registry.models.get(req.model_name))
        )

    async def get_models(self, req: v1.GetModelsRequest) -> v1.GetModelsResponse:
        offset, limit = page(req.offset, req.limit)
        found, total = await self.registry.models.select(
            ModelFilter(
                name=req.name,
                description=req.description,
                labels=tuple(req.labels),
                archived=req.archived,
                users=tuple(req.users),
                user_ids=tuple(req.user_ids),
                workspace_ids=tuple(req.workspace_ids),
                workspace_names=tuple(req.workspace_names),
                id=req.id,
                order_by=sort_key(_MODEL_ORDER, req.sort_by),
                descending=req.order_by == v1.OrderBy.DESC,
                offset=offset,
                limit=limit,
            )
        )
        return v1.GetModelsResponse(
            models=[convert.model(m) for m in found],
            pagination=pagination(offset, limit, total, len(found)),
        )

    async def get_model_labels(self, req: v1.GetModelLabelsRequest) -> v1.GetModelLabelsResponse:
        return v1.GetModelLabelsResponse(labels=await self.registry.models.labels(req.workspace_id))

    async def post_model(self, req: v1.PostModelRequest, *, user_id: int) -> v1.PostModelResponse:
        created = await self.registry.models.create(
            req.name,
            user_id=user_id,
            description=req.description,
            metadata=structs.to_dict(req.metadata),
            labels=list(req.labels),
            notes=req.notes,
            workspace_id=req.workspace_id,
            workspace_name=req.workspace_name,
        )
        return v1.PostModelResponse(model=convert.model(created))

    async def patch_model(self, req: v1.PatchModelRequest) -> v1.PatchModelResponse:
        patch = req.model or v1.PatchModel()
        changed = await self.registry.models.patch(
            req.model_name,
            name=patch.name,
            description=patch.description,
            metadata=structs.to_dict(patch.metadata),
            labels=structs.to_list(patch.labels),
            notes=patch.notes,
            workspace_id=patch.workspace_id,
            workspace_name=patch.workspace_name,
        )
        return v1.PatchModelResponse(model=convert.model(changed))

    async def archive_model(self, model_name: str, archived: bool) -> None:
        await self.registry.models.set_archived(model_name, archived)

    async def move_model(self, req: v1.MoveModelRequest) -> v1.MoveModelResponse:
        await self.registry.models.move(req.model_name, req.destination_workspace_id)
        return v1.MoveModelResponse()

    async def delete_model(self, req: v1.DeleteModelRequest) -> v1.DeleteModelResponse:
        await self.registry.models.delete(req.model_name)
        return v1.DeleteModelResponse()

    async def get_model_version(self, req: v1.GetModelVersionRequest) -> v1.GetModelVersionResponse:
        found = await self.registry.versions.get(req.model_name, req.model_version_num)
        return v1.GetModelVersionResponse(model_version=convert.model_version(found))

    async def get_model_versions(
        self, req: v1.GetModelVersionsRequest
    ) -> v1.GetModelVersionsResponse:
        offset, limit = page(req.offset, req.limit)
        model, found, total = await self.registry.versions.select(
            req.model_name,
            order_by=sort_key(_VERSION_ORDER, req.sort_by),
            descending=req.order_by == v1.OrderBy.DESC,
            offset=offset,
            limit=limit,
        )
        return v1.GetModelVersionsResponse(
            model=convert.model(model),
            model_versions=[convert.model_version(v) for v in found],
            pagination=pagination(offset, limit, total, len(found)),
        )

    async def post_model_version(
        self, req: v1.PostModelVersionRequest, *, user_id: int
    ) -> v1.PostModelVersionResponse:
        created = await self.registry.versions.register(
            req.model_name,
            req.checkpoint_uuid,
            user_id=user_id,
            name=req.name,
            comment=req.comment,
            notes=req.notes,
            labels=list(req.labels),
            metadata=structs.to_dict(req.metadata),
        )
        return v1.PostModelVersionResponse(model_version=convert.model_version(created))

    async def patch_model_version(
        self, req: v1.PatchModelVersionRequest
    ) -> v1.PatchModelVersionResponse:
        patch = req.model_version or v1.PatchModelVersion()
        changed = await self.registry.versions.patch(
            req.model_name,
            req.model_version_num,
            name=patch.name,
            comment=patch.comment,
            notes=patch.notes,
            labels=structs.to_list(patch.labels),
            metadata=structs.to_dict(patch.metadata),
        )
        return v1.PatchModelVersionResponse(model_version=convert.model_version(changed))

    async def delete_model_version(
        self, req: v1.DeleteModelVersionRequest
    ) -> v1.DeleteModelVersionResponse:
        await self.registry.versions.delete(req.model_name, req.model_version_num)
        return v1.DeleteModelVersionResponse()
