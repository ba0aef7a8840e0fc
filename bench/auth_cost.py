"""What authentication costs: the same benchmarks before it existed and now, interleaved.

Runs ``bench/core_api.py --only metrics`` (report_training_metrics calls per second from one
trial, and the master's ingest rate) and ``bench/queue_live.py`` (job list and job update
latency with 1,000 queued jobs) in a git worktree of ``--baseline`` (default: the commit
before authentication was added) and in this checkout, alternating A B A B ... so that both
see the same machine load, and prints the medians side by side. Every call on the current
side carries a session or task token and is authenticated and authorized by the master.

The end-to-end rows also carry whatever else changed since the baseline, so a second
table times the door itself in process: authenticating a token and checking the RPC's rule
(against a store of --jobs experiments), per call.

    python bench/auth_cost.py [--baseline REV] [--rounds 3] [--metrics 100000] [--jobs 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The last commit without authentication.
DEFAULT_BASELINE = "b564c55~1"

# (label in the table, script, regex over its output, unit, larger is better)
MEASURES = [
    (
        "report_training_metrics calls/s",
        "core_api",
        r"report_training_metrics calls/s, 1 trial \(wall clock\)\s*\|\s*([\d,]+)/s",
        "/s",
        True,
    ),
    (
        "master ingest rate (reports/s)",
        "core_api",
        r"master ingest rate, first call -> all stored\s*\|\s*([\d,]+)/s",
        "/s",
        True,
    ),
    (
        "job list (all queued jobs)",
        "queue_live",
        r"job list with \d+ jobs \(median\)\s*\|\s*([\d.]+) ms",
        "ms",
        False,
    ),
    (
        "job update --ahead-of",
        "queue_live",
        r"job update --ahead-of \(median\)\s*\|\s*([\d.]+) ms",
        "ms",
        False,
    ),
]


def run(tree: pathlib.Path, script: str, args: argparse.Namespace) -> str:
    extra = (
        ["--only", "metrics", "--metrics", str(args.metrics)]
        if script == "core_api"
        else ["--jobs", str(args.jobs)]
    )
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'harness'}")
    proc = subprocess.run(
        [sys.executable, str(tree / "bench" / f"{script}.py"), *extra],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{script} failed in {tree}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def values(output: dict[str, str]) -> dict[str, float]:
    found = {}
    for label, script, pattern, _, _ in MEASURES:
        match = re.search(pattern, output[script])
        if match is None:
            raise SystemExit(f"no {label!r} in the output of {script}:\n{output[script]}")
        found[label] = float(match.group(1).replace(",", ""))
    return found


async def door_costs(jobs: int) -> list[tuple[str, float]]:
    """Microseconds per call of authenticate + authorize, by kind of call."""
    sys.path[:0] = [str(ROOT), str(ROOT / "harness")]
    from determined.api.gen import v1
    from pydet.master.auth import authenticator as auth
    from pydet.master.auth import rules as authz
    from pydet.master.auth.callers import TaskCaller
    from pydet.master.store.db import Database

    class OneTask:
        def task_caller(self, token: str) -> TaskCaller | None:
            if token != "task-token":
                return None
            return TaskCaller("1.1.1", "1.1", trial_id=1, experiment_id=1, start_checkpoint="")

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(pathlib.Path(tmp) / "pydet.db")
        await db.open()
        await db.execute_many(
            "INSERT INTO experiments (id, state, config, original_config, username, start_time,"
            " job_id) VALUES (?, 'ACTIVE', ?, '', 'admin', 0, ?)",
            [(i, '{"name": "x"}' * 50, f"job-{i}") for i in range(1, jobs + 1)],
        )
        authn = auth.Authenticator(db, tasks=OneTask(), agent_token="agent-token")
        await authn.bootstrap(pathlib.Path(tmp))
        password = (pathlib.Path(tmp) / auth.ADMIN_PASSWORD_FILE).read_text().strip()
        session = (await authn.login("admin", password, "127.0.0.1")).token
        lookup = authz.Lookup(db)
        job = iter(range(1, jobs + 1))

        async def call(rpc: str, token: str, message: object) -> None:
            caller = await authn.authenticate(token)
            await authz.authorize(f"/v1.Determined/{rpc}", caller, message, lookup)

        def update() -> v1.UpdateJobQueueRequest:
            nxt = f"job-{next(job)}"
            return v1.UpdateJobQueueRequest(updates=[v1.JobUpdate(job_id=nxt, priority=1)])

        cases: list[tuple[str, Callable[[], Awaitable[None]], int]] = [
            (
                "ReportTrialMetrics, task token",
                lambda: call(
                    "ReportTrialMetrics", "task-token", v1.ReportTrialMetricsRequest(trial_id=1)
                ),
                20_000,
            ),
            ("GetJobs, session", lambda: call("GetJobs", session, v1.GetJobsRequest()), 20_000),
            (
                "UpdateJobQueue, session, job not seen before",
                lambda: call("UpdateJobQueue", session, update()),
                jobs,
            ),
            (
                "UpdateJobQueue, session, same job again",
                lambda: call(
                    "UpdateJobQueue",
                    session,
                    v1.UpdateJobQueueRequest(updates=[v1.JobUpdate(job_id="job-1", priority=1)]),
                ),
                20_000,
            ),
        ]
        out = []
        for name, fn, n in cases:
            began = time.perf_counter()
            for _ in range(n):
                await fn()
            out.append((name, (time.perf_counter() - began) / n * 1e6))
        await db.close()
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--metrics", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {"before": {}, "now": {}}
    with tempfile.TemporaryDirectory(prefix="pydet-auth-bench-") as tmp:
        base = pathlib.Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline],
            check=True,
        )
        # The master serves the built WebUI from the tree it runs in.
        (base / "webui" / "dist").symlink_to(ROOT / "webui" / "dist")
        try:
            for i in range(args.rounds):
                for side, tree in (("before", base), ("now", ROOT)):
                    out = {s: run(tree, s, args) for s in ("core_api", "queue_live")}
                    for label, value in values(out).items():
                        results[side].setdefault(label, []).append(value)
                    print(f"round {i + 1}/{args.rounds} {side}: done", file=sys.stderr)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False
            )
    load = os.getloadavg()[0]
    print(
        f"Authentication cost: {args.baseline} (no authentication) vs this checkout (every call "
        f"authenticated); medians of {args.rounds} alternating rounds; "
        f"{args.metrics:,} metric reports, {args.jobs:,} queued jobs; load {load:.2f}"
    )
    print("| measure | before | now | change (+ is better) | target |")
    print("| --- | --- | --- | --- | --- |")
    for label, _, _, unit, larger_better in MEASURES:
        before = statistics.median(results["before"][label])
        now = statistics.median(results["now"][label])
        worse = (before - now) / before if larger_better else (now - before) / before
        fmt = "{:,.0f}" if unit == "/s" else "{:.1f}"
        print(
            f"| {label} | {fmt.format(before)} {unit} | {fmt.format(now)} {unit} | "
            f"{-worse:+.1%} | within 5% |"
        )
    print()
    print(f"The door itself, in process ({args.jobs:,} experiments in the store):")
    print("| call | authenticate + authorize per call |")
    print("| --- | --- |")
    for name, micros in asyncio.run(door_costs(args.jobs)):
        print(f"| {name} | {micros:.1f} us |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
