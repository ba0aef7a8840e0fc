"""``Project``: a project on the master (its experiments, notes, name, key, description), as
Determined's SDK has it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from determined.common import errors

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession
    from determined.common.experimental.experiment import Experiment

# Items read per call when a list is paged through.
PAGE = 1000

T = TypeVar("T")


def paged(fetch: Callable[[int, int], Sequence[T]]) -> list[T]:
    """Every item of a list the master gives in pages: ``fetch(offset, limit)`` is one."""
    out: list[T] = []
    while True:
        page = fetch(len(out), PAGE)
        out += page
        if len(page) < PAGE:
            return out


class Project:
    """A project.

    Attributes:
        id: (int) The ID of the project.
        archived: (bool) True if the project is archived.
        description: (str) The description of the project.
        key: (str) Its key (short, unique in the cluster).
        n_active_experiments: (int) How many of its experiments have not ended.
        n_experiments: (int) How many experiments it holds.
        name: (str) Its name (unique in its workspace).
        notes: (list of dicts with "name" and "contents") Its notes (markdown).
        username: (str) Its owner's username.
        workspace_id: (int) The ID of its workspace.

    Attributes are as last read; ``reload()`` reads them again.
    """

    def __init__(self, session: MasterSession, project_id: int) -> None:
        self._session = session
        self.id = project_id
        self.archived: bool | None = None
        self.description: str | None = None
        self.n_active_experiments: int | None = None
        self.n_experiments: int | None = None
        self.name: str | None = None
        self.notes: list[dict[str, str]] | None = None
        self.workspace_id: int | None = None
        self.username: str | None = None
        self.key: str | None = None

    def __repr__(self) -> str:
        return f"Project(id={self.id}, name={self.name!r})"

    @classmethod
    def _from_proto(cls, p: v1.Project, session: MasterSession) -> Project:
        project = cls(session, project_id=p.id)
        project._hydrate(p)
        return project

    def _hydrate(self, p: v1.Project) -> None:
        self.archived = p.archived
        self.description = p.description
        self.n_active_experiments = p.num_active_experiments
        self.n_experiments = p.num_experiments
        self.name = p.name
        self.notes = [{"name": n.name, "contents": n.contents} for n in p.notes]
        self.workspace_id = p.workspace_id
        self.username = p.username
        self.key = p.key

    def _fetch(self) -> v1.Project:
        from determined.api.gen import v1

        resp = self._session.call(lambda stub: stub.get_project(v1.GetProjectRequest(id=self.id)))
        if resp.project is None:
            raise errors.NotFound(f"project {self.id} not found")
        return resp.project

    def reload(self) -> None:
        """Fetch the project's attributes again."""
        self._hydrate(self._fetch())

    def list_experiments(self) -> list[Experiment]:
        """Every experiment of the project, oldest first."""
        from determined.api.gen import v1
        from determined.common.experimental.experiment import Experiment

        def fetch(offset: int, limit: int) -> Sequence[v1.Experiment]:
            req = v1.GetExperimentsRequest(project_id=self.id, offset=offset, limit=limit)
            return self._session.call(lambda stub: stub.get_experiments(req)).experiments

        out = []
        for e in paged(fetch):
            exp = Experiment(e.id, self._session)
            exp._hydrate(e)
            out.append(exp)
        return out

    def _patch(self, patch: v1.PatchProject) -> v1.Project:
        from determined.api.gen import v1

        req = v1.PatchProjectRequest(id=self.id, project=patch)
        resp = self._session.call(lambda stub: stub.patch_project(req))
        if resp.project is None:
            raise errors.DetError("the master's answer carries no project")
        self._hydrate(resp.project)
        return resp.project

    def set_description(self, description: str) -> None:
        """Set the project's description, here and on the master."""
        from determined.api.gen import v1

        self._patch(v1.PatchProject(description=description))

    def set_key(self, key: str) -> None:
        """Set the project's key, here and on the master."""
        from determined.api.gen import v1

        self._patch(v1.PatchProject(key=key))

    def set_name(self, name: str) -> None:
        """Set the project's name, here and on the master."""
        from determined.api.gen import v1

        self._patch(v1.PatchProject(name=name))

    def archive(self) -> None:
        """Archive the project: it takes no new experiments."""
        from determined.api.gen import v1

        self._session.call(lambda stub: stub.archive_project(v1.ArchiveProjectRequest(id=self.id)))
        self.archived = True

    def unarchive(self) -> None:
        """Unarchive the project."""
        from determined.api.gen import v1

        req = v1.UnarchiveProjectRequest(id=self.id)
        self._session.call(lambda stub: stub.unarchive_project(req))
        self.archived = False

    def _put_notes(self, notes: list[v1.Note]) -> None:
        from determined.api.gen import v1

        req = v1.PutProjectNotesRequest(project_id=self.id, notes=notes)
        resp = self._session.call(lambda stub: stub.put_project_notes(req))
        self.notes = [{"name": n.name, "contents": n.contents} for n in resp.notes]

    def add_note(self, name: str, contents: str) -> None:
        """Add a note (markdown ``contents`` under ``name``) to the project's notes as the
        master holds them now; ``notes`` is then the master's."""
        from determined.api.gen import v1

        self._put_notes([*self._fetch().notes, v1.Note(name=name, contents=contents)])

    def remove_note(self, name: str) -> None:
        """Remove the project's one note named ``name``.

        Raises:
            ValueError: no note, or more than one, has that name.
        """
        notes = list(self._fetch().notes)
        matching = [i for i, note in enumerate(notes) if note.name == name]
        if not matching:
            raise ValueError(f"No note with name '{name}' found to remove.")
        if len(matching) > 1:
            raise ValueError(
                f"Multiple notes with name '{name}' found. Use the web UI to perform this action."
            )
        notes.pop(matching[0])
        self._put_notes(notes)
