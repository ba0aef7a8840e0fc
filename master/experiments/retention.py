"""Checkpoint retention: which checkpoints of an experiment to delete, as a pure function.

Determined's garbage collection keeps, from ``checkpoint_storage``:

- ``save_experiment_best``: the N best checkpoints of the whole experiment,
- ``save_trial_best``: the N best checkpoints of each trial,
- ``save_trial_latest``: the N latest checkpoints of each trial,

and deletes every other completed checkpoint. "Best" ranks by the searcher metric of the
validation taken at the checkpoint's step; a checkpoint without one can only be kept as a
latest. A running trial always keeps its latest checkpoint, whatever the policy says: it is
what the trial resumes from, also when it is another trial's (a warm start, a PBT child that
has not checkpointed yet). The master applies the answer when trials end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from determined.common import expconf

# Only finished checkpoints are candidates: one being written or already deleted is left be.
DELETABLE_STATES = frozenset({"COMPLETED"})
TERMINAL_TRIAL_STATES = frozenset({"COMPLETED", "CANCELED", "ERROR"})


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint as retention sees it; ``metric`` is the searcher metric of the
    validation at ``steps_completed``, None if there was none."""

    uuid: str
    trial_id: int
    steps_completed: int
    metric: float | None = None
    state: str = "COMPLETED"


@dataclass(frozen=True)
class TrialRecord:
    id: int
    state: str
    latest_checkpoint: str | None = None


@dataclass(frozen=True, kw_only=True)
class RetentionPolicy:
    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1
    smaller_is_better: bool = True

    @classmethod
    def from_config(cls, config: expconf.ExperimentConfig) -> RetentionPolicy:
        """The policy of an experiment; without ``checkpoint_storage``, Determined's defaults."""
        storage = config.checkpoint_storage
        smaller = config.searcher.smaller_is_better
        if storage is None:
            return cls(smaller_is_better=smaller)
        return cls(
            save_experiment_best=storage.save_experiment_best,
            save_trial_best=storage.save_trial_best,
            save_trial_latest=storage.save_trial_latest,
            smaller_is_better=smaller,
        )


def checkpoints_to_delete(
    checkpoints: Iterable[CheckpointRecord],
    trials: Iterable[TrialRecord],
    policy: RetentionPolicy,
) -> set[str]:
    """The uuids of the experiment's checkpoints that the policy no longer keeps."""
    candidates = [c for c in checkpoints if c.state in DELETABLE_STATES]
    trials = list(trials)
    running = {t.id for t in trials if t.state.upper() not in TERMINAL_TRIAL_STATES}
    by_trial: dict[int, list[CheckpointRecord]] = {}
    for c in candidates:
        by_trial.setdefault(c.trial_id, []).append(c)

    keep = {c.uuid for c in _best(candidates, policy)[: policy.save_experiment_best]}
    for trial_id, own in by_trial.items():
        keep.update(c.uuid for c in _best(own, policy)[: policy.save_trial_best])
        latest = _latest(own)
        keep.update(c.uuid for c in latest[: policy.save_trial_latest])
        if trial_id in running and latest:
            keep.add(latest[0].uuid)
    keep.update(
        t.latest_checkpoint for t in trials if t.id in running and t.latest_checkpoint is not None
    )
    return {c.uuid for c in candidates} - keep


def _best(checkpoints: list[CheckpointRecord], policy: RetentionPolicy) -> list[CheckpointRecord]:
    """Best first; between equal metrics the later checkpoint wins (more training)."""
    ranked = [c for c in checkpoints if c.metric is not None and not math.isnan(c.metric)]
    sign = 1.0 if policy.smaller_is_better else -1.0
    return sorted(ranked, key=lambda c: (sign * (c.metric or 0.0), -c.steps_completed, c.uuid))


def _latest(checkpoints: list[CheckpointRecord]) -> list[CheckpointRecord]:
    return sorted(checkpoints, key=lambda c: (-c.steps_completed, c.uuid))
