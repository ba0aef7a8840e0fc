"""Handwritten digits (scikit-learn's ``load_digits``, 8x8 images, no download) with an MLP.

A complete ``PyTorchTrial``: run it on a cluster with ``det experiment create const.yaml .``,
or here with::

    DET_HPARAMS='{"global_batch_size": 32, "lr": 0.1, "hidden": 64, "optimizer": "sgd"}' \\
    DET_EXPERIMENT_CONFIG=const.yaml python3 -m determined.exec.harness model_def:DigitsTrial
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

from determined import pytorch

# The split is fixed (not the trial seed), so every trial validates on the same images.
SPLIT_SEED = 0
VALIDATION_FRACTION = 0.2


def digits_split() -> tuple[torch.utils.data.TensorDataset, torch.utils.data.TensorDataset]:
    """The training and validation sets: 8x8 images scaled to [0, 1], as 64 features."""
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = int(len(labels) * VALIDATION_FRACTION)
    features = torch.tensor(images / 16.0, dtype=torch.float32)
    targets = torch.tensor(labels, dtype=torch.long)
    val, train = order[:n_val], order[n_val:]
    return (
        torch.utils.data.TensorDataset(features[train], targets[train]),
        torch.utils.data.TensorDataset(features[val], targets[val]),
    )


class DigitsTrial(pytorch.PyTorchTrial):
    """A one-hidden-layer MLP classifying 8x8 digits."""

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        hidden = int(context.get_hparam("hidden"))
        dropout = float(context.get_hparams().get("dropout", 0.0))
        self.model = context.wrap_model(
            nn.Sequential(
                nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 10)
            )
        )
        lr = float(context.get_hparam("lr"))
        kind = context.get_hparams().get("optimizer", "sgd")
        if kind == "sgd":
            optimizer: torch.optim.Optimizer = torch.optim.SGD(
                self.model.parameters(), lr=lr, momentum=0.9
            )
        elif kind == "adam":
            optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        else:
            raise ValueError(f"hyperparameter optimizer must be 'sgd' or 'adam', not {kind!r}")
        self.optimizer = context.wrap_optimizer(optimizer)
        self.loss_fn = nn.CrossEntropyLoss()
        self.train_set, self.val_set = digits_split()

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            self.train_set,
            batch_size=self.context.get_per_slot_batch_size(),
            shuffle=True,
            drop_last=True,
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(self.val_set, batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        features, labels = batch
        logits = self.model(features)
        loss = self.loss_fn(logits, labels)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        accuracy = (logits.argmax(dim=1) == labels).float().mean()
        return {"loss": loss, "accuracy": accuracy}

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        features, labels = batch
        logits = self.model(features)
        return {
            "validation_loss": self.loss_fn(logits, labels),
            "validation_accuracy": (logits.argmax(dim=1) == labels).float().mean(),
        }
