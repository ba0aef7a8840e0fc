"""A slow trial for the WebUI tests: metrics every step, a validation every 5 steps, a
checkpoint every 10, a log line every step (rank-prefixed, two levels), and it stops
cleanly when the master asks (pause)."""

import json
import math
import os
import time

import determined as det

hparams = json.loads(os.environ.get("DET_HPARAMS", "{}"))
lr = float(hparams.get("lr", 0.1))
steps = int(hparams.get("steps", 3000))
start = int(os.environ.get("DET_STEPS_COMPLETED", "0") or 0)

with det.core.init() as core:
    for step in range(start + 1, steps + 1):
        loss = math.exp(-lr * step / 50) + 0.01 * math.sin(step)
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": loss, "lr": lr})
        level = "WARNING" if step % 7 == 0 else "INFO"
        print(f"[rank=0] {level}: step {step} loss={loss:.4f}", flush=True)
        if step % 5 == 0:
            core.train.report_validation_metrics(
                steps_completed=step, metrics={"validation_loss": loss * 1.1, "accuracy": 1 - loss}
            )
        if step % 10 == 0:
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _uuid):
                (path / "state.json").write_text(json.dumps({"step": step}))
            if core.preempt.should_preempt():
                print("[rank=0] INFO: preempted, exiting", flush=True)
                break
        time.sleep(0.2)
