"""What authentication costs: the same benchmarks before it existed and now, interleaved.

Runs ``bench/core_api.py --only metrics`` (report_training_metrics calls per second from one
trial, and the master's ingest rate) and ``bench/queue_live.py`` (job list and job update
latency with 1,000 queued jobs) in a git worktree of ``--baseline`` (default: the commit
before authentication was added) and in this checkout, alternating A B A B ... so that both
see the same machine load, and prints the medians side by side. Every call on the current
side carries a session or task token and is authenticated and authorized by the master.

    python bench/auth_cost.py [--baseline REV] [--rounds 3] [--metrics 100000] [--jobs 1000]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
