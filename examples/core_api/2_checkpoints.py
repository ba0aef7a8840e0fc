"""Stage 2: checkpoints, and pausing and resuming.

Every 10 steps the chief saves ``x`` in a checkpoint (``core_context.checkpoint.store_path``)
and asks whether to stop (``core_context.preempt.should_preempt()``). When the experiment is
paused (``det experiment pause``), the loop returns right after a checkpoint; when it is
activated again the trial starts over with ``info.latest_checkpoint`` set and continues from
there, so the final ``x`` is the same as that of an uninterrupted run.
"""

import logging
import pathlib
import time

import determined as det


# NEW: a checkpoint is a directory; the state is written into it as a small file.
def save_state(x, steps_completed, trial_id, checkpoint_directory):
    with checkpoint_directory.joinpath("state").open("w") as f:
        f.write(f"{x},{steps_completed},{trial_id}")


def load_state(trial_id, checkpoint_directory):
    checkpoint_directory = pathlib.Path(checkpoint_directory)
    with checkpoint_directory.joinpath("state").open("r") as f:
        x, steps_completed, ckpt_trial_id = [int(field) for field in f.read().split(",")]
    if ckpt_trial_id == trial_id:
        return x, steps_completed
    else:
        # This is a new trial; load the "model weights" but not any other state.
        return x, 0


def main(core_context, latest_checkpoint, trial_id, increment_by):
    x = 0

    # NEW: resume from the latest checkpoint, if this trial has one.
    starting_batch = 0
    if latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            x, starting_batch = load_state(trial_id, path)
        logging.info(f"resumed from checkpoint {latest_checkpoint} at step {starting_batch}")

    steps_completed = starting_batch
    for batch in range(starting_batch, 100):
        x += increment_by
        steps_completed = batch + 1
        time.sleep(0.02)
        logging.info(f"x is now {x}")
        if steps_completed % 10 == 0:
            core_context.train.report_training_metrics(
                steps_completed=steps_completed, metrics={"x": x}
            )

            # NEW: save a checkpoint; its metadata must include steps_completed.
            checkpoint_metadata = {"steps_completed": steps_completed}
            with core_context.checkpoint.store_path(checkpoint_metadata) as (path, uuid):  # noqa: RUF059
                save_state(x, steps_completed, trial_id, path)

            # NEW: stop when the master asks (pause, preemption); the trial resumes later.
            if core_context.preempt.should_preempt():
                return

    core_context.train.report_validation_metrics(steps_completed=steps_completed, metrics={"x": x})


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)

    # NEW: the trial's identity and latest checkpoint come from the cluster info.
    info = det.get_cluster_info()
    assert info is not None, "this example only runs on-cluster"
    latest_checkpoint = info.latest_checkpoint
    trial_id = info.trial.trial_id

    with det.core.init() as core_context:
        main(
            core_context=core_context,
            latest_checkpoint=latest_checkpoint,
            trial_id=trial_id,
            increment_by=1,
        )
