"""What users change about an experiment after creating it: its name, description,
labels (Determined's PatchExperiment, PutExperimentLabel, DeleteExperimentLabel) and notes.

As in Determined, name, description and labels are the config's too: the stored config
changes with them (and a running experiment's, which its job settings are saved from).
Callers hold the master's lock.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from determined.api.gen import v1
from determined.common import errors
from pydet.master import queries
from pydet.master.experiments.live import LiveExperiments
from pydet.master.store.db import Database

# Bytes of notes an experiment may keep.
MAX_NOTES = 1 << 20
MAX_LABEL = 255


def _label(label: str) -> str:
    if not label.strip():
        raise errors.InvalidArgument("label: must not be empty")
    if len(label) > MAX_LABEL:
        raise errors.InvalidArgument(f"label: at most {MAX_LABEL} characters")
    return label


class ExperimentEdits:
    def __init__(self, db: Database, live: LiveExperiments) -> None:
        self._db = db
        self._live = live

    async def patch(self, change: v1.PatchExperiment) -> None:
        row = await queries.experiment(self._db, change.id)
        fields: dict[str, Any] = {}
        if change.name is not None and change.name != row.name:
            if not change.name.strip():
                raise errors.InvalidArgument("name: must not be empty or whitespace")
            fields["name"] = change.name
        if change.description is not None:
            fields["description"] = change.description
        if change.labels is not None:
            fields["labels"] = list(dict.fromkeys(_label(x) for x in change.labels.values))
        notes = change.notes
        if notes is not None and len(notes.encode()) > MAX_NOTES:
            raise errors.InvalidArgument(f"notes: more than {MAX_NOTES} bytes")
        await self._save(row, fields, notes)

    async def add_label(self, experiment_id: int, label: str) -> list[str]:
        row = await queries.experiment(self._db, experiment_id)
        if _label(label) not in row.labels:
            await self._save(row, {"labels": [*row.labels, label]}, None)
        return (await queries.experiment(self._db, experiment_id)).labels

    async def remove_label(self, experiment_id: int, label: str) -> list[str]:
        row = await queries.experiment(self._db, experiment_id)
        if label in row.labels:
            await self._save(row, {"labels": [x for x in row.labels if x != label]}, None)
        return (await queries.experiment(self._db, experiment_id)).labels

    async def _save(
        self, row: queries.ExperimentRow, fields: dict[str, Any], notes: str | None
    ) -> None:
        config = row.config_dict
        config.update(fields)
        await self._db.execute(
            "UPDATE experiments SET name = ?, description = ?, labels = ?, notes = ?,"
            " config = ? WHERE id = ?",
            (
                fields.get("name", row.name),
                fields.get("description", row.description),
                json.dumps(fields.get("labels", row.labels)),
                row.notes if notes is None else notes,
                json.dumps(config),
                row.id,
            ),
        )
        exp = self._live.get(row.id)
        if exp is not None and fields:
            if "labels" in fields:
                fields["labels"] = tuple(fields["labels"])
            exp.config = dataclasses.replace(exp.config, **fields)
