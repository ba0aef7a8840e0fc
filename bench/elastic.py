"""How long the elastic pools' decisions take: the scale decider over many large pools.

In process, no master, no cloud: 100 pools of 1,000 instances each, in mixed states
(running with a busy or an idle agent, starting, disconnected, stopping, stopped, gone,
and a few over their idle, starting or disconnect periods), each with queued work. Each row
prints the median and p95 of several runs against its target, and the script exits
non-zero if a median misses one.

    python bench/elastic.py [--runs 30]

Each row is a function in ``ROWS``; rows measured against a live master (a pool growing
under a real queue) go there too.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from pydet.master.provisioner import decider
from pydet.master.provisioner.decider import Instance, InstanceState, Memory, Snapshot

POOLS = 100
INSTANCES = 1000
NOW = 1_700_000_000.0
SETTINGS = decider.Settings(
    min_instances=10,
    max_instances=INSTANCES,
    max_idle_agent_period=600.0,
    max_agent_starting_period=600.0,
    max_disconnect_period=300.0,
)
DECIDE_TARGET_MS = 10.0

# (share of the pool's instances, kind); a kind says the state and what its agent does.
MIX = (
    (0.640, "busy"),
    (0.150, "idle"),
    (0.005, "idle, over its period"),
    (0.100, "starting"),
    (0.005, "starting, over its period"),
    (0.030, "disconnected"),
    (0.005, "disconnected, over its period"),
    (0.030, "stopping"),
    (0.005, "stopped"),
    (0.030, "terminated"),
)


def pool(index: int, seed: int = 7) -> tuple[Snapshot, Memory]:
    """One pool's snapshot and the memory the decider would have built for it."""
    rng = random.Random(seed * 1_000 + index)
    kinds = [kind for share, kind in MIX for _ in range(round(share * INSTANCES))]
    rng.shuffle(kinds)
    instances: list[Instance] = []
    agents: dict[str, bool] = {}  # agent id -> idle
    never: list[str] = []
    idle_since: dict[str, float] = {}
    gone_since: dict[str, float] = {}
    for n, kind in enumerate(kinds):
        iid, aid = f"i-{index:03d}-{n:04d}", f"agent-{index:03d}-{n:04d}"
        state = {
            "stopping": InstanceState.STOPPING,
            "stopped": InstanceState.STOPPED,
            "terminated": InstanceState.TERMINATED,
        }.get(kind, InstanceState.RUNNING)
        launched = NOW - rng.uniform(700.0, 50_000.0)
        if kind.startswith("starting"):
            state = InstanceState.STARTING
            over = kind.endswith("period")
            launched = NOW - (rng.uniform(601.0, 900.0) if over else rng.uniform(0.0, 599.0))
            never.append(iid)
        instances.append(Instance(iid, state, launched, aid))
        if kind in ("busy", "idle", "idle, over its period"):
            agents[aid] = kind != "busy"
        if kind.startswith("idle"):
            over = kind.endswith("period")
            idle_since[iid] = NOW - (rng.uniform(601.0, 900.0) if over else rng.uniform(0, 599))
        if kind.startswith("disconnected"):
            over = kind.endswith("period")
            gone_since[iid] = NOW - (rng.uniform(301.0, 400.0) if over else rng.uniform(0, 299))
    snapshot = Snapshot.of(NOW, instances, agents, wanted=rng.randint(0, 40))
    # As left by a decision on an earlier listing of the same instances: its own objects,
    # equal to this snapshot's but not the same (no shortcut by identity).
    listed = frozenset(i.id for i in instances if i.state in decider.LIVE)
    return snapshot, Memory(listed, frozenset(never), idle_since, gone_since)


@dataclass(frozen=True)
class Row:
    name: str
    samples_ms: list[float]
    target_ms: float
    detail: str

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm up: the first run pays for allocations the others reuse
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def decide_row(runs: int) -> Row:
    pools = [pool(i) for i in range(POOLS)]

    def one_pass() -> list[decider.Decision]:
        return [decider.decide(SETTINGS, snapshot, memory) for snapshot, memory in pools]

    decisions = one_pass()
    launched = sum(d.launch for d in decisions)
    ended = sum(len(d.terminate) for d in decisions)
    return Row(
        f"decide, {POOLS} pools x {INSTANCES:,} instances",
        timed(one_pass, runs),
        DECIDE_TARGET_MS,
        f"{launched} to launch, {ended} to terminate",
    )


def deadline_row(runs: int) -> Row:
    """The loop's other call per pass: when to wake up next."""
    pools = [pool(i) for i in range(POOLS)]
    decided = [(s, decider.decide(SETTINGS, s, m).memory) for s, m in pools]

    def one_pass() -> list[float | None]:
        return [decider.next_deadline(SETTINGS, s, m) for s, m in decided]

    soonest = min(t for t in one_pass() if t is not None)
    return Row(
        f"next_deadline, {POOLS} pools x {INSTANCES:,} instances",
        timed(one_pass, runs),
        DECIDE_TARGET_MS,
        f"soonest in {soonest - NOW:.0f} s",
    )


ROWS: list[Callable[[int], Row]] = [decide_row, deadline_row]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=30)
    args = p.parse_args()
    print(f"{POOLS} pools x {INSTANCES:,} instances, {args.runs} runs per row\n")

    rows = [row(args.runs) for row in ROWS]
    width = max(len(r.name) for r in rows)
    print(f"{'operation':<{width}}  {'median ms':>9}  {'p95 ms':>6}  {'target ms':>9}  ok   detail")
    print(f"{'-' * width}  {'-' * 9}  {'-' * 6}  {'-' * 9}  ---  {'-' * 24}")
    missed = 0
    for r in rows:
        ok = r.median <= r.target_ms
        missed += not ok
        print(
            f"{r.name:<{width}}  {r.median:9.1f}  {r.p95:6.1f}  {r.target_ms:9.0f}"
            f"  {'yes' if ok else 'NO':<3}  {r.detail}"
        )
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        print(f"\nnote: load average {load:.1f} on {cores} cores; wall-clock times include waits")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
