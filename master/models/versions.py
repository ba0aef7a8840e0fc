"""A model's versions: each holds one completed checkpoint and has a number (1, 2, ... in
the order they were registered), a name, a comment, notes, labels and metadata."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from determined.common import errors
from pydet.master import queries
from pydet.master.models.models import (
    Model,
    ModelStore,
    check_text,
    labels_text,
    metadata_text,
)
from pydet.master.store.db import Database, Row

ORDER_COLUMNS = {"version": "v.version", "creation_time": "v.creation_time"}

_SELECT = (
    "SELECT v.*, COALESCE(u.username, '') AS username FROM model_versions v"
    " LEFT JOIN users u ON u.id = v.user_id"
)


@dataclass(frozen=True)
class ModelVersion:
    id: int
    model: Model
    version: int
    checkpoint: queries.CheckpointRow | None
    checkpoint_uuid: str
    name: str
    comment: str
    notes: str
    labels: tuple[str, ...]
    metadata: dict[str, Any]
    user_id: int | None
    username: str
    creation_time: float
    last_updated_time: float


def _version(row: Row, model: Model, checkpoint: queries.CheckpointRow | None) -> ModelVersion:
    return ModelVersion(
        id=row["id"],
        model=model,
        version=row["version"],
        checkpoint=checkpoint,
        checkpoint_uuid=row["checkpoint_uuid"],
        name=row["name"],
        comment=row["comment"],
        notes=row["notes"],
        labels=tuple(json.loads(row["labels"])),
        metadata=json.loads(row["metadata"]),
        user_id=row["user_id"],
        username=row["username"],
        creation_time=row["creation_time"],
        last_updated_time=row["last_updated_time"],
    )


class VersionStore:
    def __init__(self, db: Database, models: ModelStore) -> None:
        self._db = db
        self._models = models

    async def _with_checkpoints(self, rows: Sequence[Row], model: Model) -> list[ModelVersion]:
        checkpoints = await queries.checkpoints_by_uuid(
            self._db, [r["checkpoint_uuid"] for r in rows]
        )
        return [_version(r, model, checkpoints.get(r["checkpoint_uuid"])) for r in rows]

    async def get(self, identifier: str, version: int) -> ModelVersion:
        model = await self._models.get(identifier)
        row = await self._db.fetch_one(
            f"{_SELECT} WHERE v.model_id = ? AND v.version = ?", (model.id, version)
        )
        if row is None:
            raise errors.NotFound(f"version {version} of model {model.name!r} not found")
        return (await self._with_checkpoints([row], model))[0]

    async def select(
        self,
        identifier: str,
        *,
        order_by: str = "version",
        descending: bool = False,
        offset: int = 0,
        limit: int = 0,
    ) -> tuple[Model, list[ModelVersion], int]:
        """The model, one page of its versions, and how many it has."""
        model = await self._models.get(identifier)
        column = ORDER_COLUMNS.get(order_by)
        if column is None:
            raise errors.InvalidArgument(
                f"sort_by: expected one of {', '.join(ORDER_COLUMNS)}, got {order_by!r}"
            )
        rows = await self._db.fetch_all(
            f"{_SELECT} WHERE v.model_id = ? ORDER BY {column}"
            f" {'DESC' if descending else 'ASC'}, v.id LIMIT ? OFFSET ?",
            (model.id, limit or -1, offset),
        )
        return model, await self._with_checkpoints(rows, model), model.num_versions

    async def register(
        self,
        identifier: str,
        checkpoint_uuid: str,
        *,
        user_id: int,
        name: str = "",
        comment: str = "",
        notes: str = "",
        labels: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
    ) -> ModelVersion:
        """The model's next version, holding the checkpoint (which must have completed)."""
        if not checkpoint_uuid:
            raise errors.InvalidArgument("checkpoint_uuid: required")
        row = (
            check_text("name", name),
            check_text("comment", comment),
            check_text("notes", notes),
            labels_text(labels),
            metadata_text(metadata),
        )
        async with self._db.atomic():
            model = await self._models.changeable(identifier, "register new versions")
            state = await self._db.fetch_one(
                "SELECT state FROM checkpoints WHERE uuid = ?", (checkpoint_uuid,)
            )
            if state is None:
                raise errors.NotFound(f"checkpoint {checkpoint_uuid} not found")
            if state["state"] != "COMPLETED":
                raise errors.FailedPrecondition(
                    f"checkpoint {checkpoint_uuid} is in {state['state']} state; checkpoints for"
                    " model versions must be in a COMPLETED state"
                )
            last = await self._db.fetch_one(
                "SELECT MAX(version) AS v FROM model_versions WHERE model_id = ?", (model.id,)
            )
            number = int(last["v"] or 0) + 1 if last is not None else 1
            now = time.time()
            await self._db.execute(
                "INSERT INTO model_versions (model_id, version, checkpoint_uuid, name, comment,"
                " notes, labels, metadata, user_id, creation_time, last_updated_time)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (model.id, number, checkpoint_uuid, *row, user_id, now, now),
            )
            await self._models.touch(model.id)
        return await self.get(str(model.id), number)

    async def patch(
        self,
        identifier: str,
        version: int,
        *,
        name: str | None = None,
        comment: str | None = None,
        notes: str | None = None,
        labels: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ModelVersion:
        sets: list[str] = []
        params: list[Any] = []
        for column, text in (("name", name), ("comment", comment), ("notes", notes)):
            if text is not None:
                sets.append(f"{column} = ?")
                params.append(check_text(column, text))
        if labels is not None:
            sets.append("labels = ?")
            params.append(labels_text(labels))
        if metadata is not None:
            sets.append("metadata = ?")
            params.append(metadata_text(metadata))
        async with self._db.atomic():
            model = await self._models.changeable(identifier, "have its versions changed")
            found = await self.get(str(model.id), version)
            if sets:
                await self._db.execute(
                    f"UPDATE model_versions SET {', '.join(sets)}, last_updated_time = ?"
                    " WHERE id = ?",
                    [*params, time.time(), found.id],
                )
                await self._models.touch(model.id)
        return await self.get(str(model.id), version)

    async def delete(self, identifier: str, version: int) -> None:
        """Delete one version; its checkpoint is garbage-collected again like any other."""
        async with self._db.atomic():
            found = await self.get(identifier, version)
            await self._db.execute("DELETE FROM model_versions WHERE id = ?", (found.id,))
            await self._models.touch(found.model.id)
