"""What the Core API and the launchers cost, on a real local cluster.

Prints one table:

1. ``report_training_metrics`` calls per second from one trial (it reports N small dicts as
   fast as it can and times itself), and the time from its last call until the master has
   stored every report: this process polls ``GetTrialMetrics`` for the last step (batches
   are shipped one after another and each is stored in one transaction, so the last step
   stored means all are), then checks that all N rows are in the master's database.
2. ``core_context.distributed.allgather`` (through the master) at 2, 4 and 8 ranks beside
   ``torch.distributed.all_gather_object`` over gloo, timed in the same worker processes of
   one trial per size (a hand-written launcher, one process per slot, on an agent with 8
   slots), in alternating blocks of 25 calls. The ratio is the median over block pairs of
   core's block median / gloo's, so both sides of each pair ran under the same conditions.
3. ``checkpoint.store_path`` of 1 GiB (including metadata and the report to the master)
   beside ``shutil.copyfile`` of a 1 GiB file on the same filesystem, in one trial.
4. A 2-rank gloo DDP job under ``python3 -m determined.launch.torch_distributed`` vs plain
   ``torchrun`` with the same flags; the launcher runs directly in a fake single-container
   task environment, so the cluster's own startup time is not counted.

The master and the agent run at their default log level (info), not at the tests' debug.
Wall-clock numbers depend on what else the machine is doing: the load average is printed
with the table, and the metrics rate is also given per CPU-second of the trial process.

    python3 bench/core_api.py [--metrics 100000] [--rounds 200] [--reps 5] [--launch-runs 3]
                              [--only metrics,allgather,checkpoint,launcher]

The programs the trials run are in ``bench/_workloads/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import resource
import shlex
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from determined.api.gen import v1  # noqa: E402
from determined.common import client, context  # noqa: E402
from tests.cluster import Cluster  # noqa: E402

if TYPE_CHECKING:
    from tests.netns import Host

WORKLOADS = ROOT / "bench" / "_workloads"
PY = sys.executable
MIB = 1024 * 1024
AGENT_SLOTS = 8
ALLGATHER_SIZES = (2, 4, 8)
SECTIONS = ("metrics", "allgather", "checkpoint", "launcher")


class BenchCluster(Cluster):
    """The tests' cluster, with the master and agent at their default log level (info).

    The tests run both at debug, where h2 and hpack log every frame the master handles.
    """

    def _spawn(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        on: Host | None = None,
    ) -> subprocess.Popen[bytes]:
        if "--log-level" in argv:
            i = argv.index("--log-level")
            argv = argv[:i] + argv[i + 2 :]
        return super()._spawn(name, argv, env, on)


def config(entrypoint: str, *, slots: int = 1, storage: pathlib.Path | None = None) -> str:
    cfg: dict[str, Any] = {
        "name": "bench-core-api",
        "entrypoint": entrypoint,
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "max_restarts": 0,
        "resources": {"slots_per_trial": slots},
    }
    if storage is not None:
        cfg["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(storage)}
    return json.dumps(cfg)  # JSON is YAML


def command(*words: str | int | pathlib.Path) -> str:
    return " ".join(shlex.quote(str(w)) for w in words)


class Bench:
    """Runs the benchmark experiments on one cluster through the API."""

    def __init__(self, cluster: Cluster, ctx: bytes) -> None:
        self.cluster = cluster
        self.ctx = ctx

    async def create(self, s: client.Session, cfg: str) -> tuple[int, int]:
        resp = await s.call(
            s.stub.create_experiment(
                v1.CreateExperimentRequest(config=cfg, context=self.ctx, activate=True)
            )
        )
        assert resp.experiment is not None
        exp_id = resp.experiment.id
        while True:
            trials = await s.call(
                s.stub.get_experiment_trials(v1.GetExperimentTrialsRequest(experiment_id=exp_id))
            )
            if trials.trials:
                return exp_id, trials.trials[0].id
            await asyncio.sleep(0.02)

    async def wait_completed(self, s: client.Session, exp_id: int, trial_id: int) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            exp = await s.call(s.stub.get_experiment(v1.GetExperimentRequest(experiment_id=exp_id)))
            assert exp.experiment is not None
            state = exp.experiment.state
            if state == v1.State.COMPLETED:
                return
            if state in (v1.State.ERROR, v1.State.CANCELED):
                raise RuntimeError(
                    f"experiment {exp_id} ended {state.name}:\n{await self.logs(s, trial_id)}"
                )
            await asyncio.sleep(0.1)
        raise RuntimeError(f"experiment {exp_id} did not finish:\n{await self.logs(s, trial_id)}")

    async def logs(self, s: client.Session, trial_id: int) -> str:
        lines = []
        async for batch in s.stub.trial_logs(v1.TrialLogsRequest(trial_id=trial_id)):
            lines += [line.message.rstrip("\n") for line in batch.logs]
        return "\n".join(lines[-60:])

    def run(self, cfg: str) -> None:
        async def go() -> None:
            async with client.session(self.cluster.address, token=self.cluster.token) as s:
                exp_id, trial_id = await self.create(s, cfg)
                await self.wait_completed(s, exp_id, trial_id)

        asyncio.run(go())

    # 1. metrics ------------------------------------------------------------------------------

    def metrics(self, n: int, out: pathlib.Path) -> dict[str, float]:
        out.mkdir()
        cfg = config(command(PY, "metrics_trial.py", n, out))

        async def go() -> dict[str, float]:
            async with client.session(self.cluster.address, token=self.cluster.token) as s:
                master_cpu = self.master_cpu()
                exp_id, trial_id = await self.create(s, cfg)
                calls_file = out / "metrics_calls.json"
                # Stay off the master while the trial reports; then poll it for the last step.
                while not calls_file.exists():
                    await asyncio.sleep(0.002)
                last = v1.GetTrialMetricsRequest(trial_id=trial_id, after_steps=n - 1, limit=1)
                while not (await s.call(s.stub.get_trial_metrics(last))).reports:
                    await asyncio.sleep(0.002)
                stored_at = time.time()
                master_cpu = self.master_cpu() - master_cpu
                await self.wait_completed(s, exp_id, trial_id)
                calls = json.loads(calls_file.read_text())
                closed = json.loads((out / "metrics_closed.json").read_text())
                stored = self.stored_steps(trial_id)
                if stored != (n, n, 1, n):
                    raise RuntimeError(
                        f"the master stored (rows, distinct steps, min, max) = {stored} for "
                        f"{n} reports of steps 1..{n}"
                    )
                return {
                    "rate": calls["rate"],
                    "cpu_rate": n / calls["cpu_seconds"],
                    "seconds": calls["seconds"],
                    "stored_after": stored_at - calls["last_call"],
                    "closed_after": closed["closed"] - calls["last_call"],
                    "stored": n,
                    "master_cpu": master_cpu,
                }

        return asyncio.run(go())

    def master_cpu(self) -> float:
        """CPU seconds the master process has used so far."""
        assert self.cluster.master is not None
        fields = pathlib.Path(f"/proc/{self.cluster.master.pid}/stat").read_text().split(")")[-1]
        utime, stime = fields.split()[11:13]
        return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")

    def stored_steps(self, trial_id: int) -> tuple[int, ...]:
        """(rows, distinct steps, min step, max step) of the trial's training metrics, read
        from the master's database (paging 100,000 rows through the API would cost more
        than the rest of the benchmark)."""
        db = self.cluster.root / "master" / "pydet.db"
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            row = conn.execute(
                "SELECT COUNT(*), COUNT(DISTINCT steps_completed), MIN(steps_completed),"
                " MAX(steps_completed) FROM metrics WHERE trial_id = ? AND grp = 'training'",
                (trial_id,),
            ).fetchone()
        return tuple(int(v or 0) for v in row)

    # 2. allgather ----------------------------------------------------------------------------

    def allgather(self, size: int, rounds: int, out: pathlib.Path) -> dict[str, float]:
        out.mkdir(exist_ok=True)
        self.run(config(command(PY, "allgather_launcher.py", rounds, out), slots=size))
        data = json.loads((out / f"allgather_{size}.json").read_text())
        block = int(data["block"])
        result: dict[str, float] = {}
        for name in ("core", "gloo"):
            samples = [t for rank in data["ranks"] for t in rank[name]]
            result[name] = statistics.median(samples)
            result[f"{name}_p90"] = statistics.quantiles(samples, n=10)[-1]
        ratios = []
        for start in range(0, len(data["ranks"][0]["core"]), block):
            core = [t for rank in data["ranks"] for t in rank["core"][start : start + block]]
            gloo = [t for rank in data["ranks"] for t in rank["gloo"][start : start + block]]
            ratios.append(statistics.median(core) / statistics.median(gloo))
        result["ratio"] = statistics.median(ratios)
        # CPU time per call of one rank's process (all its threads), mean over ranks.
        result["core_cpu"] = statistics.mean(rank["cpu"][0] for rank in data["ranks"])
        result["gloo_cpu"] = statistics.mean(rank["cpu"][1] for rank in data["ranks"])
        return result

    # 3. checkpoint ---------------------------------------------------------------------------

    def checkpoint(self, reps: int, out: pathlib.Path, root: pathlib.Path) -> dict[str, float]:
        out.mkdir(exist_ok=True)
        storage, scratch = root / "checkpoints", root / "scratch"
        self.run(config(command(PY, "checkpoint_trial.py", reps, out, scratch), storage=storage))
        data = json.loads((out / "checkpoint.json").read_text())
        mib = data["bytes"] / MIB
        overheads = [s - w for s, w in zip(data["store_path"], data["writing"], strict=True)]
        return {
            "store": mib / statistics.median(data["store_path"]),
            "copy": mib / statistics.median(data["copyfile"]),
            "overhead": statistics.median(overheads),
        }


# 4. launcher --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launcher_overhead(runs: int) -> dict[str, float]:
    script = str(WORKLOADS / "ddp_allreduce.py")
    base = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    fake_task = {
        **base,
        "DET_ALLOCATION_ID": "bench.1",
        "DET_SLOT_IDS": json.dumps([0, 1]),
        "DET_CONTAINER_ADDRS": json.dumps(["127.0.0.1"]),
        "DET_CONTAINER_RANK": "0",
    }

    def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
        """Wall seconds, and CPU seconds of the whole process tree (each waits for its own
        children, so their time is added to the child's)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        took = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            raise RuntimeError(f"{argv} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        return took, cpu

    def ours() -> tuple[float, float]:
        return timed([PY, "-m", "determined.launch.torch_distributed", PY, script], fake_task)

    def torchrun() -> tuple[float, float]:
        # The flags our launcher passes for one container with two slots.
        argv = [PY, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                "--node_rank", "0", "--master_addr", "127.0.0.1", "--master_port",
                str(free_port()), script]  # fmt: skip
        return timed(argv, base)

    fns: dict[str, Callable[[], tuple[float, float]]] = {"ours": ours, "torchrun": torchrun}
    times: dict[str, list[tuple[float, float]]] = {"ours": [], "torchrun": []}
    # Alternating order; the median drops a first run slowed by a cold page cache.
    for i in range(runs):
        for name in ("torchrun", "ours") if i % 2 == 0 else ("ours", "torchrun"):
            times[name].append(fns[name]())
    out = {}
    for name, samples in times.items():
        out[name] = statistics.median(wall for wall, _ in samples)
        out[f"{name}_cpu"] = statistics.median(cpu for _, cpu in samples)
    return out


# the table ------------------------------------------------------------------------------------


def table(rows: list[tuple[str, str, str, str]]) -> str:
    heads = ("measure", "value", "target", "met")
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(4)]

    def line(cells: tuple[str, ...]) -> str:
        return " | ".join(
            c.rjust(w) if i == 1 else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(heads), "-+-".join("-" * w for w in widths), *map(line, rows)])


def yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def parse_with_only(
    parser: argparse.ArgumentParser, sections: tuple[str, ...]
) -> tuple[argparse.Namespace, set[str]]:
    """Parse the command line with ``--only`` (a comma-separated subset of ``sections``,
    default all): the arguments and the sections chosen."""
    parser.add_argument(
        "--only",
        default=",".join(sections),
        help=f"a comma-separated subset of {','.join(sections)}",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not only <= set(sections):
        parser.error(f"--only takes a comma-separated subset of {','.join(sections)}")
    return args, only


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", type=int, default=100_000, help="metric reports to send")
    parser.add_argument("--rounds", type=int, default=200, help="timed allgathers per method")
    parser.add_argument("--reps", type=int, default=5, help="1 GiB checkpoints (and copies)")
    parser.add_argument("--launch-runs", type=int, default=3, help="runs of each launcher")
    args, only = parse_with_only(parser, SECTIONS)

    began = time.monotonic()
    loads = [os.getloadavg()[0]]
    m: dict[str, float] = {}
    gathers: dict[int, dict[str, float]] = {}
    c: dict[str, float] = {}
    launch: dict[str, float] = {}
    if only & {"metrics", "allgather", "checkpoint"}:
        with tempfile.TemporaryDirectory(prefix="pydet-bench-") as tmp:
            root = pathlib.Path(tmp)
            cluster = BenchCluster(root)
            try:
                cluster.start_master()
                cluster.start_agent("agent-0", slots=AGENT_SLOTS)
                bench = Bench(cluster, context.pack_context(WORKLOADS))
                if "metrics" in only:
                    m = bench.metrics(args.metrics, root / "metrics")
                    loads.append(os.getloadavg()[0])
                if "allgather" in only:
                    for n in ALLGATHER_SIZES:
                        gathers[n] = bench.allgather(n, args.rounds, root / "allgather")
                    loads.append(os.getloadavg()[0])
                if "checkpoint" in only:
                    c = bench.checkpoint(args.reps, root / "checkpoint", root)
                    loads.append(os.getloadavg()[0])
            except BaseException:
                print(cluster.dump_logs(), file=sys.stderr)
                raise
            finally:
                cluster.close()
    if "launcher" in only:
        launch = launcher_overhead(args.launch_runs)
        loads.append(os.getloadavg()[0])
    total = time.monotonic() - began

    rows: list[tuple[str, str, str, str]] = []
    if m:
        rows += [
            (
                "report_training_metrics calls/s, 1 trial (wall clock)",
                f"{m['rate']:,.0f}/s",
                ">= 20,000/s",
                yes(m["rate"] >= 20_000),
            ),
            ("  same, per CPU-second of the trial process", f"{m['cpu_rate']:,.0f}/s", "", ""),
            (
                f"  last call -> all {m['stored']:,.0f} stored (API poll)",
                f"{m['stored_after']:.2f} s",
                "",
                "",
            ),
            ("  last call -> core.Context.close() returned", f"{m['closed_after']:.2f} s", "", ""),
            (
                "  master ingest rate, first call -> all stored",
                f"{m['stored'] / (m['seconds'] + m['stored_after']):,.0f}/s",
                "",
                "",
            ),
            (
                "  master CPU per report (incl. trial start/exit)",
                f"{m['master_cpu'] / m['stored'] * 1e6:.0f} us",
                "",
                "",
            ),
        ]
    for n, g in gathers.items():
        rows += [
            (
                f"allgather {n} ranks: core (master gRPC), median (p90)",
                f"{g['core'] * 1e3:.2f} ms ({g['core_p90'] * 1e3:.1f})",
                "",
                "",
            ),
            (
                f"allgather {n} ranks: gloo all_gather_object, median (p90)",
                f"{g['gloo'] * 1e3:.2f} ms ({g['gloo_p90'] * 1e3:.1f})",
                "",
                "",
            ),
            (
                f"allgather {n} ranks: CPU per call and rank, core / gloo",
                f"{g['core_cpu'] * 1e3:.2f} / {g['gloo_cpu'] * 1e3:.2f} ms",
                "",
                "",
            ),
            (
                f"allgather {n} ranks: core / gloo",
                f"{g['ratio']:.1f}x",
                "<= 3x",
                yes(g["ratio"] <= 3),
            ),
        ]
    if c:
        rows += [
            ("checkpoint store_path 1 GiB (incl. report)", f"{c['store']:,.0f} MiB/s", "", ""),
            (
                "  store_path time beyond the writes (metadata, report)",
                f"{c['overhead'] * 1e3:.0f} ms",
                "",
                "",
            ),
            ("shutil.copyfile 1 GiB, same filesystem", f"{c['copy']:,.0f} MiB/s", "", ""),
            (
                "checkpoint / copy",
                f"{c['store'] / c['copy']:.0%}",
                ">= 80%",
                yes(c["store"] >= 0.8 * c["copy"]),
            ),
        ]
    if launch:
        overhead = launch["ours"] - launch["torchrun"]
        rows += [
            (
                "2-rank DDP job: torchrun, median wall (CPU)",
                f"{launch['torchrun']:.2f} s ({launch['torchrun_cpu']:.2f})",
                "",
                "",
            ),
            (
                "2-rank DDP job: launch.torch_distributed, median wall (CPU)",
                f"{launch['ours']:.2f} s ({launch['ours_cpu']:.2f})",
                "",
                "",
            ),
            (
                "launcher overhead, wall (CPU) (run directly, fake 1-container task)",
                f"{overhead:+.2f} s ({launch['ours_cpu'] - launch['torchrun_cpu']:+.2f})",
                "< 1 s",
                yes(overhead < 1.0),
            ),
        ]
    print(table(rows))
    print(
        f"(1 master + 1 agent with {AGENT_SLOTS} slots, process runtime, log level info; "
        f"{os.cpu_count()} CPUs, load average {' -> '.join(f'{x:.1f}' for x in loads)}; "
        f"{args.metrics:,} metric reports; {args.rounds} timed allgathers per method and size "
        f"per rank, medians over all ranks' calls; median of {args.reps} checkpoints and "
        f"copies; median of {args.launch_runs} runs per launcher; {total:.0f} s in all)"
    )


if __name__ == "__main__":
    main()
