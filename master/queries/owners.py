"""Who owns what: the facts authorization needs that a request does not carry."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydet.master.store.db import Database


async def experiment_owner(db: Database, experiment_id: int) -> str | None:
    """The user who created the experiment; None if there is no such experiment."""
    row = await db.fetch_one("SELECT username FROM experiments WHERE id = ?", (experiment_id,))
    return None if row is None else str(row["username"])


async def trial_experiment(db: Database, trial_id: int) -> int | None:
    row = await db.fetch_one("SELECT experiment_id FROM trials WHERE id = ?", (trial_id,))
    return None if row is None else int(row["experiment_id"])


async def checkpoint_experiment(db: Database, uuid: str) -> int | None:
    """The experiment a checkpoint belongs to (0 for one of no experiment); None if there is
    no such checkpoint."""
    row = await db.fetch_one("SELECT experiment_id FROM checkpoints WHERE uuid = ?", (uuid,))
    return None if row is None else int(row["experiment_id"] or 0)


async def checkpoint_trial(db: Database, uuid: str) -> int | None:
    """The trial a checkpoint belongs to (0 for one of no trial); None if there is no such
    checkpoint."""
    row = await db.fetch_one("SELECT trial_id FROM checkpoints WHERE uuid = ?", (uuid,))
    return None if row is None else int(row["trial_id"] or 0)


async def job_experiment(db: Database, job_id: str) -> tuple[int, str] | None:
    """The experiment that is the job, with its owner; None if there is no such job."""
    row = await db.fetch_one("SELECT id, username FROM experiments WHERE job_id = ?", (job_id,))
    return None if row is None else (int(row["id"]), str(row["username"]))


_IDENTITY = "agent_uid, agent_gid, agent_user, agent_group"


async def task_identity(
    db: Database, trial_id: int | None, task_id: str
) -> tuple[int, int, str, str] | None:
    """The agent uid, gid, user and group a task runs as: its workspace's, else its owner's;
    None for the agent's own. A trial's workspace is its experiment's; a generic task's its
    project's; any other task's the default one."""
    if trial_id is not None:
        row = await db.fetch_one(
            "SELECT e.username, p.workspace_id FROM trials t JOIN experiments e"
            " ON e.id = t.experiment_id JOIN projects p ON p.id = e.project_id WHERE t.id = ?",
            (trial_id,),
        )
        if row is None:
            return None
        username, workspace_id = str(row["username"]), int(row["workspace_id"])
    else:
        row = await db.fetch_one(
            "SELECT username, extra FROM generic_tasks WHERE id = ?", (task_id,)
        )
        if row is None:
            return None
        username, workspace_id = str(row["username"]), 1
        project_id = json.loads(row["extra"] or "{}").get("project_id")
        if project_id:
            found = await db.fetch_one(
                "SELECT workspace_id FROM projects WHERE id = ?", (int(project_id),)
            )
            workspace_id = 1 if found is None else int(found["workspace_id"])
    for sql, key in (
        (f"SELECT {_IDENTITY} FROM workspaces WHERE id = ?", workspace_id),
        (f"SELECT {_IDENTITY} FROM users WHERE username = ?", username),
    ):
        found = await db.fetch_one(sql, (key,))
        if found is not None and found["agent_user"] is not None:
            return (
                int(found["agent_uid"]),
                int(found["agent_gid"]),
                str(found["agent_user"]),
                str(found["agent_group"]),
            )
    return None


async def workspace_owner(db: Database, workspace_id: int) -> tuple[int | None] | None:
    """(the user id of its creator,) for a workspace (None inside for the default one, the
    cluster's); None if there is no such workspace."""
    row = await db.fetch_one("SELECT user_id FROM workspaces WHERE id = ?", (workspace_id,))
    return None if row is None else (row["user_id"],)


async def project_owners(
    db: Database, project_id: int
) -> tuple[int | None, int | None, int] | None:
    """The user ids of a project's creator and of its workspace's, and its workspace's id;
    None if there is no such project."""
    row = await db.fetch_one(
        "SELECT p.user_id, w.user_id AS workspace_user_id, p.workspace_id FROM projects p"
        " JOIN workspaces w ON w.id = p.workspace_id WHERE p.id = ?",
        (project_id,),
    )
    if row is None:
        return None
    return row["user_id"], row["workspace_user_id"], row["workspace_id"]


async def experiment_owners(db: Database, experiment_ids: Sequence[int]) -> dict[int, str]:
    """The owners of those of the experiments that exist."""
    owners: dict[int, str] = {}
    ids = list(dict.fromkeys(experiment_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows = await db.fetch_all(
            f"SELECT id, username FROM experiments WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        )
        owners.update((int(r["id"]), str(r["username"])) for r in rows)
    return owners


async def model_owner(db: Database, identifier: str) -> tuple[int | None, str, int] | None:
    """(the user id of its creator, its name, its workspace's id) for the model named
    ``identifier`` (or with that id, when it is all digits); None if there is no such
    model."""
    columns = "user_id, name, workspace_id"
    if identifier.isdigit():
        row = await db.fetch_one(f"SELECT {columns} FROM models WHERE id = ?", (int(identifier),))
    else:
        row = await db.fetch_one(f"SELECT {columns} FROM models WHERE name = ?", (identifier,))
    return None if row is None else (row["user_id"], str(row["name"]), int(row["workspace_id"]))


async def experiment_workspace(db: Database, experiment_id: int) -> int | None:
    """The id of the workspace an experiment is in (through its project); None if there is
    no such experiment."""
    row = await db.fetch_one(
        "SELECT p.workspace_id FROM experiments e JOIN projects p ON p.id = e.project_id"
        " WHERE e.id = ?",
        (experiment_id,),
    )
    return None if row is None else int(row["workspace_id"])


async def task_owner(db: Database, task_id: str) -> tuple[str, str] | None:
    """Who launched a task that is not a trial (a TensorBoard, command, notebook or shell),
    and its type (TENSORBOARD, COMMAND, ...); None for no such task."""
    row = await db.fetch_one(
        "SELECT username, task_type FROM generic_tasks WHERE id = ?", (task_id,)
    )
    return None if row is None else (str(row["username"]), str(row["task_type"]))


async def task_workspace(db: Database, task_id: str) -> int | None:
    """The workspace a task that is not a trial was launched into (``-w``; the default
    workspace's id, 1, when none was named); None for no such task."""
    row = await db.fetch_one("SELECT extra FROM generic_tasks WHERE id = ?", (task_id,))
    if row is None:
        return None
    return int(json.loads(row["extra"] or "{}").get("workspace_id") or 1)
