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
import json
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
from tests.cluster import Cluster, wait_until
from tests.notebooks import run_in_kernel

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


def notebook_start(cluster: Cluster) -> float:
    """`det notebook start --no-browser` to its exit (JupyterLab answering through the
    proxy); the notebook is killed afterwards."""
    began = time.perf_counter()
    nb_id = start_notebook(cluster)
    took = time.perf_counter() - began
    det(cluster, "notebook", "kill", nb_id)
    return took


def start_notebook(cluster: Cluster) -> str:
    """A new notebook's id, once JupyterLab answers through the proxy."""
    out = subprocess.run(
        [sys.executable, "-m", "pydet.cli", "notebook", "start", "--no-browser"],
        env=cluster.env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split("(id: ", 1)[1].split(",", 1)[0]


def download_seconds(url: str, headers: dict[str, str]) -> float:
    import urllib.request

    began = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
        while r.read(1 << 20):
            pass
    return time.perf_counter() - began


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def notebook_download(cluster: Cluster) -> tuple[float, float, float]:
    """Seconds to download 100 MB that a notebook's kernel wrote, through the master's proxy
    and straight from JupyterLab (with its token, which only the master knows), and the
    master's CPU seconds per proxied download."""
    nb_id = start_notebook(cluster)
    code = "import os; open('big.bin', 'wb').write(os.urandom(100 << 20))"
    asyncio.run(run_in_kernel(cluster, nb_id, code, cluster.token))
    ((address, extra),) = cluster.sql(
        "SELECT proxy_address, extra FROM generic_tasks WHERE id = ?", (nb_id,)
    )
    token = json.loads(extra)["proxy_headers"]
    path = f"/proxy/{nb_id}/files/big.bin"
    bearer = {"Authorization": f"Bearer {cluster.token}"}
    download_seconds(f"{cluster.url}{path}", bearer)
    assert cluster.master is not None
    before = cpu_seconds(cluster.master.pid)
    proxied = min(download_seconds(f"{cluster.url}{path}", bearer) for _ in range(3))
    master_cpu = (cpu_seconds(cluster.master.pid) - before) / 3
    direct = min(download_seconds(f"http://{address}{path}", dict(token)) for _ in range(3))
    det(cluster, "notebook", "kill", nb_id)
    return proxied, direct, master_cpu


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
            shell_id = subprocess.run(
                [sys.executable, "-m", "pydet.cli", "shell", "start", "-d"],
                env=cluster.env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            wait_until(  # its sshd is up
                lambda: (
                    subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "pydet.cli",
                            "shell",
                            "open",
                            shell_id,
                            "--",
                            "true",
                        ],
                        env=cluster.env,
                        capture_output=True,
                    ).returncode
                    == 0
                ),
                120,
                "the shell's sshd",
            )
            shell = median_seconds(
                lambda: det(cluster, "shell", "open", shell_id, "--", "true"), args.runs
            )
            det(cluster, "shell", "kill", shell_id)
            notebook_start(cluster)  # warm
            notebook = statistics.median(notebook_start(cluster) for _ in range(3))
            proxied, direct, master_cpu = notebook_download(cluster)
        finally:
            cluster.close()
    rows += [
        ("`det cmd run true` to exit", f"{cmd:.3f} s", "<= 0.5 s", DETERMINED_CONTAINER),
        ("  of which the CLI's start (`det cmd run --help`)", f"{cli:.3f} s", "", ""),
        ("  LaunchCommand -> end of its log stream (API)", f"{api:.3f} s", "", ""),
        ("`det shell open ID -- true`", f"{shell:.3f} s", "<= 1.5 s", ""),
        (
            "`det notebook start` to JupyterLab answering (process runtime)",
            f"{notebook:.3f} s",
            "<= 5 s",
            DETERMINED_CONTAINER,
        ),
        (
            "100 MB from a notebook through the proxy, of a direct download",
            f"{direct / proxied:.0%}",
            ">= 80 %",
            "",
        ),
        ("  through the proxy", f"{100 / proxied:.0f} MB/s", "", ""),
        ("  straight from JupyterLab", f"{100 / direct:.0f} MB/s", "", ""),
        ("  the master's CPU per 100 MB proxied", f"{master_cpu:.3f} s", "", ""),
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
