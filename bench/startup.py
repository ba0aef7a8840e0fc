"""How fast a local cluster turns `det experiment create` into running code.

Prints a table: time from the CreateExperiment call to the first line of user code (as
timestamped by the agent), and to COMPLETED for a no-op experiment, as medians over
several runs; the parts of a trial's start on their own (`python3 -c pass`, the launcher's
imports, `import determined`, what a script's `core.init()` imports on a cluster), each as
wall and CPU time, and whether the harness has a byte-code cache (without one, every task
compiles the harness's modules again); and the master's resident memory when idle. Targets
are issue 12's; the load average is printed with the figures, which a busy machine
inflates (CPU time less so).

    python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import resource
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
            s.stub.create_experiment(
                v1.CreateExperimentRequest(config=CONFIG, context=ctx, activate=True)
            )
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


def command_seconds(code: str, runs: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system) of `python3 -c code`."""
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        wall.append(time.perf_counter() - began)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(wall), statistics.median(cpu)


# Each part of a trial's start that runs Python, timed on its own: (measure, code, target).
PARTS = [
    ("`python3 -c pass`", "pass", ""),
    ("`python3 -c 'import determined'`", "import determined", "<= 0.060 s"),
    ("the launcher's imports (`determined.exec.launch`)", "import determined.exec.launch", ""),
    (
        "a script's imports for `core.init()` on a cluster",
        "import determined.core._rpc, determined.core._session, determined.core._metrics",
        "",
    ),
]


def cached_env(cache: pathlib.Path) -> dict[str, str]:
    """The environment of a process that reads (and writes) byte code under ``cache``, as a
    byte-compiled (pip-installed) harness would have it, without touching the source tree."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def bytecode_cache() -> str:
    """Whether the harness's modules load from a byte-code cache or are compiled per task."""
    import determined.core

    source = pathlib.Path(determined.core.__file__)
    if sys.pycache_prefix:
        return f"under PYTHONPYCACHEPREFIX={sys.pycache_prefix}"
    if (source.parent / "__pycache__").is_dir():
        return "present"
    reason = " (PYTHONDONTWRITEBYTECODE is set)" if sys.dont_write_bytecode else ""
    return f"none: each task compiles the harness{reason}"


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
    ]
    with tempfile.TemporaryDirectory() as cache:
        env = cached_env(pathlib.Path(cache))
        for name, code, target in PARTS:
            wall, cpu = command_seconds(code, import_runs)
            rows.append((f"{name} (median wall)", f"{wall:.3f} s", target))
            rows.append((f"{name} (median CPU)", f"{cpu:.3f} s", ""))
            if code != "pass":
                command_seconds(code, 1, env)  # fills the cache
                _, cached = command_seconds(code, import_runs, env)
                rows.append((f"{name} (median CPU, byte code cached)", f"{cached:.3f} s", ""))
    rows.append(("master idle RSS", f"{idle:.1f} MiB", ""))
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)} | {'value':>10} | target")
    print(f"{'-' * width}-+-{'-' * 10}-+-------")
    for name, value, target in rows:
        print(f"{name.ljust(width)} | {value:>10} | {target}")
    load_after = os.getloadavg()
    print(
        f"({args.runs} runs, process runtime, 1 agent; {os.cpu_count()} CPUs, load average "
        f"(1/5/15 min) {'/'.join(f'{x:.1f}' for x in load_before)} before, "
        f"{'/'.join(f'{x:.1f}' for x in load_after)} after; harness byte-code cache: "
        f"{bytecode_cache()})"
    )


if __name__ == "__main__":
    main()
