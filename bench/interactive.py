"""How quickly interactive work reaches the cluster: commands, notebooks and shells on a
warm local cluster (a master and one agent on the process runtime, each kind run once
before timing so that the agent's launcher template and the CLI's session are warm).

Prints one table: our median over several runs beside issue 31's target and Determined's
figure for the same (Determined starts every such task as a container, so its figure is a
container start: seconds; it is cited, not measured here). The load average is printed with
the figures, which a busy machine inflates.

    python bench/interactive.py [--runs 7]
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
from collections.abc import Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from determined.api.gen import v1
from determined.common import client
from tests.cluster import Cluster

DETERMINED_CONTAINER = "seconds (a container start)"


def median_seconds(run: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def det(cluster: Cluster, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pydet.cli", *args],
        env=cluster.env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def command_through_api(cluster: Cluster) -> None:
    """LaunchCommand, then its log stream to the end: `det cmd run true` without the CLI's
    own start."""

    async def run() -> None:
        async with client.session(cluster.address, token=cluster.token) as s:
            launched = await s.call(
                s.stub.launch_command(v1.LaunchCommandRequest(config='entrypoint: ["true"]'))
            )
            assert launched.command is not None
            request = v1.TaskLogsRequest(task_id=launched.command.id, follow=True)
            async for _ in s.stub.task_logs(request):
                pass

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(pathlib.Path(tmp))
        try:
            cluster.start_master()
            cluster.start_agent("agent-0", slots=1)
            det(cluster, "cmd", "run", "true")  # warm: the template, the session
            cmd = median_seconds(lambda: det(cluster, "cmd", "run", "true"), args.runs)
            cli = median_seconds(lambda: det(cluster, "cmd", "run", "--help"), args.runs)
            api = median_seconds(lambda: command_through_api(cluster), args.runs)
        finally:
            cluster.close()
    rows += [
        ("`det cmd run true` to exit", f"{cmd:.3f} s", "<= 0.5 s", DETERMINED_CONTAINER),
        ("  of which the CLI's start (`det cmd run --help`)", f"{cli:.3f} s", "", ""),
        ("  LaunchCommand -> end of its log stream (API)", f"{api:.3f} s", "", ""),
    ]
    widths = [
        max(len(r[i]) for r in [("measure", "pydet", "target", "Determined"), *rows])
        for i in range(4)
    ]
    header = ("measure", "pydet", "target", "Determined")
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    load_after = os.getloadavg()
    print(
        f"({args.runs} runs each, process runtime, 1 agent; {os.cpu_count()} CPUs, load average "
        f"(1/5/15 min) {'/'.join(f'{x:.1f}' for x in load_before)} before, "
        f"{'/'.join(f'{x:.1f}' for x in load_after)} after)"
    )


if __name__ == "__main__":
    main()
