"""Train ``DigitsTrial`` with Determined's DeepSpeed ``Trainer`` (Determined 0.38's way).

On a cluster: ``entrypoint: python3 -m determined.launch.deepspeed python3 train.py``.
Here, without a cluster: ``python3 train.py`` (one process; checkpoints in ./checkpoints).
"""

from __future__ import annotations

import argparse
import logging

import yaml
from model_def import DigitsTrial

import determined as det
from determined import pytorch
from determined.pytorch import deepspeed as det_ds


def main(batches: int) -> None:
    info = det.get_cluster_info()
    if info is None or info.trial is None:
        # Off the cluster: the hyperparameters of const.yaml.
        with open("const.yaml") as f:
            hparams = yaml.safe_load(f)["hyperparameters"]
        latest_checkpoint = None
    else:
        hparams = info.trial.hparams
        # Resume a paused trial from the checkpoint it saved last.
        latest_checkpoint = info.latest_checkpoint

    with det_ds.init(hparams=hparams) as context:
        trial = DigitsTrial(context)
        trainer = det_ds.Trainer(trial, context)
        trainer.fit(
            max_length=pytorch.Batch(batches),
            validation_period=pytorch.Batch(50),
            checkpoint_period=pytorch.Batch(50),
            reporting_period=pytorch.Batch(25),
            latest_checkpoint=latest_checkpoint,
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=150, help="how many batches to train")
    main(parser.parse_args().batches)
