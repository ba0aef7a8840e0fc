"""Handwritten digits (scikit-learn's ``load_digits``, no download) with Keras 3 and
Determined's ``DeterminedCallback``.

On a cluster: ``entrypoint: python3 -m determined.launch.tensorflow -- python3 train.py``.
Here, without a cluster: ``python3 train.py`` (checkpoints in ./checkpoints).
"""

from __future__ import annotations

import argparse
import logging

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tensorflow import keras

import determined as det
import determined.keras


def digits() -> tuple[tuple[object, object], tuple[object, object]]:
    """80% of the 8x8 digits (64 features in [0, 1]) to train on, 20% to validate on."""
    images, labels = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(
        (images / 16.0).astype("float32"), labels, test_size=0.2, random_state=0
    )
    return (x_train, y_train), (x_val, y_val)


def main(core_context, strategy, checkpoint, continue_id, hparams, epochs):
    (x, y), validation_data = digits()
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input(shape=(64,)),
                keras.layers.Dense(hparams["hidden"], activation="relu"),
                keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(hparams["learning_rate"]),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        )

    # Determined's metrics, checkpoints (every epoch), preemption and resumption.
    det_cb = det.keras.DeterminedCallback(
        core_context, checkpoint=checkpoint, continue_id=continue_id
    )
    # Keras' TensorBoard callback, writing where the cluster uploads TensorBoard files from.
    tb_cb = det.keras.TensorBoard(core_context, update_freq="epoch")

    model.fit(
        x=x,
        y=y,
        batch_size=hparams["global_batch_size"],
        validation_data=validation_data,
        epochs=epochs,
        callbacks=[det_cb, tb_cb],
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5, help="how long to train for")
    args = parser.parse_args()

    info = det.get_cluster_info()
    if info and info.task_type == "TRIAL":
        # A trial: resume from its own latest checkpoint, with the searcher's hparams.
        continue_id = info.trial.trial_id
        checkpoint = info.latest_checkpoint
        hparams = info.trial.hparams
        keras.utils.set_random_seed(info.trial.trial_seed)
    else:
        continue_id = "local-train-task"
        checkpoint = None
        hparams = {"hidden": 64, "learning_rate": 0.01, "global_batch_size": 32}

    distributed, strategy = det.core.DistributedContext.from_tf_config()
    with det.core.init(distributed=distributed) as core_context:
        main(core_context, strategy, checkpoint, continue_id, hparams, args.epochs)
