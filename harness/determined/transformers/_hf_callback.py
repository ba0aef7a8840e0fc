"""``DetCallback``: a Hugging Face ``Trainer`` on the cluster, through the Core API.

Every callback of the Trainer runs on every worker at the same point of training, so the
decisions that workers must agree on (stop, save, evaluate) are taken where they all are:
``on_log`` and ``on_epoch_end``. Only the chief reports.

A report costs the training loop little, but not nothing: the Core API queues it at once,
and waking its background thread to ship it takes the interpreter's lock away from training
for a moment. So training metrics and progress are held here and handed over together, at
most once per ``REPORT_INTERVAL``; a validation (which the searcher waits for), a save and
the end of training hand over everything at once.
"""

from __future__ import annotations

import json
import logging
import pathlib
import time
from typing import Any

import transformers
from transformers import trainer_utils

import determined as det
from determined.core import DownloadMode
from determined.transformers import _checks, _files

log = logging.getLogger("determined.transformers")

USER_DATA_FILE = "my_data.json"

# Seconds between hand-overs of training metrics and progress to the Core API.
REPORT_INTERVAL = 1.0
# Seconds between looks at the clock's business (hand-overs, and the preemption signal in
# a single-worker task) at the end of a step: a step costs one clock reading otherwise.
TICK = 0.1


class DetCallback(transformers.TrainerCallback):  # type: ignore[misc]  # Any: not type-checked
    """Connects a ``transformers.Trainer`` to the cluster: its logs become training and
    validation metrics, each save becomes a checkpoint, and training resumes from the
    trial's latest checkpoint after a pause, a preemption or a failure.

    Add it to the Trainer's callbacks, and pass the ``resume_from_checkpoint`` it sets::

        with det.core.init(distributed=...) as core_context:
            det_callback = DetCallback(core_context, training_args)
            trainer = Trainer(..., args=training_args, callbacks=[det_callback])
            trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)

    Logs whose names start with ``eval_`` are reported as validation metrics (and must hold
    ``searcher.metric``), others as training metrics, at most once per step; ``epoch``
    is replaced by ``epochs`` and ``batches``, and speed figures are dropped. The searcher's
    stop and a pause reach training as the preemption signal: training stops at the next
    log (in a single-worker task, within a tenth of a second), saves, and the script ends
    normally.

    Args:
        core_context: the result of ``det.core.init()``.
        args: the ``TrainingArguments`` the Trainer gets. ``resume_from_checkpoint`` is set
            on them when the trial has a checkpoint to resume from, unless
            ``overwrite_output_dir`` is True.
        filter_metrics: report only the metrics whose names contain one of these strings
            (the searcher's metric and time metric are always reported). Default: all.
        user_data: a JSON-able dict stored with every checkpoint: in its metadata, and as
            ``my_data.json`` in the Trainer's checkpoint directory.
    """

    def __init__(
        self,
        core_context: det.core.Context,
        args: transformers.TrainingArguments,
        filter_metrics: list[str] | None = None,
        user_data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        info = det.get_cluster_info()
        if info is None:
            raise RuntimeError("det.transformers.DetCallback must be run on a Determined cluster")
        if not isinstance(core_context, det.core.Context):
            raise TypeError(
                "DetCallback(core_context, ...) takes the context that det.core.init() returns "
                f"(with det.core.init() as core_context: ...), not {type(core_context).__name__}"
            )
        self.info = info
        self.core_context = core_context
        self.filter_metrics = list(filter_metrics) if filter_metrics else None
        self.user_data = _checked_user_data(user_data)

        self.last_train_metrics = -1
        self.last_eval_metrics = -1
        self.last_save = -1
        self.last_progress = 0
        # Which worker of this machine moves files for the Trainer's output_dir (set once).
        self._placer: tuple[str, bool] | None = None
        # One worker: asking for the preemption signal is reading a flag, so it is asked
        # every TICK; several: it is a collective, asked only where all workers log.
        self._check_each_tick = core_context.distributed.size == 1
        self._next_tick = 0.0
        # The chief reports (the Core API allows no other worker to).
        self._chief = core_context.distributed.rank == 0
        # Reports not handed to the Core API yet, and when they are due.
        self._pending: list[tuple[str, int, dict[str, Any]]] = []
        self._pending_progress: float | None = None
        self._due = 0.0

        # The config is checked before anything is downloaded.
        self.searcher_metric: str | None = None
        self.time_metric: str | None = None
        self.required_metrics: list[str] = []
        if info.task_type == "TRIAL" and info.trial is not None:
            searcher = info.trial.config.get("searcher") or {}
            self.required_metrics = _checks.check_searcher_config(
                searcher, args.max_steps, args.num_train_epochs
            )
            self.searcher_metric = searcher.get("metric")
            self.time_metric = searcher.get("time_metric")
            if self.filter_metrics:
                self.filter_metrics.extend(
                    m for m in (self.searcher_metric, self.time_metric) if m is not None
                )

        self.load_last_checkpoint(args)

        # Kept from Determined (undocumented there too): whether training that ends on its own
        # gets a final evaluation and save. A stop for preemption always saves.
        self._force_final_save = True
        self._force_final_evaluate = True

    # Restoring.

    def load_last_checkpoint(self, args: transformers.TrainingArguments) -> None:
        """Download the trial's latest checkpoint into ``args.output_dir`` and point
        ``args.resume_from_checkpoint`` at the Trainer's directory in it."""
        latest = self.info.latest_checkpoint
        if latest is None:
            return
        if getattr(args, "overwrite_output_dir", False) is True:
            log.info(
                "Skipping downloading last checkpoint from Determined due to "
                "overwrite_output_dir=True."
            )
            return
        output_dir = pathlib.Path(args.output_dir)
        dist = self.core_context.distributed
        # Every file of the checkpoint (a DeepSpeed worker needs all the shards), fetched once
        # per machine and directory; the others wait until it is there.
        if self._places_files(output_dir):
            self.core_context.checkpoint.download(
                latest, output_dir, download_mode=DownloadMode.NoSharedDownload
            )
        if dist.size > 1:
            dist.allgather_local(None)
        steps = self.core_context.checkpoint.get_metadata(latest).get("steps_completed")
        path = output_dir / f"checkpoint-{steps}"
        resume = str(path) if path.is_dir() else trainer_utils.get_last_checkpoint(output_dir)
        if resume is None:
            log.warning(
                "checkpoint %s has no checkpoint-<step> directory of the Trainer; training "
                "starts from scratch",
                latest,
            )
            return
        args.resume_from_checkpoint = resume
        if isinstance(steps, int):
            # The Trainer resumes at this step: a save there would store the same state again.
            self.last_save = steps
        log.info(f"Latest checkpoint downloaded to {resume}.")

    # Metrics.

    def on_log(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if logs is None:
            log.warning("on_log called with empty logs")
            return
        kind = _checks.metric_type(logs)
        metrics = _checks.report_metrics(logs, self.filter_metrics)
        step = state.global_step
        metrics.setdefault("batches", step)
        metrics.setdefault("epochs", state.epoch)
        if kind == _checks.TRAIN:
            # The summary at the end of training comes at the step of the last log.
            if self.last_train_metrics != step:
                self.last_train_metrics = step
                if self._chief:
                    self._pending.append(("training", step, metrics))
                    if time.monotonic() >= self._due:
                        self._hand_over()
        elif kind == _checks.EVAL:
            # So does an evaluation after training that the last one already covered.
            if self.last_eval_metrics != step:
                self.last_eval_metrics = step
                if self._chief:
                    _checks.check_eval_metrics(metrics, self.searcher_metric, self.time_metric)
                    self._pending.append(("validation", step, metrics))
                    self._hand_over()
        else:
            log.warning(f"Metrics not reported: metric type = {kind}.")
        if not self._check_each_tick:
            self._stop_if_preempted(control)

    def on_step_end(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        if self._chief and args.max_steps > 0:
            # At most one report per percent.
            percent = state.global_step * 100 // args.max_steps
            if percent > self.last_progress:
                self.last_progress = percent
                self._pending_progress = min(state.global_step / args.max_steps, 1.0)
        now = time.monotonic()
        if now < self._next_tick:
            return
        self._next_tick = now + TICK
        if self._chief and now >= self._due:
            self._hand_over()
        if self._check_each_tick:
            self._stop_if_preempted(control)

    def on_train_end(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        if self._chief:
            self._hand_over()

    def _hand_over(self) -> None:
        """Give the Core API every report held here (it ships them in one batch)."""
        train = self.core_context.train
        pending, self._pending = self._pending, []
        for group, step, metrics in pending:
            train.report_metrics(group, step, metrics)
        if self._pending_progress is not None:
            train.report_progress(self._pending_progress)
            self._pending_progress = None
        self._due = time.monotonic() + REPORT_INTERVAL

    def _stop_if_preempted(self, control: transformers.TrainerControl) -> None:
        # Not control.should_save: on_epoch_end asks for the one save at the end, however
        # many logs see the signal before then.
        if self.core_context.preempt.should_preempt():
            control.should_training_stop = True

    def on_epoch_end(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        if control.should_training_stop:
            ending = True
        elif args.max_steps > -1:
            ending = state.global_step >= args.max_steps
        else:
            ending = state.epoch >= args.num_train_epochs
        if ending:
            preempted = self.core_context.preempt.should_preempt()
            # The last chance to evaluate and save: the Trainer does both right after this.
            if state.global_step > self.last_eval_metrics:
                if self._force_final_evaluate and not preempted:
                    control.should_evaluate = True
            if state.global_step > self.last_save:
                if self._force_final_save or preempted:
                    control.should_save = True
        if self._chief and args.max_steps == -1 and args.num_train_epochs > 0:
            self._pending_progress = min(state.epoch / args.num_train_epochs, 1.0)

    # Checkpoints.

    def on_save(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        step = state.global_step
        self.last_save = step
        if self._chief:
            # The metrics up to this step reach the master before the checkpoint does.
            self._hand_over()
        output_dir = pathlib.Path(args.output_dir)
        folder = f"{trainer_utils.PREFIX_CHECKPOINT_DIR}-{step}"
        metadata: dict[str, Any] = {"steps_completed": step}
        if self._chief and self.user_data is not None:
            self._on_save_user_data(str(output_dir / folder))
            metadata = {**self.user_data, **metadata}
        if self.info.trial is not None:
            metadata["trial_id"] = self.info.trial.trial_id

        def select(rel: str) -> bool:
            return rel.startswith((f"{folder}/", "runs/"))

        def link(rel: str) -> bool:
            return rel.startswith(f"{folder}/")

        places = self._places_files(output_dir)
        # Every worker takes part (DeepSpeed writes a shard per worker); one per machine and
        # directory contributes the files.
        with self.core_context.checkpoint.store_path(metadata, shard=True) as (path, storage_id):
            if places and output_dir.is_dir():
                count = _files.place(output_dir, path, select=select, link=link)
                log.debug("checkpoint %s: %d files from %s", storage_id, count, output_dir)

    def _on_save_user_data(self, save_path: str) -> None:
        """Write ``user_data`` as ``my_data.json`` into the Trainer's checkpoint directory."""
        path = pathlib.Path(save_path)
        if path.is_dir():
            (path / USER_DATA_FILE).write_text(json.dumps(self.user_data))

    def _places_files(self, output_dir: pathlib.Path) -> bool:
        """Whether this worker moves ``output_dir``'s files: the first worker of its machine
        with that directory. A collective the first time (all workers call it together)."""
        dist = self.core_context.distributed
        if dist.size == 1:
            return True
        key = str(output_dir.resolve())
        if self._placer is None or self._placer[0] != key:
            dirs = dist.allgather_local(key)
            self._placer = (key, dirs.index(key) == dist.local_rank)
        return self._placer[1]


def _checked_user_data(user_data: Any) -> dict[str, Any] | None:
    if user_data is None:
        return None
    if not isinstance(user_data, dict):
        raise TypeError(f"DetCallback(user_data=...) takes a dict, not {type(user_data).__name__}")
    for key in ("steps_completed", "trial_id"):
        if key in user_data:
            raise ValueError(
                f"DetCallback(user_data=...) may not set {key!r}: DetCallback sets it in every "
                "checkpoint's metadata"
            )
    try:
        return dict(json.loads(json.dumps(user_data)))
    except (TypeError, ValueError) as e:
        raise TypeError(f"DetCallback(user_data=...) is not JSON-able: {e}") from None
