"""What a ``v1.Checkpoint`` says of where it came from, read from Determined's shape of it:
its trial, experiment and searcher metric live in ``training``
(``CheckpointTrainingMetadata``), which may be unset."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from determined.api.gen import v1


def trial_id(c: v1.Checkpoint) -> int:
    return (c.training.trial_id or 0) if c.training is not None else 0


def experiment_id(c: v1.Checkpoint) -> int:
    return (c.training.experiment_id or 0) if c.training is not None else 0


def searcher_metric(c: v1.Checkpoint) -> float | None:
    """The searcher metric of the validation at its step; None without one."""
    return c.training.searcher_metric if c.training is not None else None


def state(c: v1.Checkpoint) -> str:
    """``COMPLETED``, ``DELETED``, ...: its state's name without the ``STATE_`` prefix."""
    return str(c.state.name or int(c.state))
