"""Where a new experiment goes, and what its workspace gives its config.

As in Determined: the project a request names by id, else the one the config names
(``workspace:`` and ``project:``, both or neither), else the default project. An archived
project, or one in an archived workspace, takes no new experiment. The workspace's own
checkpoint storage and default compute pool fill the config where it says nothing, before
the master's defaults do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from determined.common import errors
from pydet.master.workspaces.projects import Project, ProjectStore
from pydet.master.workspaces.workspaces import DEFAULT_ID, WorkspaceStore


@dataclass(frozen=True)
class Placement:
    project: Project
    # The workspace's share of the config's defaults (over the master's).
    defaults: dict[str, Any] = field(default_factory=dict)


def _named(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise errors.InvalidArgument(f"{key}: expected the name of a {key}, got {value!r}")
    return value


class Placements:
    def __init__(self, workspaces: WorkspaceStore, projects: ProjectStore) -> None:
        self._workspaces = workspaces
        self._projects = projects

    async def place(self, raw_config: dict[str, Any], project_id: int = 0) -> Placement:
        """Where an experiment with this (unvalidated) config goes; NotFound naming what the
        request or the config names and does not exist."""
        if project_id:
            project = await self._projects.get(project_id)
        else:
            workspace, name = _named(raw_config, "workspace"), _named(raw_config, "project")
            if bool(workspace) != bool(name):
                raise errors.InvalidArgument(
                    "workspace and project: give both in the config, or neither (for the "
                    "default project, Uncategorized)"
                )
            if workspace:
                project = await self._projects.by_name(workspace, name)
            else:
                project = await self._projects.get(DEFAULT_ID)
        return await self.checked(project)

    async def checked(self, project: Project) -> Placement:
        """``project`` if it takes new experiments, with its workspace's defaults."""
        if project.archived:
            raise errors.FailedPrecondition(
                f"project {project.name!r} (id {project.id}) is archived and cannot add new "
                "experiments; unarchive it (det project unarchive) or choose another"
            )
        if project.workspace_archived:
            raise errors.FailedPrecondition(
                f"workspace {project.workspace_name!r} is archived and its project "
                f"{project.name!r} cannot add new experiments"
            )
        workspace = await self._workspaces.get(project.workspace_id)
        defaults: dict[str, Any] = {}
        if workspace.checkpoint_storage:
            defaults["checkpoint_storage"] = workspace.checkpoint_storage
        if workspace.default_compute_pool:
            defaults["resources"] = {"resource_pool": workspace.default_compute_pool}
        return Placement(project, defaults)
