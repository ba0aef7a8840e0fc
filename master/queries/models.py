"""Which checkpoints the model registry holds: checkpoint garbage collection and deletion
skip or refuse them, naming the model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydet.master.store.db import Database


@dataclass(frozen=True)
class Registration:
    """A checkpoint registered as ``version`` of the model ``model_name`` (``model_id``)."""

    uuid: str
    model_id: int
    model_name: str
    version: int

    def describe(self) -> str:
        return (
            f"{self.uuid}, registered to {self.model_name} (model #{self.model_id}),"
            f" version {self.version}"
        )


_SELECT = (
    "SELECT v.checkpoint_uuid, m.id, m.name, v.version FROM model_versions v"
    " JOIN models m ON m.id = v.model_id"
)


async def registrations(db: Database, uuids: Sequence[str]) -> list[Registration]:
    """The model versions that hold any of these checkpoints."""
    wanted = sorted(set(uuids))
    found: list[Registration] = []
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        rows = await db.fetch_all(
            f"{_SELECT} WHERE v.checkpoint_uuid IN ({','.join('?' * len(chunk))})"
            " ORDER BY m.id, v.version",
            chunk,
        )
        found += [Registration(r[0], r[1], r[2], r[3]) for r in rows]
    return found


async def experiment_registrations(db: Database, experiment_id: int) -> list[Registration]:
    """The model versions that hold checkpoints of this experiment."""
    rows = await db.fetch_all(
        f"{_SELECT} JOIN checkpoints c ON c.uuid = v.checkpoint_uuid"
        " WHERE c.experiment_id = ? ORDER BY m.id, v.version",
        (experiment_id,),
    )
    return [Registration(r[0], r[1], r[2], r[3]) for r in rows]
