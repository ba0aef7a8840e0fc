"""Reports N small training-metric dicts as fast as it can through the Core API.

    python3 metrics_trial.py N OUT_DIR

Writes OUT_DIR/metrics_calls.json as soon as the last report_training_metrics() call has
returned (its rate and the wall-clock time of that call), then lets core.Context.close()
wait for the master's acknowledgement and writes OUT_DIR/metrics_closed.json.
"""

import json
import os
import pathlib
import sys
import time

from determined import core


def write_json(path: pathlib.Path, value: dict[str, float]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)  # the bench polls for the file: never let it see half of it


def main() -> None:
    n = int(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    with core.init() as core_context:
        report = core_context.train.report_training_metrics
        began, cpu_began = time.perf_counter(), time.process_time()
        for step in range(1, n + 1):
            report(steps_completed=step, metrics={"loss": 1.0 / step, "accuracy": 0.5})
        elapsed = time.perf_counter() - began
        last_call = time.time()
        # CPU time of the whole process: the reporting loop and the shipping thread.
        cpu = time.process_time() - cpu_began
        write_json(
            out / "metrics_calls.json",
            {
                "calls": n,
                "seconds": elapsed,
                "cpu_seconds": cpu,
                "rate": n / elapsed,
                "last_call": last_call,
            },
        )
        print(f"{n} report_training_metrics calls in {elapsed:.3f} s: {n / elapsed:,.0f}/s")
    write_json(out / "metrics_closed.json", {"closed": time.time()})


if __name__ == "__main__":
    main()
