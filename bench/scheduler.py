"""How long one scheduling pass and the job-queue operations take on a large pool.

In process, no master: 1,000 agents of 8 slots, 10,000 jobs in the queue (sizes 1/2/4/8,
mixed priorities and weights), about a third of them already holding an allocation, each
with one more request pending. Prints the median of several runs per operation against
its target, and exits non-zero if one is missed.

    python bench/scheduler.py [--runs 5] [--agents 1000] [--jobs 10000]
"""

from __future__ import annotations

import argparse
import functools
import os
import pathlib
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from pydet.master import scheduler
from pydet.master.config import PoolConfig
from pydet.master.jobs import ordering as jobqueue

SLOTS_PER_AGENT = 8
PASS_TARGET_MS = 100.0
QUEUE_TARGET_MS = 50.0


def workload(
    n_agents: int, n_jobs: int, seed: int = 7
) -> tuple[
    list[scheduler.AgentView],
    list[scheduler.RunningAllocation],
    list[scheduler.Request],
    list[jobqueue.QueuedJob],
]:
    rng = random.Random(seed)
    free = {f"agent-{i:04d}": [str(s) for s in range(SLOTS_PER_AGENT)] for i in range(n_agents)}
    ids = list(free)
    running: list[scheduler.RunningAllocation] = []
    pending: list[scheduler.Request] = []
    queue: list[jobqueue.QueuedJob] = []
    for j in range(n_jobs):
        job = f"job-{j:05d}"
        slots = rng.choice((1, 1, 2, 2, 4, 8))
        priority = rng.choice((10, 42, 42, 42, 60, 80))
        weight = float(rng.choice((1, 1, 2, 3)))
        common: dict[str, Any] = {
            "job_id": job,
            "priority": priority,
            "weight": weight,
            "order": float(j),
            "max_slots": None if rng.random() < 0.8 else 2 * slots,
        }
        scheduled = False
        if rng.random() < 0.35:
            agent = rng.choice(ids)
            if len(free[agent]) >= slots:
                taken, free[agent] = free[agent][:slots], free[agent][slots:]
                alloc_id = f"{job}.0"
                running.append(
                    scheduler.RunningAllocation(
                        alloc_id, containers=((agent, tuple(taken)),), started=float(j), **common
                    )
                )
                scheduled = True
        pending.append(scheduler.Request(f"{job}.1", slots, **common))
        queue.append(
            jobqueue.QueuedJob(job, priority=priority, order=float(j), scheduled=scheduled)
        )
    containers: dict[str, int] = dict.fromkeys(ids, 0)
    for alloc in running:
        containers[alloc.containers[0][0]] += 1
    agents = [
        scheduler.AgentView(a, free_slots=tuple(free[a]), num_containers=containers[a]) for a in ids
    ]
    return agents, running, pending, queue


def median_ms(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU (this thread) milliseconds; CPU time shows what a pass
    costs when the machine is shared and the wall clock also counts waiting for a core."""
    wall, cpu = [], []
    for _ in range(runs):
        began, began_cpu = time.perf_counter(), time.thread_time()
        fn()
        wall.append((time.perf_counter() - began) * 1000)
        cpu.append((time.thread_time() - began_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=10_000)
    args = p.parse_args()

    agents, running, pending, queue = workload(args.agents, args.jobs)
    used = sum(a.slots for a in running)
    print(
        f"{args.agents} agents x {SLOTS_PER_AGENT} slots ({used} in use by {len(running)}"
        f" allocations), {len(pending)} pending requests; median of {args.runs} runs\n"
    )

    rows: list[tuple[str, tuple[float, float], float, str]] = []
    policies = {
        "pass: priority, best fit": scheduler.PoolPolicy(),
        "pass: priority, worst fit": scheduler.PoolPolicy(fitting_policy="worst"),
        "pass: priority + preemption": scheduler.PoolPolicy(preemption=True),
        "pass: fair share": scheduler.PoolPolicy(scheduler="fair_share"),
    }
    for name, policy in policies.items():
        decision = scheduler.decide(policy, agents, running, pending)
        one_pass = functools.partial(scheduler.decide, policy, agents, running, pending)
        timing = median_ms(one_pass, args.runs)
        detail = f"{len(decision.placements)} placed, {len(decision.preemptions)} preempted"
        rows.append((name, timing, PASS_TARGET_MS, detail))

    pools = (PoolConfig("default"),)
    last, middle = queue[-1].job_id, queue[len(queue) // 2].job_id
    queue_ops: dict[str, Callable[[], object]] = {
        "queue: ahead_of": lambda: jobqueue.ahead_of(queue, last, middle),
        "queue: behind_of": lambda: jobqueue.behind_of(queue, last, middle),
        "queue: update batch (1 move)": lambda: jobqueue.apply_updates(
            queue, [jobqueue.JobUpdate(last, ahead_of=middle)], pools
        ),
        "queue: det job list rows": lambda: jobqueue.queue_rows(
            queue, resource_pool="default", scheduler="priority"
        ),
    }
    for name, op in queue_ops.items():
        rows.append((name, median_ms(op, args.runs), QUEUE_TARGET_MS, f"{len(queue)} jobs"))

    width = max(len(r[0]) for r in rows)
    print(f"{'operation':<{width}}  {'median ms':>9}  {'cpu ms':>6}  {'target ms':>9}  ok   detail")
    print(f"{'-' * width}  {'-' * 9}  {'-' * 6}  {'-' * 9}  ---  {'-' * 24}")
    missed = 0
    for name, (ms, cpu), target, detail in rows:
        ok = ms < target
        missed += not ok
        print(
            f"{name:<{width}}  {ms:9.1f}  {cpu:6.1f}  {target:9.0f}  {'yes' if ok else 'NO':<3}"
            f"  {detail}"
        )
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        print(
            f"\nnote: load average {load:.1f} on {cores} cores; wall-clock times include"
            " waiting for a core (cpu ms is this thread's own time)"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
