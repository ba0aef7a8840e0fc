"""Experiments moved between projects (Determined's MoveExperiment and MoveExperiments).

An archived experiment stays where it is, an archived project gives none away, and the
destination must take new experiments (``placement``). Who may move what is
``auth.rules``'s to say; many experiments move in one statement per few hundred."""

from __future__ import annotations

from collections.abc import Sequence

from determined.common import errors
from pydet.master.store.db import Database
from pydet.master.workspaces.placement import Placements
from pydet.master.workspaces.projects import ProjectStore

# Experiments read and moved per statement (SQLite's host parameters are limited).
CHUNK = 500


class Moves:
    def __init__(self, db: Database, projects: ProjectStore, placements: Placements) -> None:
        self._db = db
        self._projects = projects
        self._placements = placements

    async def move(self, experiment_id: int, destination: int) -> None:
        """Move one experiment; the reason it cannot move as the error."""
        why = (await self.move_many([experiment_id], destination))[experiment_id]
        if why.endswith("not found"):
            raise errors.NotFound(why)
        if why:
            raise errors.FailedPrecondition(why)

    async def move_many(
        self, experiment_ids: Sequence[int], destination: int, *, source: int = 0
    ) -> dict[int, str]:
        """Move experiments (of project ``source``, when given) into project
        ``destination``: for each, "" if it moved (or was there already), else why it did
        not. NotFound or FailedPrecondition when the destination itself is the problem."""
        async with self._db.atomic():
            project = await self._projects.get(destination)
            await self._placements.checked(project)
            results: dict[int, str] = {}
            wanted = list(dict.fromkeys(experiment_ids))
            for start in range(0, len(wanted), CHUNK):
                chunk = wanted[start : start + CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = await self._db.fetch_all(
                    "SELECT e.id, e.archived, e.project_id, p.name, p.archived AS p_archived"
                    f" FROM experiments e JOIN projects p ON p.id = e.project_id"
                    f" WHERE e.id IN ({marks})",
                    chunk,
                )
                found = {r["id"]: r for r in rows}
                moving = []
                for exp_id in chunk:
                    r = found.get(exp_id)
                    if r is None:
                        results[exp_id] = f"experiment {exp_id} not found"
                    elif source and r["project_id"] != source:
                        results[exp_id] = f"experiment {exp_id} is not in project {source}"
                    elif r["project_id"] == destination:
                        results[exp_id] = ""
                    elif r["archived"]:
                        results[exp_id] = (
                            f"experiment {exp_id} is archived and cannot be moved; unarchive it"
                            " first"
                        )
                    elif r["p_archived"]:
                        results[exp_id] = (
                            f"project {r['name']!r} is archived and cannot have experiments "
                            "moved from it"
                        )
                    else:
                        results[exp_id] = ""
                        moving.append(exp_id)
                if moving:
                    await self._db.execute(
                        f"UPDATE experiments SET project_id = ? WHERE id IN"
                        f" ({','.join('?' * len(moving))})",
                        [destination, *moving],
                    )
        return results
