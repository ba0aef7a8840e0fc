"""Determined's Trial API for PyTorch: subclass ``PyTorchTrial`` and let pydet train it.

.. code:: python

    from determined import pytorch

    class MyTrial(pytorch.PyTorchTrial):
        def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
            self.context = context
            self.model = context.wrap_model(make_model())
            self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), 0.1))

        def build_training_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(train_set, batch_size=self.context.get_per_slot_batch_size(),
                                      shuffle=True)

        def build_validation_data_loader(self) -> pytorch.DataLoader: ...

        def train_batch(self, batch, epoch_idx, batch_idx):
            loss = ...
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            return {"loss": loss}

        def evaluate_batch(self, batch):
            return {"validation_loss": ...}

Run it with ``entrypoint: python3 -m determined.launch.torch_distributed --trial
model_def:MyTrial`` (or the legacy ``entrypoint: model_def:MyTrial``), or off-cluster with
``DET_HPARAMS='{...}' DET_EXPERIMENT_CONFIG=const.yaml python3 -m determined.exec.harness
model_def:MyTrial``. The loop is described in ``determined.pytorch._trainer``; with
``DET_TEST_MODE=1`` it trains and validates 2 batches, checkpoints once and exits 0.

Importing this package imports torch; ``import determined`` alone does not.
"""

from __future__ import annotations

from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._data import DataLoader, TorchData, to_device
from determined.pytorch._env import TrialEnv, TrialEnvError
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import MetricReducer, Reducer
from determined.pytorch._schedule import to_batches
from determined.pytorch._trainer import Outcome, TrialController, run
from determined.pytorch._trial import PyTorchTrial
from determined.pytorch._units import Batch, Epoch, TrainUnit

__all__ = [
    "Batch",
    "DataLoader",
    "Epoch",
    "LRScheduler",
    "MetricReducer",
    "Outcome",
    "PyTorchTrial",
    "PyTorchTrialContext",
    "Reducer",
    "TorchData",
    "TrainUnit",
    "TrialController",
    "TrialEnv",
    "TrialEnvError",
    "run",
    "to_batches",
    "to_device",
]
