"""``PyTorchTrial``: the class a user subclasses to train with the Trial API."""

from __future__ import annotations

import abc
from typing import Any

from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._data import TorchData
from determined.pytorch._reducer import Reducer


class PyTorchTrial(abc.ABC):
    """A model, its data and one step of training and of evaluation.

    Subclass it and name the subclass in the experiment config (``entrypoint:
    python3 -m determined.launch.torch_distributed --trial model_def:MyTrial``). The harness
    builds it with a ``PyTorchTrialContext``; in ``__init__`` create the models, optimizers
    and LR schedulers and wrap them with the context. Then implement the data loaders,
    ``train_batch``, and either ``evaluate_batch`` or ``evaluate_full_dataset``.
    """

    trial_context_class = PyTorchTrialContext

    @abc.abstractmethod
    def __init__(self, context: PyTorchTrialContext) -> None:
        """Build the models, optimizers and schedulers, wrapping each with ``context``."""

    @abc.abstractmethod
    def build_training_data_loader(self) -> Any:
        """The training data: a ``pytorch.DataLoader`` (or a ``torch.utils.data.DataLoader``)
        whose ``batch_size`` is ``context.get_per_slot_batch_size()``."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> Any:
        """The validation data, like ``build_training_data_loader``."""

    @abc.abstractmethod
    def train_batch(self, batch: TorchData, epoch_idx: int, batch_idx: int) -> Any:
        """Train on one batch (already on ``context.device``); return its metrics.

        Returns a dict of metric names to scalars (numbers or one-element tensors), or a
        single tensor, reported as ``loss``. ``batch_idx`` counts every batch the trial has
        trained on, across epochs.
        """

    def evaluate_batch(self, batch: TorchData) -> dict[str, Any]:
        """The metrics of one validation batch; reduced over all batches and workers with
        ``evaluation_reducer()`` (the average by default). Implement this or
        ``evaluate_full_dataset``."""
        raise NotImplementedError(
            f"{type(self).__name__} implements neither evaluate_batch() nor evaluate_full_dataset()"
        )

    def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
        """The validation metrics computed over the whole validation data loader.

        Only the chief calls it, with a torch data loader over every batch. Implement this
        or ``evaluate_batch``.
        """
        raise NotImplementedError(
            f"{type(self).__name__} implements neither evaluate_batch() nor evaluate_full_dataset()"
        )

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        """How ``evaluate_batch``'s metrics combine: one ``Reducer`` for all, or a dict of
        metric names to reducers (unlisted metrics are averaged)."""
        return Reducer.AVG


def evaluates_full_dataset(trial: PyTorchTrial) -> bool:
    """Whether ``trial`` validates with ``evaluate_full_dataset`` instead of per batch."""
    cls = type(trial)
    overrides_batch = cls.evaluate_batch is not PyTorchTrial.evaluate_batch
    overrides_full = cls.evaluate_full_dataset is not PyTorchTrial.evaluate_full_dataset
    if not (overrides_batch or overrides_full):
        raise TypeError(
            f"{cls.__name__} must implement evaluate_batch(batch) or "
            "evaluate_full_dataset(data_loader)"
        )
    return overrides_full and not overrides_batch
