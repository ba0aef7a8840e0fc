"""An experiment's checkpoint gc policy changed after it was created (`det experiment set
gc-policy`, Determined's PatchExperiment with checkpointStorage): its config's
``checkpoint_storage.save_*`` become the new counts and the checkpoints they no longer keep
are deleted at once, running or ended; ``preview`` says which, without deleting.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from determined.common import errors
from pydet.master import queries
from pydet.master.experiments import retention
from pydet.master.experiments.checkpoints import Checkpoints, retention_records
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import LiveExperiments
from pydet.master.store.db import Database


@dataclass(frozen=True)
class GcPolicy:
    save_experiment_best: int
    save_trial_best: int
    save_trial_latest: int

    def check(self) -> None:
        for name, value in dataclasses.asdict(self).items():
            if value < 0:
                raise errors.InvalidArgument(f"{name}: must be 0 or more, got {value}")


class GcPolicies:
    def __init__(
        self,
        db: Database,
        live: LiveExperiments,
        store: ExperimentStore,
        checkpoints: Checkpoints,
    ) -> None:
        self._db = db
        self._live = live
        self._store = store
        self._checkpoints = checkpoints

    async def preview(
        self, experiment_id: int, policy: GcPolicy
    ) -> tuple[str, list[queries.CheckpointRow]]:
        """The searcher metric, and the checkpoints ``policy`` would delete, oldest first."""
        policy.check()
        metric, doomed = await self._doomed(experiment_id, policy)
        return metric, doomed

    async def apply(self, experiment_id: int, policy: GcPolicy) -> int:
        """Set the policy and delete what it does not keep; how many checkpoints."""
        policy.check()
        _, doomed = await self._doomed(experiment_id, policy)
        counts = dataclasses.asdict(policy)
        exp = self._live.get(experiment_id)
        async with self._db.atomic():
            if exp is not None:
                storage = exp.config.checkpoint_storage
                if storage is None:
                    raise errors.FailedPrecondition(
                        f"experiment {experiment_id} has no checkpoint_storage to change"
                    )
                exp.config = dataclasses.replace(
                    exp.config, checkpoint_storage=dataclasses.replace(storage, **counts)
                )
                await self._store.save_job(exp)
            else:
                config = json.loads(await self._stored_config(experiment_id))
                storage_json = config.get("checkpoint_storage") or {}
                config["checkpoint_storage"] = {**storage_json, **counts}
                await self._db.execute(
                    "UPDATE experiments SET config = ? WHERE id = ?",
                    (json.dumps(config), experiment_id),
                )
            if doomed:
                await self._checkpoints.delete_checkpoints([c.uuid for c in doomed])
        return len(doomed)

    async def _stored_config(self, experiment_id: int) -> str:
        text = await queries.stored_config(self._db, experiment_id)
        if text is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        return text

    async def _doomed(
        self, experiment_id: int, policy: GcPolicy
    ) -> tuple[str, list[queries.CheckpointRow]]:
        config = json.loads(await self._stored_config(experiment_id))
        searcher = config.get("searcher") or {}
        rules = retention.RetentionPolicy(
            save_experiment_best=policy.save_experiment_best,
            save_trial_best=policy.save_trial_best,
            save_trial_latest=policy.save_trial_latest,
            smaller_is_better=bool(searcher.get("smaller_is_better", True)),
        )
        rows = await queries.experiment_checkpoints(self._db, experiment_id)
        records = retention_records(rows)
        exp = self._live.get(experiment_id)
        if exp is not None:
            trials = [
                retention.TrialRecord(t.id, t.state.value, latest_checkpoint=t.latest_checkpoint)
                for t in exp.trials.values()
            ]
        else:
            trials = [
                retention.TrialRecord(t.id, t.state.value, latest_checkpoint=t.latest_checkpoint)
                for t in await queries.trials(self._db, experiment_id)
            ]
        doomed = retention.checkpoints_to_delete(records, trials, rules)
        return str(searcher.get("metric") or ""), [c for c in rows if c.uuid in doomed]
