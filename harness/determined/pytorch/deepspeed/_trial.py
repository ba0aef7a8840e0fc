"""``DeepSpeedTrial``: the class a user subclasses to train DeepSpeed model engines."""

from __future__ import annotations

import abc
import pathlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from determined.pytorch._reducer import Reducer

if TYPE_CHECKING:
    from determined.pytorch.deepspeed._context import DeepSpeedTrialContext


class DeepSpeedTrial(abc.ABC):
    """DeepSpeed model engines, their data, and one step of training and of evaluation.

    In ``__init__`` build the models (and optionally optimizers and LR schedulers), pass
    them to ``deepspeed.initialize`` and register each engine with
    ``context.wrap_model_engine``. ``train_batch`` and ``evaluate_batch`` get an *iterator*
    over this worker's data loader, not a batch: take micro-batches with ``next()`` (and move
    them with ``context.to_device``), or hand the iterator to a pipeline engine's
    ``train_batch``/``eval_batch``. Without pipeline parallelism the trainer calls
    ``train_batch`` once per micro-batch (``gradient_accumulation_steps`` times per batch)
    unless ``context.disable_auto_grad_accumulation()`` was called.

    Train it with ``det_ds.Trainer(trial, context).fit(...)`` inside ``det_ds.init()``, or
    name it in ``python3 -m determined.launch.deepspeed --trial model_def:MyTrial``.
    """

    trial_context_class: Any = None  # set to DeepSpeedTrialContext by the package

    @abc.abstractmethod
    def __init__(self, context: DeepSpeedTrialContext) -> None:
        """Build the model engines and wrap each with ``context.wrap_model_engine``."""

    @abc.abstractmethod
    def train_batch(
        self, dataloader_iter: Iterator[Any] | None, epoch_idx: int, batch_idx: int
    ) -> Any:
        """Train on one micro-batch (or, with pipeline parallelism or manual gradient
        accumulation, one whole batch); return a dict of metrics, or the loss tensor
        (reported as ``loss``)."""

    @abc.abstractmethod
    def build_training_data_loader(self) -> Any:
        """A ``det.pytorch.DataLoader`` with ``train_micro_batch_size_per_gpu`` records per
        batch (any data loader after ``context.disable_dataset_reproducibility_checks()``)."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> Any:
        """The validation data, like ``build_training_data_loader``."""

    @abc.abstractmethod
    def evaluate_batch(
        self, dataloader_iter: Iterator[Any] | None, batch_idx: int
    ) -> dict[str, Any]:
        """The metrics of one validation batch, taken from ``dataloader_iter``; they are
        reduced over all batches and workers with ``evaluation_reducer()`` (the average by
        default). ``batch_idx`` may be left out of the signature."""

    def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
        """Not used by the trainer, which validates with ``evaluate_batch`` (as
        Determined's does); kept for the API's shape."""
        raise NotImplementedError("DeepSpeedTrial validates with evaluate_batch()")

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        """How ``evaluate_batch``'s metrics combine: one ``Reducer`` for all, or one per
        metric name (unlisted metrics are averaged)."""
        return Reducer.AVG

    def build_callbacks(self) -> dict[str, Any]:
        """Named callbacks (objects with any of ``on_training_start``,
        ``on_training_epoch_start(epoch_idx)``, ``on_training_epoch_end(epoch_idx)``,
        ``on_validation_start``, ``on_validation_end(metrics)``,
        ``on_checkpoint_upload_end(uuid)``, ``on_trial_shutdown``, and ``state_dict`` /
        ``load_state_dict`` for state saved with checkpoints)."""
        return {}

    def save(self, context: DeepSpeedTrialContext, path: pathlib.Path) -> None:
        """Save the model engines into the checkpoint directory ``path``; every worker calls
        it. By default each engine ``i`` saves with ``save_checkpoint(path, tag=f"model{i}")``."""
        for i, engine in enumerate(context.models):
            engine.save_checkpoint(path, tag=f"model{i}")

    def load(self, context: DeepSpeedTrialContext, load_path: pathlib.Path) -> None:
        """Load the model engines from a checkpoint directory; every worker calls it. By
        default engine ``i`` loads the tag ``model{i}``."""
        for i, engine in enumerate(context.models):
            try:
                loaded, _ = engine.load_checkpoint(load_path, tag=f"model{i}")
            except AssertionError:
                # DeepSpeed's asserts in its checkpoint loader carry no message.
                raise AssertionError("Failed to load deepspeed checkpoint.") from None
            if loaded is None:
                raise AssertionError(f"Failed to load deepspeed checkpoint: no tag model{i}.")

    def get_batch_length(self, batch: Any) -> int:
        """The number of records in a batch (the first dimension of its first tensor)."""
        from determined.pytorch.deepspeed._loaders import batch_length

        return batch_length(batch)
