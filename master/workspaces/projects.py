"""Projects as stored: a workspace's groups of experiments, each with a name unique in its
workspace, a key unique in the cluster, a description and notes (markdown).

Any user creates one in a workspace that is neither archived nor the default; its owner, its
workspace's owner or an admin changes it (``auth.rules``). An archived project takes no new
experiments; one is deleted only when it holds none; the default project never changes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from determined.common import errors
from pydet.master.states import TERMINAL
from pydet.master.store.db import Database, Row
from pydet.master.workspaces import listing, names
from pydet.master.workspaces.workspaces import WorkspaceStore

# Bytes of JSON a project's notes may take, all together.
MAX_NOTES = 1 << 20
# Tries at a generated key before giving up (each is new with probability ~1 - n/36^k).
KEY_TRIES = 20

ORDER_COLUMNS = {
    "id": "p.id",
    "name": "p.name",
    "description": "p.description",
    "creation_time": "p.created_at",
    "last_experiment_start_time": "last_started",
}

_SELECT = (
    "SELECT p.*, w.name AS workspace_name, w.archived AS workspace_archived,"
    " COALESCE(u.username, '') AS username,"
    " (SELECT COUNT(*) FROM experiments e WHERE e.project_id = p.id) AS num_experiments,"
    " (SELECT COUNT(*) FROM experiments e WHERE e.project_id = p.id"
    "  AND e.state NOT IN ({terminal})) AS num_active,"
    " (SELECT MAX(e.start_time) FROM experiments e WHERE e.project_id = p.id) AS last_started,"
    " (SELECT COUNT(*) FROM trials t JOIN experiments e ON e.id = t.experiment_id"
    "  WHERE e.project_id = p.id) AS num_runs"
    " FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
    " LEFT JOIN users u ON u.id = p.user_id"
).format(terminal=",".join(f"'{s.value}'" for s in sorted(TERMINAL, key=lambda s: s.value)))


@dataclass(frozen=True)
class Note:
    name: str
    contents: str


@dataclass(frozen=True)
class Project:
    id: int
    name: str
    workspace_id: int
    workspace_name: str
    description: str
    notes: tuple[Note, ...]
    key: str
    # Its creator; None for the default project, which is the cluster's.
    user_id: int | None
    username: str
    archived: bool
    # Whether its workspace is archived (it then takes no new experiments either).
    workspace_archived: bool
    immutable: bool
    num_experiments: int
    num_active_experiments: int
    # Its experiments' trials (Determined's runs).
    num_runs: int
    # When its newest experiment started (seconds since the epoch); None when it has none.
    last_experiment_started_at: float | None


@dataclass(frozen=True)
class ProjectFilter(listing.ListFilter):
    """What GetWorkspaceProjects asks for: every filter given must match."""

    # 0: every workspace's.
    workspace_id: int = 0
    # This name, any case.
    name: str = ""


def _project(row: Row) -> Project:
    return Project(
        id=row["id"],
        name=row["name"],
        workspace_id=row["workspace_id"],
        workspace_name=row["workspace_name"],
        description=row["description"],
        notes=tuple(Note(n["name"], n["contents"]) for n in json.loads(row["notes"])),
        key=row["key"],
        user_id=row["user_id"],
        username=row["username"] or ("admin" if row["immutable"] else ""),
        archived=bool(row["archived"]),
        workspace_archived=bool(row["workspace_archived"]),
        immutable=bool(row["immutable"]),
        num_experiments=row["num_experiments"],
        num_active_experiments=row["num_active"],
        num_runs=row["num_runs"],
        last_experiment_started_at=row["last_started"],
    )


def _notes(notes: Sequence[Note]) -> str:
    for i, note in enumerate(notes):
        if not note.name.strip():
            raise errors.InvalidArgument(f"notes[{i}].name: a note needs a name")
    text = json.dumps([{"name": n.name, "contents": n.contents} for n in notes])
    if len(text) > MAX_NOTES:
        raise errors.InvalidArgument(f"notes: at most {MAX_NOTES} bytes in all, got {len(text)}")
    return text


class ProjectStore:
    def __init__(self, db: Database, workspaces: WorkspaceStore) -> None:
        self._db = db
        self._workspaces = workspaces

    # -- reads ---------------------------------------------------------------------------------

    async def get(self, project_id: int) -> Project:
        row = await self._db.fetch_one(f"{_SELECT} WHERE p.id = ?", (project_id,))
        if row is None:
            raise errors.NotFound(f"project {project_id} not found")
        return _project(row)

    async def by_key(self, key: str) -> Project:
        row = await self._db.fetch_one(f"{_SELECT} WHERE p.key = ?", (key.upper(),))
        if row is None:
            raise errors.NotFound(f"project with key {key!r} not found")
        return _project(row)

    async def by_name(self, workspace: str, project: str) -> Project:
        """The project ``project`` of the workspace named ``workspace``."""
        row = await self._db.fetch_one(
            f"{_SELECT} WHERE w.name = ? AND p.name = ?", (workspace, project)
        )
        if row is None:
            await self._workspaces.by_name(workspace)  # NotFound naming the workspace
            raise errors.NotFound(f"project {project!r} not found in workspace {workspace!r}")
        return _project(row)

    async def select(self, f: ProjectFilter) -> tuple[list[Project], int]:
        """One page of the projects ``f`` selects, and how many it selects in all."""
        where, params = listing.owned("p", archived=f.archived, users=f.users, user_ids=f.user_ids)
        if f.workspace_id:
            await self._workspaces.get(f.workspace_id)  # NotFound for an unknown workspace
            where.append("p.workspace_id = ?")
            params.append(f.workspace_id)
        if f.name:
            where.append("lower(p.name) = lower(?)")
            params.append(f.name)
        rows, total = await listing.page(
            self._db,
            select=_SELECT,
            table="projects p",
            where=where,
            params=params,
            order=listing.order(ORDER_COLUMNS, f.order_by),
            descending=f.descending,
            offset=f.offset,
            limit=f.limit,
        )
        return [_project(r) for r in rows], total

    # -- changes -------------------------------------------------------------------------------

    async def create(
        self,
        workspace_id: int,
        name: str,
        *,
        user_id: int,
        description: str = "",
        key: str | None = None,
    ) -> Project:
        names.check_name("project", name)
        names.check_description(description)
        wanted = names.check_key(key) if key is not None else None
        async with self._db.atomic():
            workspace = await self._workspaces.get(workspace_id)
            if workspace.immutable:
                raise errors.FailedPrecondition(
                    f"workspace {workspace.name!r} is the default workspace and takes no new"
                    " projects; create a workspace for them (det workspace create)"
                )
            if workspace.archived:
                raise errors.FailedPrecondition(
                    f"workspace {workspace.name!r} is archived and cannot add new projects"
                )
            await self._unique(workspace_id, workspace.name, name)
            project_key = wanted or await self._free_key(name)
            if wanted is not None:
                await self._unique_key(wanted)
            project_id = await self._db.execute(
                "INSERT INTO projects (workspace_id, name, key, description, user_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (workspace_id, name, project_key, description, user_id, time.time()),
            )
        return await self.get(project_id)

    async def _unique(self, workspace_id: int, workspace: str, name: str, but: int = 0) -> None:
        row = await self._db.fetch_one(
            "SELECT id FROM projects WHERE workspace_id = ? AND name = ? AND id != ?",
            (workspace_id, name, but),
        )
        if row is not None:
            raise errors.AlreadyExists(
                f"workspace {workspace!r} has a project named {name!r} (id {row['id']})"
            )

    async def _unique_key(self, key: str, but: int = 0) -> None:
        row = await self._db.fetch_one(
            "SELECT id FROM projects WHERE key = ? AND id != ?", (key, but)
        )
        if row is not None:
            raise errors.AlreadyExists(f"project key {key!r} is in use by project {row['id']}")

    async def _free_key(self, name: str) -> str:
        for _ in range(KEY_TRIES):
            key = names.generated_key(name)
            if await self._db.fetch_one("SELECT id FROM projects WHERE key = ?", (key,)) is None:
                return key
        raise errors.FailedPrecondition("could not generate a free project key; give one (--key)")

    async def _changeable(self, project_id: int, what: str) -> Project:
        found = await self.get(project_id)
        if found.immutable:
            raise errors.FailedPrecondition(
                f"project {found.name!r} is the default project and cannot be {what}"
            )
        return found

    async def patch(
        self,
        project_id: int,
        *,
        name: str | None = None,
        description: str | None = None,
        key: str | None = None,
    ) -> Project:
        async with self._db.atomic():
            current = await self._changeable(project_id, "changed")
            if current.archived:
                raise errors.FailedPrecondition(
                    f"project {current.name!r} is archived and cannot be changed; unarchive it"
                    " first"
                )
            sets: list[str] = []
            params: list[Any] = []
            if name is not None:
                names.check_name("project", name)
                await self._unique(current.workspace_id, current.workspace_name, name, project_id)
                sets.append("name = ?")
                params.append(name)
            if description is not None:
                sets.append("description = ?")
                params.append(names.check_description(description))
            if key is not None:
                new_key = names.check_key(key)
                await self._unique_key(new_key, project_id)
                sets.append("key = ?")
                params.append(new_key)
            if sets:
                await self._db.execute(
                    f"UPDATE projects SET {', '.join(sets)} WHERE id = ?", [*params, project_id]
                )
        return await self.get(project_id)

    async def set_notes(self, project_id: int, notes: Sequence[Note]) -> tuple[Note, ...]:
        """Replace every note of the project (the default project's too)."""
        text = _notes(notes)
        async with self._db.atomic():
            await self.get(project_id)
            await self._db.execute("UPDATE projects SET notes = ? WHERE id = ?", (text, project_id))
        return (await self.get(project_id)).notes

    async def add_note(self, project_id: int, note: Note) -> tuple[Note, ...]:
        async with self._db.atomic():
            current = await self.get(project_id)
            return await self.set_notes(project_id, [*current.notes, note])

    async def set_archived(self, project_id: int, archived: bool) -> None:
        async with self._db.atomic():
            found = await self._changeable(project_id, "archived" if archived else "unarchived")
            if not archived and found.workspace_archived:
                raise errors.FailedPrecondition(
                    f"project {found.name!r} is in archived workspace {found.workspace_name!r};"
                    " unarchive the workspace first"
                )
            await self._db.execute(
                "UPDATE projects SET archived = ? WHERE id = ?", (int(archived), project_id)
            )

    async def delete(self, project_id: int) -> None:
        """Delete a project that holds no experiment; one that does is refused with the
        count."""
        async with self._db.atomic():
            found = await self._changeable(project_id, "deleted")
            if found.num_experiments:
                n = found.num_experiments
                raise errors.FailedPrecondition(
                    f"project {found.name!r} holds {n} experiment{'s' if n != 1 else ''};"
                    " move or delete them first"
                )
            await self._db.execute("DELETE FROM projects WHERE id = ?", (project_id,))

    async def move(self, project_id: int, workspace_id: int) -> None:
        """Move a project, with its experiments, to another workspace."""
        async with self._db.atomic():
            found = await self._changeable(project_id, "moved")
            destination = await self._workspaces.get(workspace_id)
            if destination.immutable:
                raise errors.FailedPrecondition(
                    f"workspace {destination.name!r} is the default workspace and takes no projects"
                )
            if destination.archived:
                raise errors.FailedPrecondition(
                    f"workspace {destination.name!r} is archived and cannot add new projects"
                )
            if found.archived:
                raise errors.FailedPrecondition(
                    f"project {found.name!r} is archived and cannot be moved; unarchive it first"
                )
            await self._unique(workspace_id, destination.name, found.name)
            await self._db.execute(
                "UPDATE projects SET workspace_id = ? WHERE id = ?", (workspace_id, project_id)
            )
