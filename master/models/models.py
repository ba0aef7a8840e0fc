"""Models as stored: a name unique in the cluster (never only digits: requests name a model
by its name or its id), a description, notes (markdown), labels, metadata (a JSON object)
and the workspace it is in.

Any user creates one; its owner or an admin changes, moves, archives or deletes it
(``auth.rules``). An archived model takes no changes and no new versions; deleting a model
deletes its versions, which frees their checkpoints for garbage collection."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from determined.common import errors
from pydet.master import queries
from pydet.master.store.db import Database, Row
from pydet.master.workspaces import listing
from pydet.master.workspaces.workspaces import DEFAULT_ID, WorkspaceStore

MAX_NAME = 256
MAX_TEXT = 1 << 16
# Bytes of JSON a model's (or a version's) metadata may take.
MAX_METADATA = 1 << 20
MAX_LABELS = 100

ORDER_COLUMNS = {
    "name": "m.name",
    "description": "m.description",
    "creation_time": "m.creation_time",
    "last_updated_time": "m.last_updated_time",
    "num_versions": "num_versions",
    "workspace": "m.workspace_id",
    "id": "m.id",
}

_SELECT = (
    "SELECT m.*, COALESCE(u.username, '') AS username,"
    " (SELECT COUNT(*) FROM model_versions v WHERE v.model_id = m.id) AS num_versions"
    " FROM models m LEFT JOIN users u ON u.id = m.user_id"
)
_DIGITS = re.compile(r"^\d+$")


@dataclass(frozen=True)
class Model:
    id: int
    name: str
    description: str
    metadata: dict[str, Any]
    labels: tuple[str, ...]
    notes: str
    user_id: int | None
    username: str
    workspace_id: int
    archived: bool
    creation_time: float
    last_updated_time: float
    num_versions: int


@dataclass(frozen=True)
class ModelFilter(listing.ListFilter):
    """What GetModels asks for: every filter given must match."""

    # Names (and descriptions) containing this, any case.
    name: str = ""
    description: str = ""
    # Models with every one of these labels.
    labels: Sequence[str] = ()
    workspace_ids: Sequence[int] = ()
    workspace_names: Sequence[str] = ()
    id: int = 0
    order_by: str = "last_updated_time"


def model_of(row: Row) -> Model:
    return Model(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        metadata=json.loads(row["metadata"]),
        labels=tuple(json.loads(row["labels"])),
        notes=row["notes"],
        user_id=row["user_id"],
        username=row["username"],
        workspace_id=row["workspace_id"],
        archived=bool(row["archived"]),
        creation_time=row["creation_time"],
        last_updated_time=row["last_updated_time"],
        num_versions=row["num_versions"],
    )


def check_name(name: str) -> str:
    """A model name as Determined allows them."""
    if not name.strip():
        raise errors.InvalidArgument("model name: cannot be blank")
    if "  " in name:
        raise errors.InvalidArgument(f"model name {name!r}: cannot have excessive spacing")
    if "/" in name or "\\" in name:
        raise errors.InvalidArgument(f"model name {name!r}: cannot have slashes")
    if _DIGITS.match(name):
        raise errors.InvalidArgument(
            f"model name {name!r}: cannot be only numbers (a number names a model by its id)"
        )
    if len(name) > MAX_NAME:
        raise errors.InvalidArgument(f"model name: at most {MAX_NAME} characters")
    return name


def check_text(field: str, value: str) -> str:
    if len(value) > MAX_TEXT:
        raise errors.InvalidArgument(f"{field}: at most {MAX_TEXT} characters")
    return value


def metadata_text(value: dict[str, Any] | None) -> str:
    text = json.dumps(value or {})
    if len(text) > MAX_METADATA:
        raise errors.InvalidArgument(f"metadata: at most {MAX_METADATA} bytes of JSON")
    return text


def labels_text(labels: Sequence[Any]) -> str:
    if len(labels) > MAX_LABELS:
        raise errors.InvalidArgument(f"labels: at most {MAX_LABELS}")
    for i, label in enumerate(labels):
        if not isinstance(label, str) or not label.strip():
            raise errors.InvalidArgument(f"labels[{i}]: expected a non-empty string")
    return json.dumps(list(dict.fromkeys(labels)))


class ModelStore:
    def __init__(self, db: Database, workspaces: WorkspaceStore) -> None:
        self._db = db
        self._workspaces = workspaces

    # -- reads ---------------------------------------------------------------------------------

    async def get(self, identifier: str) -> Model:
        """The model named ``identifier``, or the one with that id if it is all digits."""
        if _DIGITS.match(identifier):
            row = await self._db.fetch_one(f"{_SELECT} WHERE m.id = ?", (int(identifier),))
        else:
            row = await self._db.fetch_one(f"{_SELECT} WHERE m.name = ?", (identifier,))
        if row is None:
            raise errors.NotFound(f"model {identifier!r} not found")
        return model_of(row)

    async def select(self, f: ModelFilter) -> tuple[list[Model], int]:
        """One page of the models ``f`` selects, and how many it selects in all."""
        where, params = listing.owned("m", archived=f.archived, users=f.users, user_ids=f.user_ids)
        for text, field in ((f.name, "m.name"), (f.description, "m.description")):
            if text:
                where.append(f"instr(lower({field}), lower(?)) > 0")
                params.append(text)
        if f.id:
            where.append("m.id = ?")
            params.append(f.id)
        if f.workspace_ids:
            where.append(f"m.workspace_id IN ({','.join('?' * len(f.workspace_ids))})")
            params.extend(f.workspace_ids)
        if f.workspace_names:
            where.append(
                "m.workspace_id IN (SELECT id FROM workspaces WHERE name IN"
                f" ({','.join('?' * len(f.workspace_names))}))"
            )
            params.extend(f.workspace_names)
        for label in f.labels:
            where.append(queries.has_label(self._db.dialect, "m.labels"))
            params.append(label)
        rows, total = await listing.page(
            self._db,
            select=_SELECT,
            table="models m",
            where=where,
            params=params,
            order=listing.order(ORDER_COLUMNS, f.order_by),
            descending=f.descending,
            offset=f.offset,
            limit=f.limit,
        )
        return [model_of(r) for r in rows], total

    async def labels(self, workspace_id: int | None = None) -> list[str]:
        """Every label models carry (of one workspace, or of all), most used first."""
        if workspace_id is not None:
            await self._workspaces.get(workspace_id)
            rows = await self._db.fetch_all(
                "SELECT labels FROM models WHERE workspace_id = ?", (workspace_id,)
            )
        else:
            rows = await self._db.fetch_all("SELECT labels FROM models")
        counts: dict[str, int] = {}
        for row in rows:
            for label in json.loads(row["labels"]):
                counts[label] = counts.get(label, 0) + 1
        return sorted(counts, key=lambda label: (-counts[label], label))

    async def _workspace(self, workspace_id: int | None, workspace_name: str | None) -> int:
        if workspace_name:
            found = await self._workspaces.by_name(workspace_name)
        else:
            found = await self._workspaces.get(workspace_id or DEFAULT_ID)
        if found.archived:
            raise errors.FailedPrecondition(
                f"workspace {found.name!r} is archived and cannot take models"
            )
        return found.id

    # -- changes -------------------------------------------------------------------------------

    async def create(
        self,
        name: str,
        *,
        user_id: int,
        description: str = "",
        metadata: dict[str, Any] | None = None,
        labels: Sequence[str] = (),
        notes: str = "",
        workspace_id: int | None = None,
        workspace_name: str | None = None,
    ) -> Model:
        check_name(name)
        row = (
            check_text("description", description),
            metadata_text(metadata),
            labels_text(labels),
            check_text("notes", notes),
        )
        async with self._db.atomic():
            workspace = await self._workspace(workspace_id, workspace_name)
            await self._unique(name)
            now = time.time()
            model_id = await self._db.execute(
                "INSERT INTO models (name, description, metadata, labels, notes, user_id,"
                " workspace_id, creation_time, last_updated_time) VALUES (?,?,?,?,?,?,?,?,?)",
                (name, *row, user_id, workspace, now, now),
            )
        return await self.get(str(model_id))

    async def _unique(self, name: str, but: int = 0) -> None:
        row = await self._db.fetch_one(
            "SELECT id FROM models WHERE name = ? AND id != ?", (name, but)
        )
        if row is not None:
            raise errors.AlreadyExists(f"a model named {name!r} exists (model #{row['id']})")

    async def changeable(self, identifier: str, what: str) -> Model:
        """The model, unless it is archived (then FailedPrecondition saying ``what`` it
        cannot do)."""
        found = await self.get(identifier)
        if found.archived:
            raise errors.FailedPrecondition(f"model {found.name!r} is archived and cannot {what}")
        return found

    async def patch(
        self,
        identifier: str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        labels: Sequence[str] | None = None,
        notes: str | None = None,
        workspace_id: int | None = None,
        workspace_name: str | None = None,
    ) -> Model:
        sets: list[str] = []
        params: list[Any] = []
        if description is not None:
            sets.append("description = ?")
            params.append(check_text("description", description))
        if metadata is not None:
            sets.append("metadata = ?")
            params.append(metadata_text(metadata))
        if labels is not None:
            sets.append("labels = ?")
            params.append(labels_text(labels))
        if notes is not None:
            sets.append("notes = ?")
            params.append(check_text("notes", notes))
        async with self._db.atomic():
            current = await self.changeable(identifier, "have attributes updated")
            if name is not None:
                check_name(name)
                await self._unique(name, but=current.id)
                sets.append("name = ?")
                params.append(name)
            if workspace_id is not None or workspace_name:
                sets.append("workspace_id = ?")
                params.append(await self._workspace(workspace_id, workspace_name))
            if sets:
                await self._db.execute(
                    f"UPDATE models SET {', '.join(sets)}, last_updated_time = ? WHERE id = ?",
                    [*params, time.time(), current.id],
                )
        return await self.get(str(current.id))

    async def touch(self, model_id: int) -> None:
        """A version changed: the model was updated now."""
        await self._db.execute(
            "UPDATE models SET last_updated_time = ? WHERE id = ?", (time.time(), model_id)
        )

    async def set_archived(self, identifier: str, archived: bool) -> None:
        async with self._db.atomic():
            found = await self.get(identifier)
            await self._db.execute(
                "UPDATE models SET archived = ? WHERE id = ?", (int(archived), found.id)
            )

    async def move(self, identifier: str, workspace_id: int) -> None:
        async with self._db.atomic():
            found = await self.get(identifier)
            destination = await self._workspace(workspace_id, None)
            await self._db.execute(
                "UPDATE models SET workspace_id = ?, last_updated_time = ? WHERE id = ?",
                (destination, time.time(), found.id),
            )

    async def delete(self, identifier: str) -> None:
        """Delete the model and its versions."""
        async with self._db.atomic():
            found = await self.get(identifier)
            await self._db.execute("DELETE FROM model_versions WHERE model_id = ?", (found.id,))
            await self._db.execute("DELETE FROM models WHERE id = ?", (found.id,))
