"""Handwritten digits (scikit-learn's ``load_digits``, no download) as a ``DeepSpeedTrial``.

A DeepSpeed engine wraps a small MLP and a torch SGD optimizer; the DeepSpeed config
(``ds_config.json``, overridden by the hyperparameter ``overwrite_deepspeed_args``) sets the
micro-batch size and the gradient accumulation steps. ``train.py`` trains it with
``det_ds.Trainer``; ``distributed.yaml`` names the class for the harness instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import deepspeed
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from determined import pytorch
from determined.pytorch import deepspeed as det_ds


def digits_split() -> tuple[torch.utils.data.TensorDataset, torch.utils.data.TensorDataset]:
    """80% of the 8x8 digits (as 64 features in [0, 1]) to train on, 20% to validate on;
    the split is fixed, so every trial validates on the same images."""
    images, labels = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(
        images / 16.0, labels, test_size=0.2, random_state=0
    )
    return (
        torch.utils.data.TensorDataset(
            torch.tensor(x_train, dtype=torch.float32), torch.tensor(y_train)
        ),
        torch.utils.data.TensorDataset(
            torch.tensor(x_val, dtype=torch.float32), torch.tensor(y_val)
        ),
    )


class DigitsTrial(det_ds.DeepSpeedTrial):
    """A one-hidden-layer MLP classifying 8x8 digits, trained by a DeepSpeed engine."""

    def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
        self.context = context
        hparams = context.get_hparams()
        torch.set_num_threads(1)
        model = nn.Sequential(
            nn.Linear(64, int(hparams["hidden"])), nn.ReLU(), nn.Linear(int(hparams["hidden"]), 10)
        )
        optimizer = torch.optim.SGD(model.parameters(), lr=float(hparams["lr"]), momentum=0.9)
        ds_config = det_ds.overwrite_deepspeed_config(
            hparams["deepspeed_config"], hparams.get("overwrite_deepspeed_args", {})
        )
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
        self.engine = context.wrap_model_engine(engine)
        self.loss_fn = nn.CrossEntropyLoss()
        self.train_set, self.val_set = digits_split()

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            self.train_set,
            batch_size=self.context.get_train_micro_batch_size_per_gpu(),
            shuffle=True,
            drop_last=True,
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(self.val_set, batch_size=64)

    def train_batch(
        self, dataloader_iter: Iterator[Any] | None, epoch_idx: int, batch_idx: int
    ) -> dict[str, Any]:
        assert dataloader_iter is not None
        features, labels = self.context.to_device(next(dataloader_iter))
        loss = self.loss_fn(self.engine(features), labels)
        self.engine.backward(loss)
        self.engine.step()
        return {"loss": loss}

    def evaluate_batch(
        self, dataloader_iter: Iterator[Any] | None, batch_idx: int
    ) -> dict[str, Any]:
        assert dataloader_iter is not None
        features, labels = self.context.to_device(next(dataloader_iter))
        logits = self.engine(features)
        return {
            "validation_loss": self.loss_fn(logits, labels).item(),
            "accuracy": (logits.argmax(1) == labels).float().mean().item(),
        }
