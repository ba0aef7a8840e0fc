"""Counts to the searcher's length, one step every 0.1 s, checkpointing every step and
leaving when asked to; prints every step so tests can check that nothing is redone."""

import pathlib

import determined as det

info = det.get_cluster_info()
assert info is not None
print(f"running on {info.agent_id}", flush=True)
with det.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = int((path / "step").read_text())
        print(f"resumed at step {step}", flush=True)
    for op in core.searcher.operations():
        while step < op.length:
            step += 1
            print(f"step {step}", flush=True)
            import time

            time.sleep(0.1)
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
                pathlib.Path(path, "step").write_text(str(step))
            core.train.report_training_metrics(steps_completed=step, metrics={"step": step})
            if core.preempt.should_preempt():
                print(f"preempted at step {step}", flush=True)
                raise SystemExit(0)
        op.report_completed(float(step))
print("finished", flush=True)
