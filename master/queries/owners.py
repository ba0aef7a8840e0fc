"""Who owns what: the facts authorization needs that a request does not carry."""

from __future__ import annotations

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


async def tensorboard_owner(db: Database, tensorboard_id: str) -> str | None:
    """The user who started the TensorBoard; None if there is no such TensorBoard."""
    row = await db.fetch_one("SELECT username FROM tensorboards WHERE id = ?", (tensorboard_id,))
    return None if row is None else str(row["username"])
