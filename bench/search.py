"""Hyperparameter search throughput: pydet beside Ray Tune, on the same workload.

The workload: N trials (200) of a tiny script that trains ``--steps`` (10) steps of
``--work-ms`` (10 ms, a sleep) each, reporting a training metric per step and one
validation metric, with concurrency equal to the slots of a local cluster (2 agents x 2
slots = 4). Two searches: random search, and ASHA with divisor 3 and three rungs (1, 3 and
10 steps) that decides once per rung (pydet's ``stop_once``, which is what Ray's ASHA does).

pydet runs on a real local cluster (a master and agents as processes; timed from the
CreateExperiment call until the experiment is COMPLETED, the cluster already up). Ray Tune
runs in this process (``ray.init`` with as many CPUs as slots, timed around
``Tuner.fit()``, Ray already started); it is an optional extra: ``pip install -e
'.[raytune]'``. Per-trial overhead is what the platform adds to a trial's own work:
``wall x concurrency / trials - mean work per trial``.

Ray Tune runs twice, each row labelled: at its fastest documented setting,
``reuse_actors=True`` (one process runs trial after trial), then at its defaults (a new
worker process per trial, as pydet); the summary compares pydet with Ray's fastest row. The
fastest row runs first, so that it never follows the defaults' minutes of process starts;
and each row waits (up to 90 s) for the machine's 1-minute load average to fall under 1.0,
so that it does not pay for the processes of the row before it.

Then pydet's per-trial overhead is broken down from the timestamps of the random search's
trials (the master's, the agent's, /proc's and the trial's own), issue 12's targets are
printed beside pydet's figures (and Ray's), with the CPU time the master, the agents and the
tasks' processes spent per trial, and the parts are timed on their own: interpreter start,
the imports, the context download. The load average is printed with the figures: on a
machine with few cores, the CPU a trial costs is what bounds the search's wall time.

    python3 bench/search.py [--trials 200] [--agents 2] [--slots 2] [--work-ms 10]
                            [--steps 10] [--only pydet,ray] [--searchers random,asha]
                            [--ray-modes reuse,default] [--profile-runs 7]
                            [--profile FILE]

``--profile-runs 0`` skips timing the parts; ``--profile FILE`` runs pydet's master under
cProfile (PYDET_MASTER_PROFILE, its event loop thread's CPU time), stops it in order to
write FILE, and prints its top functions by own and by cumulative time.

The trial script is ``bench/_search_workload/trial.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import os
import pathlib
import pstats
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabulate import tabulate  # type: ignore[import-untyped]  # noqa: E402

from determined.api.gen import v1  # noqa: E402
from determined.common import client, context  # noqa: E402
from tests.cluster import Cluster  # noqa: E402
from tests.netns import Host  # noqa: E402

WORKLOAD = ROOT / "bench" / "_search_workload"
PY = sys.executable
SEARCHERS = ("random", "asha")
PLATFORMS = ("pydet", "ray")
PYDET = "pydet (defaults: a fresh process per trial)"
RAY_DEFAULT = "Ray Tune (defaults: a new worker process per trial)"
RAY_REUSE = "Ray Tune (reuse_actors=True: one process runs many trials)"
DIVISOR = 3
RUNGS = 3
PROFILE_ENV = "PYDET_MASTER_PROFILE"
# Before each Ray row: the 1-minute load average to wait for, and for how long at most.
SETTLE_LOAD = 1.0
SETTLE_MAX_S = 90.0


@dataclass(frozen=True)
class Workload:
    trials: int
    steps: int
    work_s: float
    concurrency: int


@dataclass
class Result:
    platform: str
    searcher: str
    trials: int
    wall: float
    work: float  # mean seconds of work (sleep) per trial
    concurrency: int
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.trials / self.wall

    @property
    def overhead(self) -> float:
        return self.wall * self.concurrency / self.trials - self.work


# -- pydet ----------------------------------------------------------------------------------------


class BenchCluster(Cluster):
    """The tests' cluster at the default log level (info): at debug, which the tests use, the
    master logs every HTTP/2 frame, and that is not what a user runs.

    With ``profile_to`` set, its master runs under cProfile (PYDET_MASTER_PROFILE), and
    ``write_profile`` stops it in order so that it writes the file."""

    profile_to = ""

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
        if name == "master" and self.profile_to:
            profile = str(pathlib.Path(self.profile_to).resolve())
            env = {**(self.env if env is None else env), PROFILE_ENV: profile}
        return super()._spawn(name, argv, env, on)

    def write_profile(self) -> None:
        if self.profile_to:
            self.stop_master(signal.SIGTERM)


def pydet_config(w: Workload, searcher: str) -> str:
    search: dict[str, Any] = {
        "metric": "val_loss",
        "max_length": {"batches": w.steps},
        "max_trials": w.trials,
        "max_concurrent_trials": w.concurrency,
    }
    if searcher == "random":
        search["name"] = "random"
    else:
        search |= {
            "name": "adaptive_asha",
            "mode": "aggressive",
            "divisor": DIVISOR,
            "max_rungs": RUNGS,
            "stop_once": True,
        }
    cfg = {
        "name": f"bench-search-{searcher}",
        "entrypoint": "python3 trial.py",
        "hyperparameters": {
            "x": {"type": "double", "minval": 0.0, "maxval": 1.0},
            "work_s": w.work_s,
        },
        "searcher": search,
        "max_restarts": 0,
    }
    return json.dumps(cfg)  # JSON is YAML


async def run_pydet_search(address: str, token: str, ctx: bytes, cfg: str) -> tuple[int, float]:
    async with client.session(address, token=token) as s:
        began = time.monotonic()
        resp = await s.call(
            s.stub.create_experiment(
                v1.CreateExperimentRequest(config=cfg, context=ctx, activate=True)
            )
        )
        assert resp.experiment is not None
        exp_id = resp.experiment.id
        request = v1.GetExperimentRequest(experiment_id=exp_id)
        while True:
            exp = (await s.call(s.stub.get_experiment(request))).experiment
            assert exp is not None
            if exp.state == v1.State.COMPLETED:
                return exp_id, time.monotonic() - began
            if exp.state in (v1.State.ERROR, v1.State.CANCELED):
                raise RuntimeError(f"experiment {exp_id} ended {exp.state.name}")
            await asyncio.sleep(0.1)


def read_trials(db: pathlib.Path, exp_id: int) -> list[dict[str, Any]]:
    """Each trial with its times: the master's (created, ended), the agent's (the launcher's
    `unpacked the context` log line) and the trial's own (its last validation)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        trials = [
            dict(r)
            for r in conn.execute(
                "SELECT id, state, steps_completed, start_time, end_time FROM trials"
                " WHERE experiment_id = ? ORDER BY id",
                (exp_id,),
            )
        ]
        for t in trials:
            row = conn.execute(
                "SELECT metrics FROM metrics WHERE trial_id = ? AND grp = 'validation'"
                " ORDER BY id DESC LIMIT 1",
                (t["id"],),
            ).fetchone()
            t["times"] = json.loads(row["metrics"]) if row else {}
            row = conn.execute(
                "SELECT MIN(timestamp) AS ts FROM task_logs WHERE trial_id = ?"
                " AND message LIKE '%unpacked the context%'",
                (t["id"],),
            ).fetchone()
            t["unpacked"] = row["ts"] if row else None
            row = conn.execute(
                "SELECT message FROM task_logs WHERE trial_id = ?"
                " AND message LIKE 'bench: core closed at %' ORDER BY id DESC LIMIT 1",
                (t["id"],),
            ).fetchone()
            t["closed"] = float(row["message"].split()[-1]) if row else None
            row = conn.execute(
                "SELECT MIN(timestamp) AS ts FROM task_logs WHERE trial_id = ?"
                " AND message LIKE '%the entrypoint exited with status%'",
                (t["id"],),
            ).fetchone()
            t["exited"] = row["ts"] if row else None
            row = conn.execute(
                "SELECT start_time, end_time, containers FROM allocations WHERE trial_id = ?"
                " ORDER BY start_time LIMIT 1",
                (t["id"],),
            ).fetchone()
            t["alloc"] = (row["start_time"], row["end_time"]) if row else None
            t["slots"] = (
                tuple((c["agent_id"], *c["slot_ids"]) for c in json.loads(row["containers"]))
                if row
                else ()
            )
    return trials


def slot_handoffs(trials: list[dict[str, Any]]) -> list[float]:
    """For each allocation that ended, seconds until the next one started on its slots."""
    by_slots: dict[Any, list[tuple[float, float]]] = {}
    for t in trials:
        if t["alloc"] and t["alloc"][1] is not None:
            by_slots.setdefault(t["slots"], []).append(t["alloc"])
    gaps = []
    for allocs in by_slots.values():
        allocs.sort()
        gaps += [b[0] - a[1] for a, b in itertools.pairwise(allocs)]
    return gaps


def slot_overheads(trials: list[dict[str, Any]], work_s: float) -> list[float]:
    """Per trial: its slot's time (from its allocation's start to the next allocation's start
    on the same slots) minus its own work (steps x work per step)."""
    by_slots: dict[Any, list[dict[str, Any]]] = {}
    for t in trials:
        if t["alloc"]:
            by_slots.setdefault(t["slots"], []).append(t)
    out = []
    for ts in by_slots.values():
        ts.sort(key=lambda t: t["alloc"][0])
        for a, b in itertools.pairwise(ts):
            out.append(b["alloc"][0] - a["alloc"][0] - a["steps_completed"] * work_s)
    return out


def breakdown(trials: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """Median seconds of each stage of a trial's life, in order."""
    stages: list[tuple[str, Callable[[dict[str, Any]], float]]] = [
        (
            "master: trial created -> allocation placed (scheduling)",
            lambda t: t["alloc"][0] - t["start_time"],
        ),
        (
            "start order to the agent, agent starts the launcher (forked from its template)",
            lambda t: max(0.0, t["times"]["t_launch"] - t["alloc"][0]),
        ),
        (
            "launcher: interpreter and imports (unless forked), context download+unpack",
            lambda t: t["unpacked"] - max(t["times"]["t_launch"], t["alloc"][0]),
        ),
        (
            "launcher: startup hook check, fork (or `sh -c` and spawn) of the script",
            lambda t: t["times"]["t_proc"] - t["unpacked"],
        ),
        (
            "script: fork or interpreter start (to its first line)",
            lambda t: t["times"]["t_start"] - t["times"]["t_proc"],
        ),
        (
            "script: import determined + core.init()",
            lambda t: t["times"]["t_ready"] - t["times"]["t_start"],
        ),
        (
            "script: first searcher operation (GetCurrentSearcherOperation)",
            lambda t: t["times"]["t_op"] - t["times"]["t_ready"],
        ),
        (
            "script: its own work (the steps, reporting training metrics)",
            lambda t: t["times"]["t_done"] - t["times"]["t_op"],
        ),
        (
            "script: validation, complete op, next op, core context close",
            lambda t: t["closed"] - t["times"]["t_done"],
        ),
        (
            "script exits, the launcher sees it (its `entrypoint exited` line)",
            lambda t: t["exited"] - t["closed"],
        ),
        (
            "launcher exits, agent reports, master sees the exit (target <= 0.050)",
            lambda t: t["alloc"][1] - t["exited"],
        ),
        (
            "master: allocation ended -> trial ended (store, searcher, retention)",
            lambda t: t["end_time"] - t["alloc"][1],
        ),
    ]
    usable = [
        t
        for t in trials
        if t["unpacked"]
        and t["closed"]
        and t["exited"]
        and t["alloc"]
        and t["alloc"][1]
        and {"t_launch", "t_op", "t_done"} <= set(t["times"])
    ]
    return [(name, statistics.median(f(t) for t in usable)) for name, f in stages]


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """CPU time (user + system) of process ``pid``, or of its reaped children."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def cluster_cpu(cluster: Cluster) -> dict[str, float]:
    """CPU seconds so far of the master, the agents, and the tasks the agents ran."""
    assert cluster.master is not None
    agents = [p.pid for p in cluster.agents.values()]
    return {
        "master": cpu_seconds(cluster.master.pid),
        "agents": sum(cpu_seconds(pid) for pid in agents),
        "tasks": sum(tasks_cpu(pid) for pid in agents),
    }


def tasks_cpu(agent: int) -> float:
    """CPU seconds of the processes an agent started: its reaped children, and its living
    ones (the launcher template) with the launchers they forked and reaped."""
    total = cpu_seconds(agent, children=True)
    children = pathlib.Path(f"/proc/{agent}/task/{agent}/children").read_text().split()
    for child in map(int, children):
        try:
            total += cpu_seconds(child) + cpu_seconds(child, children=True)
        except FileNotFoundError:  # it ended since: counted among the reaped next time
            pass
    return total


def timed_runs(argv: Sequence[str], runs: int) -> float:
    """Median wall seconds of running argv."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def top_imports(module: str, n: int) -> list[tuple[str, float]]:
    """The slowest imports (cumulative) of `python3 -c "import module"` by -X importtime."""
    proc = subprocess.run(
        [PY, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True
    )
    rows = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)", line)
        if m and len(m.group(2)) <= 3:  # top-level and first-level imports only
            rows.append((m.group(3), int(m.group(1)) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:n]


def exit_seconds(code: str, runs: int) -> float:
    """Median seconds from the last line of `python3 -c code` to the process being gone:
    the interpreter's teardown."""
    times = []
    for _ in range(runs):
        script = f"{code}\nimport time\nprint(time.time(), flush=True)"
        proc = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        last = float(proc.stdout.readline())
        proc.wait()
        times.append(time.time() - last)
    return statistics.median(times)


async def context_fetch(address: str, token: str, exp_id: int, runs: int) -> float:
    async with client.session(address, token=token) as s:
        request = v1.GetExperimentContextRequest(experiment_id=exp_id)
        times = []
        for _ in range(runs):
            began = time.perf_counter()
            resp = await s.call(s.stub.get_experiment_context(request))
            with tempfile.TemporaryDirectory() as tmp:
                context.unpack_context(resp.context, tmp)
            times.append(time.perf_counter() - began)
        return statistics.median(times)


def profile(address: str, token: str, exp_id: int, runs: int) -> list[tuple[str, float]]:
    return [
        ("`python3 -c pass`", timed_runs([PY, "-c", "pass"], runs)),
        ("`python3 -S -c pass` (no site)", timed_runs([PY, "-S", "-c", "pass"], runs)),
        (
            "`python3 -c 'import determined'` (target <= 0.060)",
            timed_runs([PY, "-c", "import determined"], runs),
        ),
        (
            "`python3 -c 'import determined.exec.launch'`",
            timed_runs([PY, "-c", "import determined.exec.launch"], runs),
        ),
        (
            "`python3 -c 'import determined.core'`",
            timed_runs([PY, "-c", "import determined.core"], runs),
        ),
        (
            "`python3 -c` importing what a trial's script uses on a cluster",
            timed_runs([PY, "-c", "import determined.core._rpc, determined.core._session"], runs),
        ),
        (
            "`python3 -c 'import determined.api.gen.v1'` (the generated API)",
            timed_runs([PY, "-c", "import determined.api.gen.v1"], runs),
        ),
        (
            "interpreter exit after `import determined.core`",
            exit_seconds("import determined.core", runs),
        ),
        ("`sh -c true`", timed_runs(["sh", "-c", "true"], runs)),
        (
            "context download + unpack (in process, one session)",
            asyncio.run(context_fetch(address, token, exp_id, runs)),
        ),
    ]


def run_pydet(
    w: Workload,
    searchers: Sequence[str],
    agents: int,
    slots: int,
    profile_runs: int,
    profile_to: str = "",
) -> tuple[list[Result], list[tuple[str, float]], list[tuple[str, float]], list[Any]]:
    results: list[Result] = []
    stages: list[tuple[str, float]] = []
    parts: list[tuple[str, float]] = []
    imports: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="pydet-bench-search-") as tmp:
        cluster = BenchCluster(pathlib.Path(tmp))
        cluster.profile_to = profile_to
        try:
            began = time.monotonic()
            cluster.start_master()
            for i in range(agents):
                cluster.start_agent(f"agent-{i}", slots)
            startup = time.monotonic() - began
            ctx = context.pack_context(WORKLOAD)
            exp_ids = {}
            for searcher in searchers:
                cpu_before = cluster_cpu(cluster)
                exp_id, wall = asyncio.run(
                    run_pydet_search(cluster.address, cluster.token, ctx, pydet_config(w, searcher))
                )
                time.sleep(0.5)  # the last tasks' processes are reaped
                cpu_after = cluster_cpu(cluster)
                exp_ids[searcher] = exp_id
                trials = read_trials(cluster.root / "master" / "pydet.db", exp_id)
                states = {t["state"] for t in trials}
                if len(trials) != w.trials or states != {"COMPLETED"}:
                    raise RuntimeError(f"{searcher}: {len(trials)} trials, states {states}")
                work = statistics.mean(t["steps_completed"] for t in trials) * w.work_s
                cpu = {k: (cpu_after[k] - cpu_before[k]) / len(trials) for k in cpu_after}
                results.append(
                    Result(
                        PYDET,
                        searcher,
                        len(trials),
                        wall,
                        work,
                        w.concurrency,
                        note=f"cluster up in {startup:.1f}s (not counted)",
                        extra={
                            "cpu": cpu,
                            "overheads": slot_overheads(trials, w.work_s),
                            "handoffs": slot_handoffs(trials),
                            "first_line": [
                                t["times"]["t_start"] - t["start_time"]
                                for t in trials
                                if "t_start" in t["times"]
                            ],
                        },
                    )
                )
                if searcher == "random":
                    stages = breakdown(trials)
                print(f"pydet {searcher}: {wall:.1f}s", file=sys.stderr, flush=True)
            any_exp = next(iter(exp_ids.values()))
            if profile_runs > 0:
                parts = profile(cluster.address, cluster.token, any_exp, profile_runs)
                imports = top_imports("determined.exec.launch", 8)
            cluster.write_profile()
        except BaseException:
            print(cluster.dump_logs(), file=sys.stderr)
            raise
        finally:
            cluster.close()
    return results, stages, parts, imports


# -- Ray Tune -----------------------------------------------------------------------------------


def ray_trainable(config: dict[str, Any]) -> None:
    """The trial of bench/_search_workload/trial.py as a Ray Tune function trainable: a
    report per step (Ray's ASHA reads its metric from each), the validation with the last."""
    from ray import tune

    x, work_s, steps = float(config["x"]), float(config["work_s"]), int(config["steps"])
    for step in range(1, steps + 1):
        time.sleep(work_s)
        metrics = {"loss": x / step}
        if step == steps:
            metrics["val_loss"] = x
        tune.report(metrics)


def run_ray(w: Workload, searchers: Sequence[str], *, reuse_actors: bool) -> list[Result] | str:
    # Tune's console output would bury the table; results are read from the ResultGrid.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    try:
        import ray
        from ray import tune
        from ray.tune.schedulers import ASHAScheduler
    except ImportError:
        return (
            "Ray Tune is not installed, so only pydet ran. Install the optional extra with "
            "`pip install -e '.[raytune]'` (or `pip install 'ray[tune]'`) and run again."
        )
    results = []
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # The raylet waits 30 s for its agents by default; on a busy machine they take longer.
    os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
    began = time.monotonic()
    ray.init(
        num_cpus=w.concurrency,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    startup = time.monotonic() - began
    try:
        with tempfile.TemporaryDirectory(prefix="ray-bench-search-") as tmp:
            for searcher in searchers:
                scheduler = None
                if searcher == "asha":
                    scheduler = ASHAScheduler(
                        time_attr="training_iteration",
                        max_t=w.steps,
                        grace_period=1,
                        reduction_factor=DIVISOR,
                        brackets=1,
                    )
                tuner = tune.Tuner(
                    ray_trainable,
                    param_space={
                        "x": tune.uniform(0.0, 1.0),
                        "work_s": w.work_s,
                        "steps": w.steps,
                    },
                    tune_config=tune.TuneConfig(
                        metric="loss",
                        mode="min",
                        num_samples=w.trials,
                        max_concurrent_trials=w.concurrency,
                        scheduler=scheduler,
                        reuse_actors=reuse_actors,
                    ),
                    run_config=tune.RunConfig(
                        name=f"bench-{searcher}", storage_path=tmp, verbose=0
                    ),
                )
                t0 = time.monotonic()
                grid = tuner.fit()
                wall = time.monotonic() - t0
                frame = grid.get_dataframe()
                errors = grid.num_errors
                if len(frame) != w.trials or errors:
                    raise RuntimeError(f"ray {searcher}: {len(frame)} trials, {errors} errors")
                work = float(frame["training_iteration"].mean()) * w.work_s
                results.append(
                    Result(
                        RAY_REUSE if reuse_actors else RAY_DEFAULT,
                        searcher,
                        len(frame),
                        wall,
                        work,
                        w.concurrency,
                        note=f"ray.init in {startup:.1f}s (not counted)",
                    )
                )
                print(f"ray {searcher}: {wall:.1f}s", file=sys.stderr, flush=True)
    finally:
        ray.shutdown()
    return results


# -- main -----------------------------------------------------------------------------------------


def target_rows(
    results: list[Result], stages: list[tuple[str, float]], parts: list[tuple[str, float]]
) -> list[list[str]]:
    """Each of issue 12's targets: the measure, pydet's figure, the target, Ray's, met or not."""
    rows: list[list[str]] = []

    def add(name: str, value: float | None, target: str, ok: bool | None, ray: str = "") -> None:
        figure = "n/a" if value is None else f"{value:.3f}"
        if value is None:
            verdict = "not measured"
        else:
            verdict = "" if ok is None else ("met" if ok else "NOT met")
        rows.append([name, figure, target, ray, verdict])

    by = {(r.platform, r.searcher): r for r in results}
    random = by.get((PYDET, "random"))
    if random is not None:
        first = random.extra["first_line"]
        v = statistics.median(first) if first else None
        add("create -> first user line, s (median)", v, "<= 0.25", v is not None and v <= 0.25)
    imp = dict(parts).get("`python3 -c 'import determined'` (target <= 0.060)")
    add("`python3 -c 'import determined'`, s", imp, "<= 0.060", imp is not None and imp <= 0.06)
    exit_row = [v for name, v in stages if name.startswith("launcher exits")]
    v = exit_row[0] if exit_row else None
    add("a task's exit seen by the master, s (median)", v, "<= 0.050", v is not None and v <= 0.05)
    if random is not None:
        gaps = random.extra["handoffs"]
        v = statistics.median(gaps) if gaps else None
        add(
            "trial ended -> its slot's next allocation, s (median)",
            v,
            "<= 0.010",
            v is not None and v <= 0.01,
        )
        over = random.extra["overheads"]
        v = statistics.median(over) if over else None
        ray = by.get((RAY_REUSE, "random"))
        add(
            "per-trial overhead, s (median of slot time - work)",
            v,
            "<= 0.15",
            v is not None and v <= 0.15,
            f"{ray.overhead:.3f} (mean, reuse_actors)" if ray else "",
        )
    for searcher in SEARCHERS:
        mine, fastest = by.get((PYDET, searcher)), fastest_peer(results, searcher)
        if mine and fastest:
            add(
                f"{searcher} search wall, s",
                mine.wall,
                "<= Ray Tune's fastest",
                mine.wall <= fastest.wall,
                f"{fastest.wall:.1f} ({fastest.platform.split(' (')[1].rstrip(')')})",
            )
    return rows


def fastest_peer(results: list[Result], searcher: str) -> Result | None:
    peers = [r for r in results if r.searcher == searcher and r.platform != PYDET]
    return min(peers, key=lambda r: r.wall, default=None)


def settle() -> tuple[float, float, float]:
    """Wait until the 1-minute load average is under SETTLE_LOAD, for at most SETTLE_MAX_S:
    the processes of the row before (Ray's workers and raylet, pydet's trials) may still be
    exiting. Returns the load average the next row starts at."""
    deadline = time.monotonic() + SETTLE_MAX_S
    while os.getloadavg()[0] >= SETTLE_LOAD and time.monotonic() < deadline:
        time.sleep(2)
    return os.getloadavg()


def print_profile(path: str, top: int = 30) -> None:
    """A master's cProfile (PYDET_MASTER_PROFILE): its top functions by own time, then by
    cumulative time."""
    stats = pstats.Stats(path)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


@contextlib.contextmanager
def installed_bytecode() -> Iterator[str]:
    """pydet's processes load its modules from a byte-code cache, as those of an installed
    package do (pip compiles them, as it did Ray's): where this machine says not to write
    one beside the sources (PYTHONDONTWRITEBYTECODE), under a temporary PYTHONPYCACHEPREFIX
    for the run. Yields the note printed with the workload."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        yield ""
        return
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="pydet-bench-pyc-") as cache:
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        os.environ["PYTHONPYCACHEPREFIX"] = cache
        try:
            yield (
                "; pydet's modules byte-compiled as an installed package's are (this machine "
                "sets PYTHONDONTWRITEBYTECODE: the run caches under a PYTHONPYCACHEPREFIX)"
            )
        finally:
            os.environ.clear()
            os.environ.update(saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--slots", type=int, default=2, help="slots per agent")
    parser.add_argument("--steps", type=int, default=10, help="training steps per trial")
    parser.add_argument("--work-ms", type=float, default=10.0, help="work per step (a sleep)")
    parser.add_argument("--only", default=",".join(PLATFORMS), help="pydet,ray or one")
    parser.add_argument("--searchers", default=",".join(SEARCHERS), help="random,asha or one")
    parser.add_argument(
        "--profile-runs", type=int, default=7, help="runs of each part timed alone (0: none)"
    )
    parser.add_argument("--profile", default="", help="write pydet's master's cProfile here")
    parser.add_argument(
        "--ray-modes",
        default="reuse,default",
        help="Ray Tune's rows: reuse (reuse_actors, run first) and/or default (a new process "
        "per trial)",
    )
    parser.add_argument(
        "--ray-reuse-actors",
        action="store_true",
        help="kept for old command lines: reuse_actors=True runs by default (--ray-modes)",
    )
    args = parser.parse_args()
    platforms = args.only.split(",")
    searchers = args.searchers.split(",")
    modes = args.ray_modes.split(",")
    if not set(platforms) <= set(PLATFORMS) or not set(searchers) <= set(SEARCHERS):
        parser.error("--only takes pydet and/or ray; --searchers takes random and/or asha")
    if not set(modes) <= {"default", "reuse"}:
        parser.error("--ray-modes takes default and/or reuse")
    if args.profile_runs < 0:
        parser.error("--profile-runs takes 0 (skip timing the parts) or more")
    w = Workload(args.trials, args.steps, args.work_ms / 1000, args.agents * args.slots)

    loads = [("at the start", os.getloadavg())]
    results: list[Result] = []
    stages: list[tuple[str, float]] = []
    parts: list[tuple[str, float]] = []
    imports: list[Any] = []
    ray_note = ""
    bytecode_note = ""
    if "pydet" in platforms:
        with installed_bytecode() as bytecode_note:
            pydet, stages, parts, imports = run_pydet(
                w, searchers, args.agents, args.slots, args.profile_runs, args.profile
            )
        results += pydet
        loads.append(("after pydet", os.getloadavg()))
    if "ray" in platforms:
        # Ray's fastest row first: see the module docstring.
        for reuse in sorted((m == "reuse" for m in modes), reverse=True):
            mode = "reuse_actors" if reuse else "defaults"
            loads.append((f"before Ray ({mode})", settle()))
            ray = run_ray(w, searchers, reuse_actors=reuse)
            if isinstance(ray, str):
                ray_note = ray
                break
            results += ray
            loads.append((f"after Ray ({mode})", os.getloadavg()))

    load_text = ", ".join(f"{at} {'/'.join(f'{x:.1f}' for x in load)}" for at, load in loads)
    print(
        f"\nSearch workload: {w.trials} trials x {w.steps} steps of {args.work_ms:g} ms (a sleep), "
        f"one validation each; concurrency {w.concurrency} ({args.agents} agents x "
        f"{args.slots} slots); {os.cpu_count()} CPUs; load average (1/5/15 min): "
        f"{load_text}{bytecode_note}\n"
    )
    rows = [
        [
            r.platform,
            r.searcher,
            r.trials,
            f"{r.wall:.1f}",
            f"{r.rate:.2f}",
            f"{r.work:.3f}",
            f"{r.overhead:.2f}",
            r.note,
        ]
        for r in results
    ]
    headers = [
        "Platform",
        "Search",
        "Trials",
        "Wall (s)",
        "Trials/s",
        "Work/trial (s)",
        "Overhead/trial (s)",
        "",
    ]
    print(tabulate(rows, headers=headers, tablefmt="presto", disable_numparse=True))
    by = {(r.platform, r.searcher): r for r in results}
    for s in searchers:
        p, r = by.get((PYDET, s)), fastest_peer(results, s)
        if p and r:
            ratio = max(p.wall, r.wall) / min(p.wall, r.wall)
            winner, loser = ("pydet", r.platform) if p.wall < r.wall else (r.platform, "pydet")
            print(
                f"{s}: {winner} is faster than {loser}, by {ratio:.2f}x "
                f"(pydet {p.wall:.1f} s, Ray's fastest row {r.wall:.1f} s)"
            )
    for r in results:
        if "cpu" in r.extra:
            c = r.extra["cpu"]
            print(
                f"pydet {r.searcher}: CPU seconds per trial: master {c['master']:.3f}, agents "
                f"{c['agents']:.3f}, the tasks' processes {c['tasks']:.3f}"
            )
    if results:
        print("\nissue 12's targets\n")
        headers = ["Measure", "pydet", "Target", "Ray Tune", ""]
        rows = target_rows(results, stages, parts)
        print(tabulate(rows, headers=headers, tablefmt="presto", disable_numparse=True))
    if ray_note:
        print(f"\n{ray_note}")
    if stages:
        print("\npydet: where a trial's time goes (median over the random search's trials)\n")
        total = sum(v for _, v in stages)
        rows = [[name, f"{v:.3f}", f"{v / total:.0%}"] for name, v in stages]
        rows.append(["total (a slot's time per trial)", f"{total:.3f}", ""])
        print(tabulate(rows, headers=["Stage", "Seconds", "Share"], tablefmt="presto"))
    if parts:
        print("\npydet: the parts, timed on their own (median)\n")
        rows = [[name, f"{v:.3f}"] for name, v in parts]
        print(tabulate(rows, headers=["Part", "Seconds"], tablefmt="presto"))
    if imports:
        print("\nslowest imports of `determined.exec.launch` (python -X importtime, cumulative)\n")
        rows = [[name, f"{v:.3f}"] for name, v in imports]
        print(tabulate(rows, headers=["Module", "Seconds"], tablefmt="presto"))
    if args.profile and "pydet" in platforms:
        print_profile(args.profile)


if __name__ == "__main__":
    main()
