"""How long the elastic pools' decisions take: the scale decider over many large pools.

In process, no master, no cloud: 100 pools of 1,000 instances each, in mixed states
(running with a busy or an idle agent, starting, disconnected, stopping, stopped, gone,
and a few over their idle, starting or disconnect periods), each with queued work. Each row
prints the median and p95 of several runs against its target, and the script exits
non-zero if a median misses one (unless the row is informational: its time is mostly
something other than what it is about, and its detail says what).

The decider's rows time ``decide`` and ``next_deadline`` alone; the provisioner's row times
what each pool's loop does per tick too: its snapshot built from an agent table of all the
pools' agents and a task list, as in the master.

The live rows start a real master whose pool's command provider runs each instance as a
local process with its startup script (a real det-agent): the time from an experiment's
create call to the provider's launch program starting, and from the end of an idle
instance's ``max_idle_agent_period`` to the terminate program starting, over five rounds.

    python bench/elastic.py [--runs 30]

Each row is a function in ``ROWS``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import pathlib
import random
import signal
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from pydet.master.agents.table import Agent, AgentTable, Slot
from pydet.master.provisioner import decider
from pydet.master.provisioner.decider import Instance, InstanceState, Memory, Snapshot
from pydet.master.provisioner.provider import AgentSetup
from pydet.master.provisioner.provisioner import Provisioner
from pydet.master.provisioner.settings import CommandSettings, ProviderSettings
from pydet.master.tasks.task_list import TaskList, TaskRequest, UnknownJob

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


@dataclass(frozen=True)
class Pool:
    """One pool as generated: its listing, each instance's kind, and what the decider
    would have remembered of it."""

    index: int
    instances: list[tuple[Instance, str]]  # and its kind
    never: frozenset[str]
    idle_since: dict[str, float]
    gone_since: dict[str, float]
    wanted: int

    @property
    def name(self) -> str:
        return f"pool-{self.index:03d}"

    def snapshot(self) -> Snapshot:
        agents = {i.agent_id: kind != "busy" for i, kind in self.instances if _connected(kind)}
        return Snapshot.of(NOW, (i for i, _ in self.instances), agents, wanted=self.wanted)

    def memory(self) -> Memory:
        """As left by a decision on an earlier listing of the same instances: its own
        objects, equal to the snapshot's but not the same (no shortcut by identity)."""
        listed = frozenset(i.id for i, _ in self.instances if i.state in decider.LIVE)
        return Memory(listed, self.never, self.idle_since, self.gone_since)


def _connected(kind: str) -> bool:
    return kind in ("busy", "idle", "idle, over its period")


def generate(index: int, seed: int = 7) -> Pool:
    rng = random.Random(seed * 1_000 + index)
    kinds = [kind for share, kind in MIX for _ in range(round(share * INSTANCES))]
    rng.shuffle(kinds)
    instances: list[tuple[Instance, str]] = []
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
        instances.append((Instance(iid, state, launched, aid), kind))
        if kind.startswith("idle"):
            over = kind.endswith("period")
            idle_since[iid] = NOW - (rng.uniform(601.0, 900.0) if over else rng.uniform(0, 599))
        if kind.startswith("disconnected"):
            over = kind.endswith("period")
            gone_since[iid] = NOW - (rng.uniform(301.0, 400.0) if over else rng.uniform(0, 299))
    return Pool(index, instances, frozenset(never), idle_since, gone_since, rng.randint(0, 40))


def pool(index: int, seed: int = 7) -> tuple[Snapshot, Memory]:
    """One pool's snapshot and the memory the decider would have built for it."""
    generated = generate(index, seed)
    return generated.snapshot(), generated.memory()


@dataclass(frozen=True)
class Row:
    name: str
    samples_ms: list[float]
    target_ms: float
    detail: str
    # Shown against its target but not failing the run: a cost outside what the row is
    # about dominates it (the detail says which).
    informational: bool = False

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


class _Provider:
    """Never called: the row times deciding, not what is done about it."""

    async def list_instances(self) -> list[Instance]:
        raise NotImplementedError

    async def launch(self, agent_id: str, startup: str) -> Instance:
        raise NotImplementedError

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        raise NotImplementedError


SLOTS = 8  # per agent
STATIC_AGENTS = 2  # per pool: agents of the pool that are no instance's


def _agent(agent_id: str, pool_name: str, *, connected: bool, busy: bool) -> Agent:
    slots = {f"{agent_id}-{s}": Slot(f"{agent_id}-{s}", "cuda", f"{s}", "") for s in range(SLOTS)}
    if busy:  # one allocation on all its slots, as a busy agent's usually is
        for slot in slots.values():
            slot.allocation_id = f"alloc-{agent_id}"
    containers = {f"container-{agent_id}"} if busy else set()
    return Agent(
        agent_id, resource_pool=pool_name, slots=slots, connected=connected, containers=containers
    )


def provisioner_row(runs: int) -> Row:
    """The caller's side too: each pool's provisioner builds its snapshot from the master's
    agent table (all pools' agents in one table, as in the master) and its task list, then
    decides, as each tick does. Its memory is kept from one pass to the next, as the loop
    keeps it (the terminations decided in the first pass are retried in the next)."""
    pools = [generate(i) for i in range(POOLS)]
    table = AgentTable()
    tasks = TaskList(db=None, agents=table, logs=None)  # type: ignore[arg-type]
    rng = random.Random(500_000)
    provisioners = []
    for generated in pools:
        name = generated.name
        for inst, kind in generated.instances:
            if _connected(kind) or kind.startswith("disconnected"):
                table.agents[inst.agent_id] = _agent(
                    inst.agent_id, name, connected=_connected(kind), busy=kind == "busy"
                )
        for n in range(STATIC_AGENTS):
            static = f"static-{generated.index:03d}-{n}"
            table.agents[static] = _agent(static, name, connected=True, busy=True)
        for n in range(rng.randint(1, 8)):  # queued work that fits on no agent
            tasks.request(
                TaskRequest(
                    f"{name}-task-{n}", None, rng.choice([4, 8, 16]), UnknownJob(resource_pool=name)
                )
            )
        settings = ProviderSettings(
            type="command",
            min_instances=SETTINGS.min_instances,
            max_instances=SETTINGS.max_instances,
            max_idle_agent_period=SETTINGS.max_idle_agent_period,
            max_agent_starting_period=SETTINGS.max_agent_starting_period,
            command=CommandSettings(
                launch=("true",), terminate=("true",), list=("true",), slots=SLOTS
            ),
        )
        p = Provisioner(
            name,
            settings,
            _Provider(),
            table,
            tasks,
            AgentSetup("master:8080", ""),
            clock=lambda: NOW,
        )
        p.status.instances = {
            i.id: i for i, _ in generated.instances if i.state is not InstanceState.TERMINATED
        }
        p.status.listed = True
        provisioners.append(p)

    def one_pass() -> list[tuple[decider.Decision, int]]:
        return [p.decide(NOW) for p in provisioners]

    def snapshots() -> list[tuple[Snapshot, int]]:
        return [p._snapshot(NOW) for p in provisioners]

    samples = timed(one_pass, runs)
    snapshot_ms = statistics.median(timed(snapshots, runs))
    queued = len(tasks.pending)
    tasks.pending.clear()  # then no free slots to count
    none_queued_ms = statistics.median(timed(one_pass, runs))
    connected = sum(a.connected for a in table.agents.values())
    # The decider's share is what the rows above hold to the target; the snapshot's is the
    # master's agent table, read agent by agent.
    informational = snapshot_ms > statistics.median(samples) / 2
    return Row(
        f"provisioner snapshot + decide, {POOLS} pools x {INSTANCES:,} instances",
        samples,
        DECIDE_TARGET_MS,
        f"{'informational: ' if informational else ''}snapshot {snapshot_ms:.0f} ms of it"
        f" ({connected:,} agents looked up, free slots counted for {queued} queued"
        f" requests); {none_queued_ms:.0f} ms with none queued",
        informational=informational,
    )


# -- against a live master ------------------------------------------------------------------

LIVE_ROUNDS = 5
IDLE_PERIOD = 2.0  # the live pool's max_idle_agent_period, seconds
LAUNCH_TARGET_MS = 1000.0
IDLE_TARGET_MS = 1000.0
TRAIN = "import determined as det\n\nwith det.core.init() as core:\n    pass\n"
# The live pool's command provider: each instance is a local process running its startup
# script (so a real det-agent joins); launch and terminate note when they were called.
CLOUD = {
    "launch": """#!/usr/bin/env python3
import json, os, subprocess, sys, time, uuid
called = time.time()
d = os.environ["PYDET_BENCH_CLOUD"]
iid = "i-" + uuid.uuid4().hex[:10]
path = os.path.join(d, iid)
with open(path + ".sh", "w") as f:
    f.write(sys.stdin.read())
env = dict(os.environ, PYDET_AGENT_ROOT=os.path.join(d, "agents"))
proc = subprocess.Popen(["bash", path + ".sh"], stdout=open(path + ".log", "w"),
                        stderr=subprocess.STDOUT, start_new_session=True, env=env)
record = {"id": iid, "state": "running", "launched_at": called, "agent_id": sys.argv[1]}
with open(path + ".json", "w") as f:
    json.dump({**record, "pid": proc.pid}, f)
with open(os.path.join(d, "launched"), "a") as f:
    f.write(f"{called}\\n")
print(iid)
""",
    "terminate": """#!/usr/bin/env python3
import json, os, signal, sys, time
called = time.time()
d = os.environ["PYDET_BENCH_CLOUD"]
with open(os.path.join(d, "terminated"), "a") as f:
    f.write(f"{called}\\n")
for iid in sys.argv[1:]:
    path = os.path.join(d, iid + ".json")
    record = json.load(open(path))
    try:
        os.killpg(record["pid"], signal.SIGKILL)
    except ProcessLookupError:
        pass
    record["state"] = "terminated"
    json.dump(record, open(path, "w"))
""",
    "list": """#!/usr/bin/env python3
import glob, json, os
for path in sorted(glob.glob(os.path.join(os.environ["PYDET_BENCH_CLOUD"], "i-*.json"))):
    record = json.load(open(path))
    record.pop("pid", None)
    print(json.dumps(record))
""",
}


def _times(path: pathlib.Path) -> list[float]:
    return [float(x) for x in path.read_text().split()] if path.exists() else []


def _wait(check: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")


def _login(url: str, password: str) -> str:
    import json
    import urllib.request

    body = json.dumps({"username": "admin", "password": password}).encode()
    req = urllib.request.Request(
        f"{url}/api/v1/auth/login", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        cookie = r.headers.get("set-cookie", "")
    return str(cookie.split("det_session=", 1)[1].split(";", 1)[0])


def _idle_since(url: str, token: str) -> float:
    """The idle_since of the pool's one running instance (0: none is idle)."""
    import json
    import urllib.request

    req = urllib.request.Request(
        f"{url}/api/v1/agents", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        listed = json.load(r).get("instances", [])
    return max((float(i.get("idleSince") or 0) for i in listed), default=0.0)


@functools.cache
def live(rounds: int) -> tuple[list[float], list[float]]:
    """Round after round on a real master: an experiment's trial waits in pool "burst" for an
    instance. Returns (ms from the create call to the launch program starting, ms from the
    agent's idle period running out to the terminate program starting)."""
    import json
    import socket
    import subprocess
    import tempfile
    import urllib.request

    from determined.experimental import client

    root = pathlib.Path(tempfile.mkdtemp(prefix="pydet-bench-elastic-"))
    cloud = root / "cloud"
    cloud.mkdir()
    argv = {}
    for name, text in CLOUD.items():
        script = root / name
        script.write_text(text)
        script.chmod(0o755)
        argv[name] = [str(script)]
    config = {
        "resource_pools": [
            {"pool_name": "default"},
            {
                "pool_name": "burst",
                "provider": {
                    "type": "command",
                    **argv,
                    "max_instances": 4,
                    "max_idle_agent_period": IDLE_PERIOD,
                    "max_agent_starting_period": "60s",
                },
            },
        ]
    }
    (root / "master.yaml").write_text(json.dumps(config))
    context = root / "context"
    context.mkdir()
    (context / "train.py").write_text(TRAIN)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bin_dir = os.path.dirname(sys.executable)
    env = {
        **os.environ,
        "PYDET_BENCH_CLOUD": str(cloud),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    master = subprocess.Popen(
        [
            *(sys.executable, "-m", "pydet.master", "--config-file", str(root / "master.yaml")),
            *("--host", "127.0.0.1", "--port", str(port), "--data-dir", str(root / "master")),
        ],
        env=env,
        stdout=open(root / "master.log", "wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    to_launch: list[float] = []
    to_terminate: list[float] = []
    try:
        _wait(healthy, 30, "the master")
        password = (root / "master" / "admin-password").read_text().strip()
        d = client.Determined(master=f"127.0.0.1:{port}", user="admin", password=password)
        token = _login(url, password)
        for n in range(rounds):
            config_n = {
                "name": f"bench-{n}",
                "entrypoint": "python3 train.py",
                "searcher": {"name": "single", "metric": "x", "max_length": 1},
                "resources": {"resource_pool": "burst"},
            }
            began = time.time()
            exp = d.create_experiment(config=config_n, model_dir=context)
            launched = _wait(lambda n=n: _times(cloud / "launched")[n:], 30, "the launch call")
            to_launch.append((launched[0] - began) * 1000)  # type: ignore[index]
            exp.wait(interval=0.1)
            # When the instance's agent went idle, as the provisioner shows it.
            idle_since = _wait(lambda: _idle_since(url, token), 30, "the instance to be idle")
            called = _wait(lambda n=n: _times(cloud / "terminated")[n:], 30, "the terminate")
            over = float(idle_since) + IDLE_PERIOD  # type: ignore[arg-type]
            to_terminate.append((called[0] - over) * 1000)  # type: ignore[index]
        d.close()
    finally:
        master.terminate()
        master.wait(timeout=30)
        for record in cloud.glob("i-*.json"):
            pid = json.loads(record.read_text())["pid"]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    return to_launch, to_terminate


def launch_row(runs: int) -> Row:
    samples, _ = live(min(runs, LIVE_ROUNDS))
    return Row(
        "live: experiment created -> instance launch call",
        samples,
        LAUNCH_TARGET_MS,
        "a real master, command provider; Determined ticks every 5 s (actionCooldown)",
    )


def idle_row(runs: int) -> Row:
    _, samples = live(min(runs, LIVE_ROUNDS))
    return Row(
        f"live: idle period ({IDLE_PERIOD:g} s) over -> terminate call",
        samples,
        IDLE_TARGET_MS,
        "from the instance's idle_since (API) plus the period; Determined: up to 5 s",
    )


ROWS: list[Callable[[int], Row]] = [
    decide_row,
    deadline_row,
    provisioner_row,
    launch_row,
    idle_row,
]


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
        missed += not ok and not r.informational
        verdict = "yes" if ok else "-" if r.informational else "NO"
        print(
            f"{r.name:<{width}}  {r.median:9.1f}  {r.p95:6.1f}  {r.target_ms:9.0f}"
            f"  {verdict:<3}  {r.detail}"
        )
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        print(f"\nnote: load average {load:.1f} on {cores} cores; wall-clock times include waits")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
