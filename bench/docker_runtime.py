"""What running a task in Docker costs, beside the process runtime.

Two tables, medians over several runs:

1. The runtime alone (no master): from ``start()`` to the first line the command prints
   (start-to-first-user-line), to its exit being reported, and to the container being
   cleaned up; for a command that prints one line and exits. Rows: the process runtime,
   the Docker runtime with the default image (harness installed), and with the base image
   (harness mounted from this host).
2. A whole trial on a real master and agent: from CreateExperiment to the first line of
   user code and to COMPLETED, for a no-op experiment, per runtime. The difference is the
   per-task overhead of the Docker runtime.

Needs a Docker engine and the images (scripts/docker/install.sh, build-images.sh).

    python bench/docker_runtime.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from determined.api.gen import v1
from determined.common import client, context
from pydet.agent.docker_runtime import DockerRuntime
from pydet.agent.process_runtime import ProcessRuntime
from pydet.agent.runtime import ContainerSpec, Event, Exited, Output, Runtime, StartOrder
from pydet.agent.slots import artificial
from tests.cluster import Cluster

BASE_IMAGE = "pydet-base:trixie"
CONFIG = """
entrypoint: python3 noop.py
searcher: {name: single, metric: x, max_length: 1}
max_restarts: 0
"""


async def runtime_run(
    runtime: Runtime, n: int, image: str, work: pathlib.Path
) -> tuple[float, float, float]:
    first: float | None = None
    exited: float | None = None
    done = asyncio.Event()

    def sink(event: Event) -> None:
        nonlocal first, exited
        now = time.perf_counter()
        if isinstance(event, Output) and first is None:
            first = now
        if isinstance(event, Exited):
            exited = now
            done.set()

    order = StartOrder(
        container_id=f"bench-{n}",
        allocation_id="bench",
        task_id="bench",
        argv=("python3", "-c", "print('user code running', flush=True)"),
        env={},
        slot_ids=("0",),
        spec=ContainerSpec(image=image),
    )
    began = time.perf_counter()
    await runtime.start(order, sink)
    await done.wait()
    # The Docker runtime removes the container, then its working directory, right after
    # reporting the exit; the process runtime leaves the directory for the next start.
    workdir = work / order.container_id
    while runtime.name == "docker" and workdir.exists():
        await asyncio.sleep(0.001)
    cleaned = time.perf_counter()
    assert first is not None and exited is not None
    return first - began, exited - began, cleaned - began


async def runtime_table(runs: int, work: pathlib.Path) -> list[tuple[str, list[float]]]:
    slots = artificial(1)
    rows: list[tuple[str, list[float]]] = []
    process = ProcessRuntime(
        work_dir=work / "process", agent_id="bench", master="127.0.0.1:1", slots=slots
    )
    docker = await DockerRuntime.connect(
        agent_id="bench", master="127.0.0.1:1", work_dir=work / "docker", slots=slots
    )
    try:
        for label, runtime, image, where in (
            ("process", process, "", work / "process"),
            ("docker, default image", docker, "", work / "docker"),
            ("docker, harness mounted", docker, BASE_IMAGE, work / "docker"),
        ):
            # The first run warms caches (image layers, page cache).
            await runtime_run(runtime, 0, image, where)
            results = [await runtime_run(runtime, i + 1, image, where) for i in range(runs)]
            rows.append((label, [statistics.median(r[k] for r in results) for k in range(3)]))
    finally:
        await process.close()
        await docker.close()
    return rows


async def trial_run(address: str, token: str, ctx: bytes) -> tuple[float, float]:
    async with client.session(address, token=token) as s:
        began = time.time()
        resp = await s.call(
            s.stub.create_experiment(
                v1.CreateExperimentRequest(config=CONFIG, context=ctx, activate=True)
            )
        )
        assert resp.experiment is not None
        exp_id = resp.experiment.id
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
        first_line = None
        async for batch in s.stub.trial_logs(v1.TrialLogsRequest(trial_id=trials.trials[0].id)):
            for line in batch.logs:
                if "user code running" in line.message:
                    first_line = line.timestamp
        assert first_line is not None
        return first_line - began, done - began


def trial_table(runs: int, root: pathlib.Path) -> list[tuple[str, list[float]]]:
    (root / "ctx").mkdir()
    (root / "ctx" / "noop.py").write_text("print('user code running', flush=True)\n")
    ctx = context.pack_context(root / "ctx")
    rows = []
    for runtime in ("process", "docker"):
        cluster = Cluster(root / runtime)
        cluster.root.mkdir()
        try:
            cluster.start_master()
            cluster.start_agent(f"bench-{runtime}", slots=1, runtime=runtime)
            asyncio.run(trial_run(cluster.address, cluster.token, ctx))  # warm-up
            results = [
                asyncio.run(trial_run(cluster.address, cluster.token, ctx)) for _ in range(runs)
            ]
        finally:
            cluster.close()
        rows.append((runtime, [statistics.median(r[k] for r in results) for k in range(2)]))
    return rows


def table(title: str, columns: list[str], rows: list[tuple[str, list[float]]]) -> None:
    width = max(len(r[0]) for r in rows)
    cols = [max(12, len(c)) for c in columns]
    print(title)
    print(" | ".join([" " * width, *(c.rjust(w) for c, w in zip(columns, cols, strict=True))]))
    print("-+-".join(["-" * width, *("-" * w for w in cols)]))
    base = rows[0][1]
    for label, values in rows:
        cells = [f"{v * 1000:.0f} ms".rjust(w) for v, w in zip(values, cols, strict=True)]
        print(" | ".join([label.ljust(width), *cells]))
    for label, values in rows[1:]:
        extra = ", ".join(f"+{(v - b) * 1000:.0f} ms" for v, b in zip(values, base, strict=True))
        print(f"  {label} over {rows[0][0]}: {extra}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        rows = asyncio.run(runtime_table(args.runs, root / "runtime"))
        table(
            f"runtime alone: start() -> (median of {args.runs})",
            ["first line", "exit reported", "cleaned up"],
            rows,
        )
        (root / "trials").mkdir()
        rows = trial_table(args.runs, root / "trials")
        table(
            f"whole trial, no-op: CreateExperiment -> (median of {args.runs})",
            ["first line", "COMPLETED"],
            rows,
        )


if __name__ == "__main__":
    main()
