"""Determined's DeepSpeed Trial API: subclass ``DeepSpeedTrial`` and let pydet train it.

.. code:: python

    import deepspeed
    from determined import pytorch
    from determined.pytorch import deepspeed as det_ds

    class MyTrial(det_ds.DeepSpeedTrial):
        def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
            self.context = context
            engine, _, _, _ = deepspeed.initialize(model=make_model(), config=ds_config, ...)
            self.engine = context.wrap_model_engine(engine)

        def build_training_data_loader(self):
            return pytorch.DataLoader(train_set,
                                      batch_size=self.context.get_train_micro_batch_size_per_gpu())

        def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
            x, y = self.context.to_device(next(dataloader_iter))
            loss = loss_fn(self.engine(x), y)
            self.engine.backward(loss)
            self.engine.step()
            return {"loss": loss}

        def evaluate_batch(self, dataloader_iter, batch_idx): ...

Run it from a script (``det_ds.init()`` and ``det_ds.Trainer(trial, context).fit(...)``) under
``python3 -m determined.launch.deepspeed python3 train.py``, or name the class:
``python3 -m determined.launch.deepspeed --trial model_def:MyTrial`` (or the legacy
``entrypoint: model_def:MyTrial``), which trains to ``searcher.max_length`` with the config's
periods. DeepSpeed runs on GPUs, or on CPUs (its CPU accelerator, gloo) where there are none.
The loop is described in ``determined.pytorch.deepspeed._controller``.

Importing this package imports torch and deepspeed.
"""

from __future__ import annotations

from determined.pytorch.deepspeed._context import DeepSpeedTrialContext, overwrite_deepspeed_config
from determined.pytorch.deepspeed._controller import DeepSpeedTrialController
from determined.pytorch.deepspeed._mpu import (
    ModelParallelUnit,
    make_data_parallel_mpu,
    make_deepspeed_mpu,
)
from determined.pytorch.deepspeed._trainer import Trainer, init
from determined.pytorch.deepspeed._trial import DeepSpeedTrial

DeepSpeedTrial.trial_context_class = DeepSpeedTrialContext

__all__ = [
    "DeepSpeedTrial",
    "DeepSpeedTrialContext",
    "DeepSpeedTrialController",
    "ModelParallelUnit",
    "Trainer",
    "init",
    "make_data_parallel_mpu",
    "make_deepspeed_mpu",
    "overwrite_deepspeed_config",
]
