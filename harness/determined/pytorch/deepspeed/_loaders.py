"""What the DeepSpeedTrial's loop needs of data loaders: their length, endless iteration,
and the number of records in a batch."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from determined.pytorch._env import TrialEnvError


def loader_length(loader: Any, what: str) -> int:
    try:
        return len(loader)
    except TypeError:
        inner = getattr(loader, "loader", None)  # DeepSpeed's RepeatingLoader
        if inner is not None:
            return len(inner)
        raise TrialEnvError(
            f"the {what} data loader ({type(loader).__name__}) has no length; the trainer needs "
            "one to know where epochs and validation end"
        ) from None


def repeat(loader: Any) -> Iterator[Any]:
    while True:
        produced = False
        for batch in loader:
            produced = True
            yield batch
        if not produced:
            raise TrialEnvError("the training data loader produced no batches")


def batch_length(batch: Any) -> int:
    """The number of records in a batch: the first dimension of its first tensor."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, Mapping):
        return batch_length(next(iter(batch.values())))
    if isinstance(batch, (list, tuple)) and batch:
        return batch_length(batch[0])
    raise TypeError(f"cannot tell the length of a batch of type {type(batch).__name__}")
