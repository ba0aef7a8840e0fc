"""``DeterminedCallback`` and ``TensorBoard``: Keras ``model.fit()`` on a pydet cluster.

``DeterminedCallback`` reports training metrics (every epoch, or every N batches) and the
validation metrics of each evaluation, reports progress, checks for preemption at each
epoch's end, and checkpoints every ``checkpoint_epochs`` epochs and whenever training ends
with work not yet saved. A checkpoint holds the weights (``model_checkpoint.weights.h5``
with Keras 3, ``model_checkpoint`` with tf.keras 2) and, from the chief,
``callback_state``: the epoch, the batches trained and the ``continue_id``. Starting from a
checkpoint whose ``continue_id`` is the callback's own (a paused trial) continues at the
next epoch; any other checkpoint only gives the weights (a warm start), and one that holds
no weights this model can load fails ``fit()`` with a ``CheckpointLoadError`` that names it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import pickle
import shutil
import tempfile
from typing import Any

from tensorflow import keras
from tensorflow.keras import callbacks

from determined import core
from determined.common import errors

logger = logging.getLogger("determined.keras")

STATE_FILE = "callback_state"


class CheckpointLoadError(errors.InvalidArgument):
    """The checkpoint to start from holds nothing this model can load."""


def _keras3() -> bool:
    """Whether ``tensorflow.keras`` is Keras 3 (not tf.keras 2 / tf_keras)."""
    return int(str(getattr(keras, "__version__", "3")).split(".")[0]) >= 3


def weights_name() -> str:
    """The weights' file name in a checkpoint: Keras 3 insists on ``.weights.h5``."""
    return "model_checkpoint.weights.h5" if _keras3() else "model_checkpoint"


class DeterminedCallback(callbacks.ProgbarLogger):  # type: ignore[misc]  # Keras has no types
    """Determined's metrics, checkpoints, preemption and resumption for ``model.fit()``.

    Do not use it together with ``BackupAndRestore`` or ``ModelCheckpoint``. It overrides
    ``model.fit(initial_epoch=...)`` when it resumes, and it replaces Keras' progress bar
    (``verbose=1``) with log lines.

    Arguments:
        core_context: what ``det.core.init()`` returned.
        checkpoint: a checkpoint to start from, or None; on a cluster usually
            ``det.get_cluster_info().latest_checkpoint``.
        continue_id: saved with every checkpoint. Starting from a checkpoint with the same
            id continues its training (from the epoch after it); otherwise only the weights
            are loaded and training starts at epoch 0. On a cluster usually
            ``det.get_cluster_info().trial.trial_id``.
        train_metrics_report_period: ``"epoch"`` (default), or report training metrics
            every so many batches.
        checkpoint_epochs: checkpoint every N epochs (default 1); 0 checkpoints only when
            training ends or is preempted.
    """

    _chief_worker_only = False
    _supports_tf_logs = False

    def __init__(
        self,
        core_context: core.Context,
        checkpoint: str | None,
        continue_id: int | str,
        *,
        train_metrics_report_period: int | str = "epoch",
        checkpoint_epochs: int = 1,
    ) -> None:
        # ProgbarLogger only so that Keras adds no progress bar of its own.
        callbacks.Callback.__init__(self)
        if train_metrics_report_period != "epoch" and (
            isinstance(train_metrics_report_period, bool)
            or not isinstance(train_metrics_report_period, int)
            or train_metrics_report_period < 1
        ):
            raise ValueError(
                "train_metrics_report_period must be 'epoch' or a number of batches >= 1, not "
                f"{train_metrics_report_period!r}"
            )
        if isinstance(checkpoint_epochs, bool) or not isinstance(checkpoint_epochs, int):
            raise TypeError(f"checkpoint_epochs must be an int, not {checkpoint_epochs!r}")
        self._core = core_context
        self._checkpoint = checkpoint
        self._continue_id = continue_id
        self._report_period = train_metrics_report_period
        self._checkpoint_epochs = checkpoint_epochs
        self._is_chief = core_context.distributed.rank == 0
        self._is_verbose = False
        self._steps_completed = 0
        self._epoch = -1
        self._last_train_epoch = -1
        self._last_ckpt_epoch = -1
        self._training_length: int | None = None
        self._validation_length: int | None = None
        self._training_batches = 0
        self._validation_batches = 0
        self._percent_reported = -1
        # The downloaded starting checkpoint, kept until the first batch has run (weights
        # may be read lazily).
        self._ckpt_context: contextlib.ExitStack | None = None

    # What ProgbarLogger would do, masked.

    def set_params(self, params: dict[str, Any]) -> None:
        callbacks.Callback.set_params(self, params)
        self._is_verbose = bool(params.get("verbose", 0) != 0)

    def on_predict_begin(self, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_predict_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_predict_end(self, logs: dict[str, Any] | None = None) -> None:
        pass

    def _implements_train_batch_hooks(self) -> bool:
        return True

    def _implements_test_batch_hooks(self) -> bool:
        return self._is_verbose

    def _implements_predict_batch_hooks(self) -> bool:
        return False

    # Training.

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._ckpt_context = self._load(self._checkpoint)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch
        if not self._is_chief:
            return
        self._core.train.set_status("training")
        if self._is_verbose:
            self._training_batches = 0
            self._percent_reported = -1
            self._print_progress(None, training=True, batches=0, total=self._training_length)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._steps_completed += 1
        if self._ckpt_context is not None:
            self._ckpt_context.close()
            self._ckpt_context = None
        if not self._is_chief:
            return
        if (
            isinstance(self._report_period, int)
            and self._steps_completed % self._report_period == 0
        ):
            metrics = _metrics(logs)
            metrics.setdefault("epochs", self._epoch + 1)
            metrics.setdefault("batches", self._steps_completed)
            self._core.train.report_metrics("training", self._steps_completed, metrics)
        if self._is_verbose:
            self._training_batches += 1
            self._print_progress(
                logs, training=True, batches=self._training_batches, total=self._training_length
            )

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self._is_chief and self._report_period == "epoch":
            metrics = {k: v for k, v in _metrics(logs).items() if not k.startswith("val_")}
            metrics.setdefault("epochs", epoch + 1)
            metrics.setdefault("batches", self._steps_completed)
            self._core.train.report_metrics("training", self._steps_completed, metrics)
        epochs = self.params.get("epochs") if self.params else None
        if self._is_chief and epochs:
            self._core.train.report_progress(min(1.0, (epoch + 1) / epochs))
        self._last_train_epoch = epoch
        if self._checkpoint_epochs > 0 and (epoch + 1) % self._checkpoint_epochs == 0:
            self._save(epoch)
            self._last_ckpt_epoch = epoch
        # After the checkpoint, which can take a while; an unsaved epoch is saved by
        # on_train_end.
        if self._core.preempt.should_preempt():
            logger.info("preempted after epoch %d; stopping training", epoch)
            self.model.stop_training = True
        if self._is_chief:
            self._training_length = self._training_batches

    # Validation.

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        if not self._is_chief:
            return
        self._core.train.set_status("validating")
        if self._is_verbose:
            self._validation_batches = 0
            self._percent_reported = -1
            self._print_progress(None, training=False, batches=0, total=self._validation_length)

    def on_test_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._is_chief and self._is_verbose:
            self._validation_batches += 1
            self._print_progress(
                logs,
                training=False,
                batches=self._validation_batches,
                total=self._validation_length,
            )

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        if not self._is_chief:
            return
        metrics = _metrics(logs)
        metrics.setdefault("epochs", self._epoch + 1)
        metrics.setdefault("batches", self._steps_completed)
        self._core.train.report_metrics("validation", self._steps_completed, metrics)
        self._validation_length = self._validation_batches

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._last_train_epoch > self._last_ckpt_epoch:
            self._save(self._last_train_epoch)
            self._last_ckpt_epoch = self._last_train_epoch
        if self._ckpt_context is not None:
            self._ckpt_context.close()
            self._ckpt_context = None
        if self._is_chief:
            self._core.train.set_status("finishing")

    # Checkpoints.

    def _save(self, epoch: int) -> None:
        if self._is_chief:
            self._core.train.set_status("checkpointing")
        metadata = {"steps_completed": self._steps_completed}
        # Every worker saves (MultiWorkerMirroredStrategy needs all of them to); only the
        # chief's files stay.
        with self._core.checkpoint.store_path(metadata, shard=True) as (path, storage_id):
            self.save_model(self.model, str(path / weights_name()), self._core.distributed)
            if self._is_chief:
                state = {
                    "epoch": epoch,
                    "steps_completed": self._steps_completed,
                    "continue_id": self._continue_id,
                    "training_length": self._training_length,
                    "validation_length": self._validation_length,
                }
                with (path / STATE_FILE).open("wb") as f:
                    pickle.dump(state, f)
        logger.info("checkpoint %s saved after epoch %d", storage_id, epoch)

    def _load(self, checkpoint: str | None) -> contextlib.ExitStack | None:
        if checkpoint is None:
            return None
        if self._is_chief:
            self._core.train.set_status("restoring")
        with contextlib.ExitStack() as stack:
            path = stack.enter_context(self._core.checkpoint.restore_path(checkpoint))
            weights = path / weights_name()
            try:
                self.load_model(self.model, str(weights), self._core.distributed)
            except (OSError, ValueError, KeyError) as e:
                found = sorted(p.name for p in path.iterdir())[:8]
                raise CheckpointLoadError(
                    f"checkpoint {checkpoint} cannot be loaded into this Keras model (its files: "
                    f"{', '.join(found) or 'none'}): {e}"
                ) from None
            self._load_training_state(path)
            return stack.pop_all()
        raise AssertionError("unreachable")  # the with block returns or raises

    def _load_training_state(self, path: pathlib.Path) -> None:
        state_path = path / STATE_FILE
        if not state_path.exists():
            return
        with state_path.open("rb") as f:
            state = _PlainUnpickler(f).load()
        if state.get("continue_id") != self._continue_id:
            logger.info("the checkpoint is another run's: its weights only, from epoch 0")
            return
        self._steps_completed = int(state["steps_completed"])
        self._training_length = state["training_length"]
        self._validation_length = state["validation_length"]
        initial_epoch = int(state["epoch"]) + 1
        logger.info(
            "continuing at epoch %d (batch %d) from the checkpoint",
            initial_epoch,
            self._steps_completed,
        )
        # Keras 3 reads the first epoch from model._initial_epoch (as BackupAndRestore sets
        # it); tf.keras 2 asks model._training_state.
        self.model._initial_epoch = initial_epoch

        class WorkerTrainingState:
            def maybe_load_initial_epoch_from_ckpt(*_: Any, **__: Any) -> int:
                return initial_epoch

            def maybe_load_initial_counters_from_ckpt(*_: Any, **__: Any) -> tuple[int, int]:
                return initial_epoch, 0

        if not _keras3():
            self.model._training_state = WorkerTrainingState()

    def save_model(self, model: Any, path: str, distributed: core.DistributedContext) -> None:
        """Save ``model``'s weights to ``path`` (override to save differently). Every worker
        calls it; non-chief workers save into a temporary directory that is then removed."""
        if distributed.rank == 0:
            model.save_weights(path)
            return
        tempdir = tempfile.mkdtemp("save-worker-model")
        try:
            model.save_weights(os.path.join(tempdir, os.path.basename(path)))
        finally:
            shutil.rmtree(tempdir)

    def load_model(self, model: Any, path: str, distributed: core.DistributedContext) -> None:
        """Load ``model``'s weights from ``path`` (override to load differently)."""
        if not os.path.exists(path):
            raise FileNotFoundError(f"no {os.path.basename(path)}")
        model.load_weights(path)

    # Progress lines (verbose fits).

    def _print_progress(
        self, logs: dict[str, Any] | None, *, training: bool, batches: int, total: int | None
    ) -> None:
        if total is None:
            return
        percent_10 = int((batches / total) * 10) * 10
        if percent_10 <= self._percent_reported:
            return
        percent = int((batches / total) * 100)
        self._percent_reported = percent
        if training:
            report = (
                f"total batches trained: {self._steps_completed}, "
                f"epoch {percent}% complete ({batches}/{total})"
            )
        else:
            report = (
                f"validation after batch: {self._steps_completed}, "
                f"validation {percent}% complete ({batches}/{total})"
            )
        if logs is not None:
            report += f": {_metrics(logs)}"
        print(report, flush=True)


class _PlainUnpickler(pickle.Unpickler):
    """``callback_state`` holds a dict of plain values; nothing else loads."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"{STATE_FILE} may hold only plain values, not {module}.{name}"
        )


def _metrics(logs: dict[str, Any] | None) -> dict[str, Any]:
    """Keras' logs as metrics: numbers only, without ``batch`` and ``size``."""
    out: dict[str, Any] = {}
    for key, value in (logs or {}).items():
        if key in ("batch", "size"):
            continue
        item = getattr(value, "item", None)
        out[key] = item() if callable(item) else value
    return out


class TensorBoard(callbacks.TensorBoard):  # type: ignore[misc]  # Keras has no types
    """Keras' ``TensorBoard`` callback writing where pydet uploads TensorBoard files from
    (``core_context.train.get_tensorboard_path()``), so ``det tensorboard start`` shows them.

    It takes Keras' arguments after ``core_context``; a ``log_dir`` is ignored (with a
    warning) when the context has a TensorBoard directory, as it has on a cluster.
    """

    def __init__(self, core_context: core.Context, *args: Any, **kwargs: Any) -> None:
        det_tb_path = core_context.train.get_tensorboard_path()
        if det_tb_path:
            if "log_dir" in kwargs:
                user_log_dir = kwargs.pop("log_dir")
                logger.warning(
                    f"arg log_dir={user_log_dir} to det.keras.TensorBoard will be ignored"
                )
            elif args:
                user_log_dir, args = args[0], args[1:]
                logger.warning(
                    f"arg log_dir={user_log_dir} to det.keras.TensorBoard will be ignored"
                )
            args = (str(det_tb_path), *args)
        super().__init__(*args, **kwargs)

    def _write_logs(self, *args: Any) -> None:
        # tf.keras 2: a new event file after each write, so uploaded files never change.
        super()._write_logs(*args)
        self.writer.close()
        self.writer.reopen()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        # Keras 3 keeps its writers open: flush them so that the next upload has the epoch.
        writers = getattr(self, "_writers", None)
        if isinstance(writers, dict):
            for writer in writers.values():
                writer.flush()
