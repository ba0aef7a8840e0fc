"""How fast a local cluster turns `det experiment create` into running code.

Prints a table: time from the CreateExperiment call to the first line of user code (as
timestamped by the agent), and to COMPLETED for a no-op experiment, as medians over
several runs; `python3 -c 'import determined'` beside `python3 -c pass`; and the master's
resident memory when idle. Targets are issue 12's; the load average is printed with the
figures, which a busy machine inflates.

    python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from determined.api.gen import v1
from determined.common import client, context
from tests.cluster import Cluster

CONFIG = """
entrypoint: python3 noop.py
searcher: {name: single, metric: x, max_length: 1}
max_restarts: 0
"""


def rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_run(address: str, token: str, ctx: bytes) -> tuple[float, float]:
    async with client.session(address, token=token) as s:
        began = time.time()
        resp = await s.call(
            s.stub.create_experiment(v1.CreateExperimentRequest(config=CONFIG, context=ctx))
        )
        assert resp.experiment is not None
        exp_id = resp.experiment.id
        first_line = None
        while True:
            exp = await s.call(s.stub.get_experiment(v1.GetExperimentRequest(experiment_id=exp_id)))
            assert exp.experiment is not None
            if exp.experiment.state == v1.State.COMPLETED:
                done = time.time()
                break
            if exp.experiment.state in (v1.State.ERROR, v1.State.CANCELED):
                raise RuntimeError(f"experiment {exp_id} ended {exp.experiment.state}")
            await asyncio.sleep(0.005)
        trials = await s.call(
            s.stub.get_experiment_trials(v1.GetExperimentTrialsRequest(experiment_id=exp_id))
        )
        async for batch in s.stub.trial_logs(v1.TrialLogsRequest(trial_id=trials.trials[0].id)):
            for line in batch.logs:
                if "user code running" in line.message:
                    first_line = line.timestamp
        assert first_line is not None
        return first_line - began, done - began


def command_seconds(code: str, runs: int) -> float:
    """Median wall seconds of `python3 -c code`."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "ctx").mkdir()
        (root / "ctx" / "noop.py").write_text("print('user code running', flush=True)\n")
        ctx = context.pack_context(root / "ctx")
        cluster = Cluster(root)
        try:
            cluster.start_master()
            cluster.start_agent("agent-0", slots=1)
            time.sleep(2.0)
            assert cluster.master is not None
            idle = rss_mib(cluster.master.pid)
            first, done = [], []
            for _ in range(args.runs):
                f, d = asyncio.run(one_run(cluster.address, cluster.token, ctx))
                first.append(f)
                done.append(d)
        finally:
            cluster.close()
    import_runs = max(args.runs, 9)
    rows = [
        ("create -> first user line (median)", f"{statistics.median(first):.3f} s", "<= 0.25 s"),
        ("create -> first user line (max)", f"{max(first):.3f} s", ""),
        ("create -> COMPLETED, no-op (median)", f"{statistics.median(done):.3f} s", ""),
        (
            "`python3 -c 'import determined'` (median)",
            f"{command_seconds('import determined', import_runs):.3f} s",
            "<= 0.060 s",
        ),
        ("`python3 -c pass` (median)", f"{command_seconds('pass', import_runs):.3f} s", ""),
        ("master idle RSS", f"{idle:.1f} MiB", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)} | {'value':>10} | target")
    print(f"{'-' * width}-+-{'-' * 10}-+-------")
    for name, value, target in rows:
        print(f"{name.ljust(width)} | {value:>10} | {target}")
    load_after = os.getloadavg()
    print(
        f"({args.runs} runs, process runtime, 1 agent; {os.cpu_count()} CPUs, load average "
        f"(1/5/15 min) {'/'.join(f'{x:.1f}' for x in load_before)} before, "
        f"{'/'.join(f'{x:.1f}' for x in load_after)} after)"
    )


if __name__ == "__main__":
    main()
