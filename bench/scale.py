"""The master at cluster scale, and the wall time of many short trials (issue 12, "Scale").

(a) The master alone at scale: a random search of ``--trials`` (10,000) trials with
``max_concurrent_trials`` equal to ``--slots`` (1,000) on hollow agents (``--agents``, 10,
daemons on one event loop in one process, bench/_scale/hollow_agents.py): real agent daemons
that take start orders without starting a process and play each trial's Core API calls
(get the searcher operation, report one validation metric, complete the operation, exit 0;
agent/hollow_runtime.py), as kubemark does for Kubernetes. Measured from CreateExperiment
to COMPLETED, cluster already up: wall time, trials per second (end to end, and started and
finished per second over the span of their start and end times), the master's CPU seconds
per trial (user + system from /proc, its database thread included) and its peak RSS
(VmHWM). Target: at least 200 trials/s; Slurm's published 500 jobs/s is a reference
figure for a mature scheduler, not measured here.

(b) Many short real trials: ``--real-trials`` (1,000) trials of 1 s of work each (a sleep,
then one validation metric: bench/_search_workload/trial.py with one step) on 2 agents x 2
slots of the process runtime, each trial a real process. Ideal wall time: trials x 1 s / 4
slots; target: at most 15 % over it. At full size it takes over 250 s.

Every row carries the load average (1 min) before and after it: the machine is shared, and
on two cores the hollow agents, the master and the trials' processes compete for them.

    python3 bench/scale.py [--trials 10000] [--slots 1000] [--agents 10]
                           [--real-trials 1000] [--only hollow,real] [--profile FILE]

``--profile FILE`` runs the master of (a) under cProfile (PYDET_MASTER_PROFILE, timing its
event loop thread's CPU time) and prints its top functions by own time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabulate import tabulate  # type: ignore[import-untyped]  # noqa: E402

from bench.search import (  # noqa: E402
    WORKLOAD,
    BenchCluster,
    Workload,
    cpu_seconds,
    print_profile,
    pydet_config,
    run_pydet_search,
)
from determined.common import context  # noqa: E402
from tests import hollow  # noqa: E402
from tests.cluster import wait_until  # noqa: E402

PY = sys.executable
FLEET = ROOT / "bench" / "_scale" / "hollow_agents.py"
TARGET_RATE = 200.0
SLURM_RATE = 500.0
TARGET_OVER_IDEAL = 15.0
REAL_AGENTS, REAL_SLOTS, REAL_WORK_S = 2, 2, 1.0


@dataclass(frozen=True)
class Measured:
    trials: int
    wall: float
    started_per_s: float
    finished_per_s: float
    master_cpu: float
    master_rss_mib: float
    load: tuple[float, float]


def load1() -> float:
    return os.getloadavg()[0]


def peak_rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def trial_times(db: pathlib.Path, exp_id: int) -> list[tuple[str, float, float]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT state, start_time, end_time FROM trials WHERE experiment_id = ?", (exp_id,)
        ).fetchall()
    return [(str(s), float(b), float(e or 0.0)) for s, b, e in rows]


def per_second(times: list[float]) -> float:
    span = max(times) - min(times)
    return len(times) / span if span > 0 else float("inf")


def search(cluster: BenchCluster, cfg: dict[str, Any], ctx_dir: pathlib.Path) -> Measured:
    """Run one search to COMPLETED on ``cluster`` and measure it."""
    assert cluster.master is not None
    pid = cluster.master.pid
    ctx = context.pack_context(ctx_dir)
    before = load1()
    cpu = cpu_seconds(pid)
    exp_id, wall = asyncio.run(
        run_pydet_search(cluster.address, cluster.token, ctx, json.dumps(cfg))
    )
    cpu = cpu_seconds(pid) - cpu
    trials = trial_times(cluster.root / "master" / "pydet.db", exp_id)
    states = {s for s, _, _ in trials}
    expected = cfg["searcher"]["max_trials"]
    if len(trials) != expected or states != {"COMPLETED"}:
        raise RuntimeError(f"{len(trials)} of {expected} trials, states {states}")
    return Measured(
        trials=len(trials),
        wall=wall,
        started_per_s=per_second([b for _, b, _ in trials]),
        finished_per_s=per_second([e for _, _, e in trials]),
        master_cpu=cpu / len(trials),
        master_rss_mib=peak_rss_mib(pid),
        load=(before, load1()),
    )


def run_hollow(trials: int, slots: int, agents: int, profile: str) -> Measured:
    with tempfile.TemporaryDirectory(prefix="pydet-bench-scale-") as tmp:
        root = pathlib.Path(tmp)
        cluster = BenchCluster(root)
        cluster.profile_to = profile
        fleet: subprocess.Popen[bytes] | None = None
        try:
            cluster.start_master()
            with open(root / "hollow-agents.log", "ab") as out:
                fleet = subprocess.Popen(
                    [
                        PY,
                        str(FLEET),
                        "--master",
                        cluster.address,
                        "--token-file",
                        str(cluster.agent_token_file),
                        "--agents",
                        str(agents),
                        "--slots",
                        str(slots // agents),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            wait_until(
                lambda: sum(a["connected"] for a in cluster.agents_json()) == agents,
                60,
                f"{agents} hollow agents to connect",
            )
            (root / "context").mkdir()
            cfg = hollow.random_search(
                "bench-scale-hollow", trials=trials, concurrency=slots, length=1
            )
            measured = search(cluster, cfg, root / "context")
            cluster.write_profile()
            return measured
        except BaseException:
            print(cluster.dump_logs(), file=sys.stderr)
            raise
        finally:
            if fleet is not None:
                fleet.send_signal(signal.SIGTERM)
                try:
                    fleet.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    fleet.kill()
            cluster.close()


def run_real(trials: int) -> Measured:
    slots = REAL_AGENTS * REAL_SLOTS
    w = Workload(trials=trials, steps=1, work_s=REAL_WORK_S, concurrency=slots)
    with tempfile.TemporaryDirectory(prefix="pydet-bench-scale-") as tmp:
        cluster = BenchCluster(pathlib.Path(tmp))
        try:
            cluster.start_master()
            for i in range(REAL_AGENTS):
                cluster.start_agent(f"agent-{i}", REAL_SLOTS)
            return search(cluster, json.loads(pydet_config(w, "random")), WORKLOAD)
        except BaseException:
            print(cluster.dump_logs(), file=sys.stderr)
            raise
        finally:
            cluster.close()


def hollow_rows(m: Measured, slots: int, agents: int) -> list[list[str]]:
    what = f"(a) {m.trials} trials, random search, {slots} hollow slots on {agents} agents"
    load = f"{m.load[0]:.1f} -> {m.load[1]:.1f}"
    rate = m.trials / m.wall
    verdict = "meets" if rate >= TARGET_RATE else "below"
    return [
        [what, "wall time, CreateExperiment to COMPLETED", f"{m.wall:.1f} s", "", load],
        [
            what,
            "trials per second, end to end",
            f"{rate:.0f}/s",
            f">= {TARGET_RATE:.0f}/s ({verdict}); Slurm: {SLURM_RATE:.0f} jobs/s (reference)",
            load,
        ],
        [what, "trials started per second", f"{m.started_per_s:.0f}/s", "", load],
        [what, "trials finished per second", f"{m.finished_per_s:.0f}/s", "", load],
        [
            what,
            "master CPU per trial (user+system)",
            f"{m.master_cpu * 1000:.1f} ms",
            f"<= {1000 / TARGET_RATE:.1f} ms to allow {TARGET_RATE:.0f}/s on one core",
            load,
        ],
        [what, "master peak RSS", f"{m.master_rss_mib:.0f} MiB", "", load],
    ]


def real_rows(m: Measured) -> list[list[str]]:
    slots = REAL_AGENTS * REAL_SLOTS
    ideal = m.trials * REAL_WORK_S / slots
    over = (m.wall / ideal - 1) * 100
    what = (
        f"(b) {m.trials} trials x {REAL_WORK_S:.0f} s of work, "
        f"{REAL_AGENTS} agents x {REAL_SLOTS} slots (process runtime)"
    )
    load = f"{m.load[0]:.1f} -> {m.load[1]:.1f}"
    verdict = "meets" if over <= TARGET_OVER_IDEAL else "misses"
    return [
        [what, "wall time", f"{m.wall:.1f} s", f"ideal {ideal:.1f} s", load],
        [
            what,
            "over ideal",
            f"{over:.1f} %",
            f"<= {TARGET_OVER_IDEAL:.0f} % ({verdict})",
            load,
        ],
        [what, "master CPU per trial (user+system)", f"{m.master_cpu * 1000:.1f} ms", "", load],
    ]


def print_rows(rows: list[list[str]]) -> None:
    print(tabulate(rows, headers=["workload", "measure", "value", "target", "load"]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10_000, help="(a): trials on hollow agents")
    parser.add_argument("--slots", type=int, default=1000, help="(a): hollow slots in all")
    parser.add_argument("--agents", type=int, default=10, help="(a): hollow agents")
    parser.add_argument("--real-trials", type=int, default=1000, help="(b): real 1 s trials")
    parser.add_argument("--only", default="hollow,real", help="hollow and/or real")
    parser.add_argument("--profile", default="", help="(a): write the master's cProfile here")
    args = parser.parse_args()
    if args.slots % args.agents:
        parser.error("--slots must be a multiple of --agents")
    only = set(args.only.split(","))
    print(f"cpus: {os.cpu_count()}; load average (1 min) before -> after each run", flush=True)
    # Each part's rows as soon as it is measured: a later part may fail or be cut short.
    if "hollow" in only:
        measured = run_hollow(args.trials, args.slots, args.agents, args.profile)
        print_rows(hollow_rows(measured, args.slots, args.agents))
    if "real" in only:
        print_rows(real_rows(run_real(args.real_trials)))
    if args.profile and "hollow" in only:
        print_profile(args.profile)


if __name__ == "__main__":
    main()
