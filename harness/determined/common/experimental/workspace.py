"""``Workspace``: a workspace on the master and its projects, as Determined's SDK has it; and
the ``Determined`` methods that find, list, create and delete workspaces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from determined.common import errors
from determined.common.experimental.project import Project, paged

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession


class Workspace:
    """A workspace: ``id`` and ``name``.

    Get one from ``client.get_workspace(name)``, ``client.list_workspaces()`` or
    ``client.create_workspace(name)``; ``Workspace(session, workspace_name=...)`` looks one
    up by name.
    """

    def __init__(
        self,
        session: MasterSession,
        workspace_id: int | None = None,
        workspace_name: str | None = None,
    ) -> None:
        if (workspace_id is None) == (workspace_name is None):
            raise ValueError("Workspace must be constructed with either a name or id (not both).")
        self._session = session
        self.name = workspace_name
        if workspace_id is None:
            assert workspace_name is not None
            workspace_id = by_name(session, workspace_name).id
        self.id: int = workspace_id

    def __repr__(self) -> str:
        return f"Workspace(id={self.id}, name={self.name!r})"

    @classmethod
    def _from_proto(cls, w: v1.Workspace, session: MasterSession) -> Workspace:
        workspace = cls(session, workspace_id=w.id)
        workspace._hydrate(w)
        return workspace

    def _hydrate(self, w: v1.Workspace) -> None:
        self.id = w.id
        self.name = w.name

    def reload(self) -> None:
        """Fetch the workspace's attributes again."""
        from determined.api.gen import v1

        resp = self._session.call(
            lambda stub: stub.get_workspace(v1.GetWorkspaceRequest(id=self.id))
        )
        if resp.workspace is None:
            raise errors.NotFound(f"workspace {self.id} not found")
        self._hydrate(resp.workspace)

    def create_project(self, name: str, description: str | None = None) -> Project:
        """Create a project named ``name`` (unique in this workspace) in it.

        Raises:
            errors.AlreadyExists: the workspace has a project of that name.
        """
        from determined.api.gen import v1

        req = v1.PostProjectRequest(name=name, workspace_id=self.id, description=description or "")
        resp = self._session.call(lambda stub: stub.post_project(req))
        if resp.project is None:
            raise errors.DetError("the master's answer carries no project")
        return Project._from_proto(resp.project, self._session)

    def delete_project(self, name: str) -> None:
        """Delete this workspace's project ``name`` (it must hold no experiment).

        Raises:
            errors.NotFound: the workspace has no project of that name.
        """
        from determined.api.gen import v1

        project_id = self.get_project(name).id
        self._session.call(lambda stub: stub.delete_project(v1.DeleteProjectRequest(id=project_id)))

    def get_project(self, project_name: str) -> Project:
        """This workspace's project ``project_name``.

        Raises:
            errors.NotFound: the workspace has no project of that name.
        """
        from determined.api.gen import v1

        req = v1.GetWorkspaceProjectsRequest(id=self.id, name=project_name)
        found = [
            p
            for p in self._session.call(lambda stub: stub.get_workspace_projects(req)).projects
            if p.name == project_name
        ]
        if not found:
            raise errors.NotFound(f"Project '{project_name}' not found in this workspace.")
        return Project._from_proto(found[0], self._session)

    def list_projects(self) -> list[Project]:
        """Every project of this workspace, in id order."""
        from determined.api.gen import v1

        def fetch(offset: int, limit: int) -> Sequence[v1.Project]:
            req = v1.GetWorkspaceProjectsRequest(id=self.id, offset=offset, limit=limit)
            return self._session.call(lambda stub: stub.get_workspace_projects(req)).projects

        return [Project._from_proto(p, self._session) for p in paged(fetch)]


def by_name(session: MasterSession, name: str) -> v1.Workspace:
    """The workspace named ``name``; NotFound naming it."""
    from determined.api.gen import v1

    req = v1.GetWorkspacesRequest(name_case_sensitive=name)
    found = session.call(lambda stub: stub.get_workspaces(req)).workspaces
    if not found:
        raise errors.NotFound(f"Workspace {name} not found.")
    return found[0]


class WorkspaceMethods:
    """``Determined``'s workspace methods (the class mixes them in)."""

    _session: MasterSession

    def get_workspace(self, name: str) -> Workspace:
        """The workspace named ``name``.

        Raises:
            errors.NotFound: there is none.
        """
        return Workspace._from_proto(by_name(self._session, name), self._session)

    def list_workspaces(self) -> list[Workspace]:
        """Every workspace, in id order (the default one, Uncategorized, first)."""
        from determined.api.gen import v1

        def fetch(offset: int, limit: int) -> Sequence[v1.Workspace]:
            req = v1.GetWorkspacesRequest(offset=offset, limit=limit)
            return self._session.call(lambda stub: stub.get_workspaces(req)).workspaces

        return [Workspace._from_proto(w, self._session) for w in paged(fetch)]

    def create_workspace(self, name: str) -> Workspace:
        """Create a workspace named ``name``.

        Raises:
            errors.AlreadyExists: a workspace of that name exists.
        """
        from determined.api.gen import v1

        req = v1.PostWorkspaceRequest(name=name)
        resp = self._session.call(lambda stub: stub.post_workspace(req))
        if resp.workspace is None:
            raise errors.DetError("the master's answer carries no workspace")
        return Workspace._from_proto(resp.workspace, self._session)

    def delete_workspace(self, name: str) -> None:
        """Delete the workspace named ``name`` with its projects (it must hold no experiment
        and no model).

        Raises:
            errors.NotFound: there is none.
        """
        from determined.api.gen import v1

        workspace_id = by_name(self._session, name).id
        self._session.call(
            lambda stub: stub.delete_workspace(v1.DeleteWorkspaceRequest(id=workspace_id))
        )
