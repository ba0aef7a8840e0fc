"""The experiments' and trials' rows: every write their state machines make, and the reads
only they need (what to restore after a restart, where new trials start from). A change of
an experiment's or a trial's state is published on the event bus once it is written.

Each method writes through ``Database.write`` (``execute`` where it needs the new row's id);
inside a unit of work (``db.atomic()``) the writes of one transition commit together, sent to
the database in one batch."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from determined.common import errors, expconf
from pydet.master.events import EventBus
from pydet.master.experiments import trial_lifecycle as lifecycle
from pydet.master.experiments.live import Experiment, Trial
from pydet.master.experiments.trial_lifecycle import TrialPhase
from pydet.master.states import State
from pydet.master.store.db import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredExperiment:
    """A live experiment's row, as a restarted master finds it."""

    id: int
    config: expconf.ExperimentConfig
    state: State
    # The search method's own state and whether the searcher had shut down.
    searcher_state: dict[str, Any]
    searcher_done: bool
    job_id: str
    username: str
    start_time: float
    queue_order: float
    unmanaged: bool = False


class ExperimentStore:
    def __init__(self, db: Database, events: EventBus) -> None:
        self._db = db
        self._events = events

    # -- experiments ------------------------------------------------------------------------

    async def insert(
        self,
        cfg: expconf.ExperimentConfig,
        *,
        text: str,
        context: bytes,
        state: State,
        username: str,
        start_time: float,
        parent_id: int,
        job_id: str,
        unmanaged: bool = False,
        project_id: int = 1,
    ) -> int:
        """A new experiment with its context, in project ``project_id``; returns its id."""
        ids = await self._db.transaction(
            [
                (
                    "INSERT INTO experiments (name, description, labels, state, config,"
                    " original_config, username, start_time, parent_id, job_id, unmanaged,"
                    " project_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        cfg.name or "",
                        cfg.description or "",
                        json.dumps(list(cfg.labels)),
                        state.value,
                        json.dumps(cfg.to_dict()),
                        text,
                        username,
                        start_time,
                        parent_id or None,
                        job_id,
                        int(unmanaged),
                        project_id,
                    ),
                ),
                (
                    "INSERT INTO contexts (experiment_id, data) VALUES (last_insert_rowid(), ?)",
                    (context,),
                ),
            ]
        )
        self._events.publish("experiment", id=ids[0], state=state.value)
        return ids[0]

    async def save_state(self, exp: Experiment) -> None:
        await self._db.write(
            "UPDATE experiments SET state = ?, end_time = ? WHERE id = ?",
            (exp.state.value, time.time() if exp.state.terminal else None, exp.id),
        )
        self._events.publish("experiment", id=exp.id, state=exp.state.value)

    async def save_search(self, exp: Experiment) -> None:
        """The searcher's state, the progress it reports, and the records of its trials
        that changed since the last save (on their rows: see search/base.py)."""
        async with self._db.atomic():
            await self._db.write(
                "UPDATE experiments SET searcher_state = ?, progress = ? WHERE id = ?",
                (
                    json.dumps({"method": exp.search.state_dict(), "done": exp.searcher_done}),
                    exp.search.progress(),
                    exp.id,
                ),
            )
            for request_id, record in exp.search.take_changed_records().items():
                trial = exp.by_request(request_id)
                if trial is None:
                    continue  # the searcher's alone (not created: the experiment stopped)
                text = "" if record is None else json.dumps(record)
                await self._db.write(
                    "UPDATE trials SET searcher_record = ? WHERE id = ?", (text, trial.id)
                )

    async def searcher_records(self, experiment_id: int) -> dict[str, Any]:
        """The records of an experiment's trials that have one, by request id."""
        rows = await self._db.fetch_all(
            "SELECT request_id, searcher_record FROM trials"
            " WHERE experiment_id = ? AND searcher_record != ''",
            (experiment_id,),
        )
        return {r["request_id"]: json.loads(r["searcher_record"]) for r in rows}

    async def save_progress(self, exp: Experiment, progress: float) -> None:
        await self._db.write("UPDATE experiments SET progress = ? WHERE id = ?", (progress, exp.id))

    async def save_job(self, exp: Experiment) -> None:
        """Its config (where the job's priority, weight, pool and max slots are) and its
        place in the queue."""
        await self._db.write(
            "UPDATE experiments SET config = ?, queue_order = ? WHERE id = ?",
            (json.dumps(exp.config.to_dict()), exp.queue_order, exp.id),
        )

    async def set_archived(self, experiment_id: int, archived: bool) -> None:
        await self._db.write(
            "UPDATE experiments SET archived = ? WHERE id = ?", (int(archived), experiment_id)
        )

    async def delete(self, experiment_id: int) -> list[tuple[str, str]]:
        """Delete an experiment with its trials, logs and checkpoint records; returns the
        (uuid, storage) of the checkpoints whose files are left to remove."""
        rows = await self._db.fetch_all(
            "SELECT uuid, storage FROM checkpoints WHERE experiment_id = ? AND state != 'DELETED'",
            (experiment_id,),
        )
        # Its logs and metrics can run to millions of rows: they go first, in chunks. A
        # master stopped meanwhile leaves the experiment there, to be deleted again.
        of_its_trials = "trial_id IN (SELECT id FROM trials WHERE experiment_id = ?)"
        await self._db.delete_in_chunks("task_logs", of_its_trials, (experiment_id,))
        await self._db.delete_in_chunks("metrics", of_its_trials, (experiment_id,))
        await self._db.transaction(
            [
                ("DELETE FROM checkpoints WHERE experiment_id = ?", (experiment_id,)),
                ("DELETE FROM experiments WHERE id = ?", (experiment_id,)),
            ]
        )
        return [(r["uuid"], r["storage"]) for r in rows]

    # -- trials -----------------------------------------------------------------------------

    async def insert_trial(
        self,
        exp: Experiment,
        *,
        request_id: str,
        phase: TrialPhase,
        hparams: dict[str, Any],
        seed: int,
        parent: Trial | None = None,
    ) -> Trial:
        """A new trial of ``exp``, starting from the experiment's source checkpoint, or from
        ``parent``'s latest checkpoint (a PBT child)."""
        checkpoint = exp.source_checkpoint if parent is None else parent.latest_checkpoint
        trial_id = await self._db.execute(
            "INSERT INTO trials (experiment_id, request_id, state, phase, hparams, seed,"
            " start_time, latest_checkpoint, warm_start_checkpoint, parent_trial_id)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                exp.id,
                request_id,
                lifecycle.trial_state(phase).value,
                phase.value,
                json.dumps(hparams),
                seed,
                time.time(),
                checkpoint,
                checkpoint,
                None if parent is None else parent.id,
            ),
        )
        trial = Trial(
            id=trial_id,
            experiment_id=exp.id,
            request_id=request_id,
            phase=phase,
            hparams=hparams,
            seed=seed,
            latest_checkpoint=checkpoint,
        )
        self._published(trial)
        return trial

    async def save_trial(self, t: Trial, *, ended: bool = False) -> None:
        await self._db.write(
            "UPDATE trials SET state = ?, phase = ?, restarts = ?, run_id = ?,"
            " steps_completed = ?, latest_checkpoint = ?, searcher_length = ?,"
            " completed_length = ?, early_exit = ?, excluded_agents = ?,"
            " end_time = COALESCE(?, end_time) WHERE id = ?",
            (
                t.state.value,
                t.phase.value,
                t.restarts,
                t.run_id,
                t.steps_completed,
                t.latest_checkpoint,
                t.searcher_length,
                t.completed_length,
                t.early_exit,
                json.dumps(sorted(t.excluded_agents)),
                time.time() if ended else None,
                t.id,
            ),
        )
        self._published(t)

    async def reopen_trial(self, t: Trial) -> None:
        """An ended trial that runs again (its experiment was continued): no end time, and
        the hyperparameters the continue gave it."""
        await self._db.write(
            "UPDATE trials SET end_time = NULL, hparams = ? WHERE id = ?",
            (json.dumps(t.hparams), t.id),
        )

    async def save_log_policy_effects(self, t: Trial) -> None:
        """What log policies did to the trial: its label, excluded agents, canceled retries."""
        await self._db.write(
            "UPDATE trials SET log_signal = ?, excluded_agents = ?, cancel_retries_run = ?"
            " WHERE id = ?",
            (t.log_signal, json.dumps(sorted(t.excluded_agents)), t.cancel_retries_run, t.id),
        )
        self._published(t)

    def _published(self, t: Trial) -> None:
        self._events.publish(
            "trial",
            id=t.id,
            experiment_id=t.experiment_id,
            state=t.state.value,
            phase=t.phase.value,
        )

    # -- reads of their own ---------------------------------------------------------------------

    async def source_checkpoint(self, cfg: expconf.ExperimentConfig) -> str | None:
        """The checkpoint new trials continue from (``searcher.source_checkpoint_uuid`` or
        ``searcher.source_trial_id``'s latest), checked before anything is created."""
        uuid_ = cfg.searcher.source_checkpoint_uuid
        if uuid_:
            row = await self._db.fetch_one(
                "SELECT uuid FROM checkpoints WHERE uuid = ? AND state != 'DELETED'", (uuid_,)
            )
            if row is None:
                raise errors.NotFound(
                    f"searcher.source_checkpoint_uuid: checkpoint {uuid_} not found"
                )
            return uuid_
        trial_id = cfg.searcher.source_trial_id
        if trial_id:
            row = await self._db.fetch_one(
                "SELECT latest_checkpoint FROM trials WHERE id = ?", (trial_id,)
            )
            if row is None:
                raise errors.NotFound(f"searcher.source_trial_id: trial {trial_id} not found")
            if row["latest_checkpoint"] is None:
                raise errors.FailedPrecondition(
                    f"searcher.source_trial_id: trial {trial_id} has no checkpoint to continue from"
                )
            return str(row["latest_checkpoint"])
        return None

    async def archive_reports_after(self, t: Trial, steps: int) -> None:
        """A new run of the trial starts from its checkpoint at ``steps``: what earlier runs
        reported past it is archived (the new run reports those steps again), as Determined
        does, so that its metrics show each step once."""
        await self._db.write(
            "UPDATE metrics SET archived = 1"
            " WHERE trial_id = ? AND steps_completed > ? AND run_id < ? AND NOT archived",
            (t.id, steps, t.run_id),
        )

    async def checkpoint_steps(self, uuid: str) -> int:
        """The steps a checkpoint was taken at (0 for one the store does not know)."""
        row = await self._db.fetch_one(
            "SELECT steps_completed FROM checkpoints WHERE uuid = ?", (uuid,)
        )
        return int(row["steps_completed"]) if row is not None else 0

    async def live_experiments(self) -> list[StoredExperiment]:
        """The experiments that have not ended, oldest first."""
        rows = await self._db.fetch_all(
            "SELECT * FROM experiments WHERE state NOT IN ('COMPLETED', 'CANCELED', 'ERROR')"
            " ORDER BY id"
        )
        out = []
        for row in rows:
            try:
                out.append(_stored(row))
            except expconf.InvalidConfig as e:
                await self._end_unreadable(row["id"], e)
        return out

    async def ended_experiment(self, experiment_id: int) -> StoredExperiment:
        """An experiment as stored, to bring it back to life (``det experiment continue``)."""
        row = await self._db.fetch_one("SELECT * FROM experiments WHERE id = ?", (experiment_id,))
        if row is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        try:
            return _stored(row)
        except expconf.InvalidConfig as e:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id}'s stored config is no longer valid: "
                + "; ".join(e.errors)
            ) from None

    async def _end_unreadable(self, experiment_id: int, problem: expconf.InvalidConfig) -> None:
        """An experiment whose stored config this version refuses (stored by an older one
        that accepted it) ends as ERROR with its unfinished trials, instead of stopping the
        master from starting; its running processes are then orphans and are killed."""
        log.error(
            "experiment %d: its stored config is no longer valid, so it ends as ERROR: %s",
            experiment_id,
            "; ".join(problem.errors),
        )
        now = time.time()
        ended = ", ".join(f"'{p.value}'" for p in lifecycle.TERMINAL)
        await self._db.write(
            "UPDATE experiments SET state = ?, end_time = ? WHERE id = ?",
            (State.ERROR.value, now, experiment_id),
        )
        await self._db.write(
            f"UPDATE trials SET state = ?, phase = ?, end_time = ? WHERE experiment_id = ?"
            f" AND phase NOT IN ({ended})",
            (State.ERROR.value, TrialPhase.ERRORED.value, now, experiment_id),
        )

    async def trials(self, experiment_id: int) -> list[Trial]:
        """Every trial of an experiment, oldest first."""
        rows = await self._db.fetch_all(
            "SELECT * FROM trials WHERE experiment_id = ? ORDER BY id", (experiment_id,)
        )
        return [
            Trial(
                id=t["id"],
                experiment_id=experiment_id,
                request_id=t["request_id"],
                phase=TrialPhase(t["phase"]),
                hparams=json.loads(t["hparams"]),
                seed=t["seed"],
                restarts=t["restarts"],
                run_id=t["run_id"],
                steps_completed=t["steps_completed"],
                latest_checkpoint=t["latest_checkpoint"],
                searcher_length=t["searcher_length"],
                completed_length=t["completed_length"],
                early_exit=t["early_exit"],
                log_signal=t["log_signal"],
                excluded_agents=frozenset(json.loads(t["excluded_agents"])),
                cancel_retries_run=t["cancel_retries_run"],
            )
            for t in rows
        ]


def _stored(row: Any) -> StoredExperiment:
    config = expconf.parse_experiment_config(json.loads(row["config"]))
    searcher_state = json.loads(row["searcher_state"] or "{}")
    return StoredExperiment(
        id=row["id"],
        config=config,
        state=State(row["state"]),
        searcher_state=searcher_state.get("method", {}),
        searcher_done=bool(searcher_state.get("done", False)),
        job_id=row["job_id"],
        username=row["username"],
        start_time=row["start_time"],
        queue_order=row["queue_order"] or 0.0,
        unmanaged=bool(row["unmanaged"]),
    )
