"""Unmanaged runs: experiments and trials that a script off the cluster creates and reports
into (core_v2.init() outside a trial), as in Determined.

The master never schedules or searches them. Their trials are made, started and ended by
the script (CreateTrial, StartTrial, PatchTrial): a script's end is the trial's exit event
in the lifecycle table, and a script run again under the trial's external id resumes it
(``RESUMED``). ``Experiments`` calls these inside its transactions.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from determined.common import errors, expconf
from pydet.master import queries
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import Experiment, LiveExperiments, Trial
from pydet.master.experiments.restore import Restore
from pydet.master.experiments.search_runner import SearchRunner
from pydet.master.experiments.trial_lifecycle import TrialEvent, TrialPhase
from pydet.master.experiments.trial_moves import TrialMoves
from pydet.master.search import searcher
from pydet.master.states import State
from pydet.master.store.db import Database

log = logging.getLogger(__name__)

E = TrialEvent

# What an unmanaged experiment's config shows as its entrypoint: its script runs elsewhere.
UNMANAGED_ENTRYPOINT = "(unmanaged: run by a script off the cluster)"

# How an unmanaged trial's script ends, as the exits of a process on the cluster.
_SCRIPT_ENDS = {
    State.COMPLETED: E.EXITED,
    State.ERROR: E.EXITED_ERRORED,
    State.CANCELED: E.EXITED_USER_CANCELED,
}


class UnmanagedRuns:
    def __init__(
        self,
        *,
        db: Database,
        store: ExperimentStore,
        live: LiveExperiments,
        moves: TrialMoves,
        runner: SearchRunner,
        restore: Restore,
        validate: Callable[[str, Mapping[str, Any] | None], expconf.ExperimentConfig],
    ) -> None:
        self._db = db
        self._store = store
        self._live = live
        self._moves = moves
        self._runner = runner
        self._restore = restore
        self._validate = validate

    async def create(
        self,
        text: str,
        *,
        username: str,
        external_id: str,
        project_id: int = 1,
        defaults: Mapping[str, Any] | None = None,
    ) -> int:
        """An experiment a script off the cluster reports into: no context, no entrypoint
        (it runs nowhere), no search (the script makes its trials), never paused. With an
        ``external_id``, the user's experiment of that id if there is one (brought back if
        it has ended). It goes into ``project_id``, its config filled from ``defaults`` (its
        workspace's) before the master's."""
        if external_id:
            row = await self._db.fetch_one(
                "SELECT id FROM experiments WHERE unmanaged = 1 AND username = ? AND"
                " external_id = ? ORDER BY id DESC LIMIT 1",
                (username, external_id),
            )
            if row is not None:
                return await self._resume(int(row["id"]))
        raw = expconf.load_yaml(text)
        raw.setdefault("entrypoint", UNMANAGED_ENTRYPOINT)
        cfg = self._validate(yaml.safe_dump(raw, sort_keys=False), defaults)
        seed = cfg.reproducibility.experiment_seed
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
            cfg = cfg.with_seed(seed)
        job_id = uuid.uuid4().hex[:8]
        start_time = time.time()
        experiment_id = await self._store.insert(
            cfg,
            text=text,
            context=b"",
            state=State.ACTIVE,
            username=username,
            start_time=start_time,
            parent_id=0,
            job_id=job_id,
            unmanaged=True,
            project_id=project_id,
        )
        exp = Experiment(
            id=experiment_id,
            config=cfg,
            state=State.ACTIVE,
            search=searcher.new_search(cfg, seed),
            job_id=job_id,
            username=username,
            start_time=start_time,
            searcher_done=True,
            unmanaged=True,
        )
        await self._store.save_search(exp)
        if external_id:
            await self._db.execute(
                "UPDATE experiments SET external_id = ? WHERE id = ?", (external_id, exp.id)
            )
        self._live.add(exp)
        log.info("created unmanaged experiment %d", exp.id)
        return exp.id

    async def _resume(self, experiment_id: int) -> int:
        if self._live.get(experiment_id) is not None:
            return experiment_id
        stored = await self._store.ended_experiment(experiment_id)
        if stored.state == State.DELETING:
            raise errors.FailedPrecondition(f"experiment {experiment_id} is being deleted")
        exp = await self._restore.experiment(stored)
        self._live.add(exp)
        await self._runner.set_state(exp, State.ACTIVE)
        log.info("unmanaged experiment %d resumed", experiment_id)
        return experiment_id

    def _trial(self, trial_id: int) -> tuple[Experiment, Trial]:
        found = self._live.trial(trial_id)
        if found is None:
            raise errors.FailedPrecondition(f"trial {trial_id} has ended")
        if not found[0].unmanaged:
            raise errors.FailedPrecondition(
                f"trial {trial_id} is run by the master; only a trial of an unmanaged "
                "experiment is started or ended by its script"
            )
        return found

    async def create_trial(
        self, experiment_id: int, hparams: dict[str, Any], external_id: str = ""
    ) -> int:
        """A new trial of an unmanaged experiment, running from now on (its script runs);
        with an ``external_id``, the experiment's trial of that id if there is one (resumed
        if it has ended)."""
        exp = self._live.get(experiment_id)
        if exp is None:
            await queries.ensure_experiment(self._db, experiment_id)
            raise errors.FailedPrecondition(f"experiment {experiment_id} has ended")
        if not exp.unmanaged:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is run by the master; only an unmanaged "
                "experiment takes trials from a script"
            )
        if external_id:
            row = await self._db.fetch_one(
                "SELECT id FROM trials WHERE experiment_id = ? AND external_id = ?",
                (experiment_id, external_id),
            )
            found = exp.trials.get(int(row["id"])) if row is not None else None
            if found is not None:
                if found.phase.terminal:
                    await self._moves.fire(exp, found, E.RESUMED)
                    await self._db.execute(
                        "UPDATE trials SET end_time = NULL WHERE id = ?", (found.id,)
                    )
                    self._live.add_trial(exp, found)
                return found.id
        trial = await self._store.insert_trial(
            exp,
            request_id=uuid.uuid4().hex,
            phase=TrialPhase.RUNNING,
            hparams=hparams,
            seed=random.SystemRandom().randrange(2**31),
        )
        if external_id:
            await self._db.execute(
                "UPDATE trials SET external_id = ? WHERE id = ?", (external_id, trial.id)
            )
        self._live.add_trial(exp, trial)
        return trial.id

    async def start_trial(self, trial_id: int) -> Trial:
        """An unmanaged trial's script starts reporting: a new run, so that what an earlier
        run reported for the same steps is kept apart."""
        trial = self._trial(trial_id)[1]
        trial.run_id += 1
        await self._store.save_trial(trial)
        return trial

    async def end_trial(self, trial_id: int, state: State) -> None:
        """An unmanaged trial's script ended (COMPLETED, ERROR or CANCELED); its experiment
        ends with its last trial."""
        event = _SCRIPT_ENDS.get(state)
        if event is None:
            raise errors.InvalidArgument(
                f"state: a script ends its trial COMPLETED, ERROR or CANCELED, not {state.value}"
            )
        exp, trial = self._trial(trial_id)
        await self._moves.fire(exp, trial, event)
        await self._runner.finish_if_done(exp)
