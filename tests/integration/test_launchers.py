"""Launchers on a real cluster: one failed worker ends the whole trial at once, and the Core
API's collectives span workers on two agents.

The distributed scripts follow the launcher pattern of Determined's Core API docs
(``launcher_main`` starts one ``wrap_rank`` worker per slot, ``worker_main`` builds a
``DistributedContext`` from the cluster info), as in examples/core_api/4_distributed.py.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from determined.api.gen import v1
from determined.common import client
from tests.cluster import EXAMPLES, Cluster, cluster_fixture
from tests.integration.test_core_api import Api, write_context

CRASH = """
import os, pathlib, sys, time
rank = int(os.environ["RANK"])
started = pathlib.Path("rank0.started")
if rank == 1:
    # Crash only once rank 0 is surely running, so the test sees a sibling taken down.
    deadline = time.time() + 120
    while not started.exists() and time.time() < deadline:
        time.sleep(0.05)
    print("rank 1 exits with 1", flush=True)
    sys.exit(1)
print(f"rank {rank} sleeps", flush=True)
started.touch()
time.sleep(600)
print(f"rank {rank} woke up", flush=True)
"""

LAUNCHERS = {
    "torch_distributed": "python3 -m determined.launch.torch_distributed python3 crash.py",
    "custom_launcher": "python3 custom_launcher.py python3 crash.py",
}

# One script, two modes chosen by a hyperparameter: "allgather" checks what every rank
# receives; "peer_dies" makes the second container exit while the first one's ranks wait
# in an allgather.
COLLECTIVES = """
import json
import logging
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time

import determined as det


def launcher_main(slots_per_node, num_nodes, cross_rank):
    # Use subprocess to start one worker process per node.
    procs = []
    for local_rank in range(slots_per_node):
        rank = cross_rank * slots_per_node + local_rank
        cmd = [
            # Use the determined.launch.wrap_rank to wrap the worker process.
            # This ensures logs from each worker can be filtered by rank in the WebUI.
            "python3",
            "-m",
            "determined.launch.wrap_rank",
            str(rank),
            "--",
            # Re-invoke this script but as a worker.
            "python3",
            __file__,
            "worker",
            str(rank),
            str(local_rank),
        ]
        procs.append(subprocess.Popen(cmd))

    q = queue.Queue()

    def wait_for_worker(proc):
        worker_exit = proc.wait()
        q.put((proc, worker_exit))

    threads = [threading.Thread(target=wait_for_worker, args=(proc,)) for proc in procs]

    for t in threads:
        t.start()

    first_failed_exit = 0
    for i in range(slots_per_node):
        proc, worker_exit = q.get()
        procs.remove(proc)
        if worker_exit != 0 and first_failed_exit == 0:
            # When the first worker crashes, preempt the others.
            first_failed_exit = worker_exit
            for proc in procs:
                proc.kill()

    for t in threads:
        t.join()

    return first_failed_exit


def worker_main(slots_per_node, num_nodes, cross_rank, chief_ip, rank, local_rank):
    distributed = det.core.DistributedContext(
        rank=rank,
        size=num_nodes * slots_per_node,
        local_rank=local_rank,
        local_size=slots_per_node,
        cross_rank=cross_rank,
        cross_size=num_nodes,
        chief_ip=chief_ip,
    )

    with det.core.init(distributed=distributed) as core_context:
        main(core_context)


def main(core_context):
    dist = core_context.distributed
    if hparams["mode"] == "peer_dies":
        (sync_dir / f"ready-{dist.rank}").write_text("")
        try:
            dist.allgather(dist.rank)
        except det.core.CollectiveError as e:
            print(f"rank {dist.rank} got {type(e).__name__}: {e}", flush=True)
            raise
        print(f"rank {dist.rank}: the allgather completed", flush=True)
        return
    me = {"rank": dist.rank, "cross_rank": dist.cross_rank, "agent": info.agent_id}
    everyone = dist.allgather(me)
    print("allgather " + json.dumps(everyone), flush=True)
    print("allgather_local " + json.dumps(dist.allgather_local(dist.rank)), flush=True)
    print("broadcast " + json.dumps(dist.broadcast(f"from rank {dist.rank}")), flush=True)
    print("gather " + json.dumps(dist.gather(dist.rank * 10)), flush=True)
    if dist.rank == 0:
        core_context.train.report_validation_metrics(
            steps_completed=1, metrics={"agents": sorted({e["agent"] for e in everyone})}
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)

    info = det.get_cluster_info()
    hparams = info.trial.hparams
    sync_dir = pathlib.Path(hparams["sync_dir"])

    slots_per_node = len(info.slot_ids)
    num_nodes = len(info.container_addrs)
    cross_rank = info.container_rank
    chief_ip = info.container_addrs[0]

    if sys.argv[1] == "launcher":
        if hparams["mode"] == "peer_dies" and cross_rank == 1:
            # Wait until the first container's ranks are in their allgather, then die.
            deadline = time.monotonic() + 120
            while len(list(sync_dir.glob("ready-*"))) < slots_per_node:
                assert time.monotonic() < deadline, "the other container never got ready"
                time.sleep(0.1)
            time.sleep(1.0)
            print("container 1 exits with 3", flush=True)
            sys.exit(3)
        if hparams["mode"] == "peer_dies":
            # The master also stops this container when container 1 dies (SIGTERM, then
            # SIGKILL after a grace period). Workers that ignore SIGTERM, like training code
            # that saves its state first, show what the collective itself does.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        exitcode = launcher_main(slots_per_node, num_nodes, cross_rank)
        sys.exit(exitcode)

    if sys.argv[1] == "worker":
        rank = int(sys.argv[2])
        local_rank = int(sys.argv[3])
        exitcode = worker_main(slots_per_node, num_nodes, cross_rank, chief_ip, rank, local_rank)
        sys.exit(exitcode)

    raise ValueError(f"unrecognized first argument: {sys.argv[1]}")
"""


def log_records(api: Api, trial_id: int, search: str) -> list[v1.TaskLog]:
    """Log lines with their rank and timestamp."""

    async def go() -> list[v1.TaskLog]:
        async with client.session(api.address, token=api.token) as s:
            request = v1.TrialLogsRequest(trial_id=trial_id, search_text=search)
            return [log async for r in s.stub.trial_logs(request) for log in r.logs]

    return asyncio.run(go())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("launchers"), agents=1, slots=2)


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_launchers_a_crashing_worker_takes_its_siblings_down(
    cluster: Cluster, tmp_path: pathlib.Path, launcher: str
) -> None:
    api = Api(cluster)
    ctx = write_context(tmp_path / "ctx", {"crash.py": CRASH})
    shutil.copy(EXAMPLES / "digits" / "custom_launcher.py", ctx)
    cfg = tmp_path / "crash.yaml"
    cfg.write_text(
        f"entrypoint: {LAUNCHERS[launcher]}\n"
        "resources: {slots_per_trial: 2}\n"
        "searcher: {name: single, metric: x, max_length: 1}\n"
        "max_restarts: 0\n"
    )
    exp_id = cluster.create(cfg, ctx)
    api.wait(exp_id, "ERROR", timeout=180)
    (trial,) = api.trials(exp_id)
    assert trial.state.name.endswith("ERROR")
    assert trial.run_id == 1  # max_restarts 0: no second run
    (crash,) = log_records(api, trial.id, "rank 1 exits with 1")
    assert crash.rank_id == 1
    assert log_records(api, trial.id, "rank 0 sleeps")
    assert not log_records(api, trial.id, "woke up")
    # Rank 0 sleeps for 10 minutes; the trial ends within seconds of rank 1's exit.
    assert trial.end_time is not None
    ended = trial.end_time - crash.timestamp
    assert ended.total_seconds() < 30, ended


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master and two agents with four slots each: an 8-slot trial spans both."""
    c = Cluster(tmp_path_factory.mktemp("two_agents"))
    try:
        c.start_master()
        c.start_agent("agent-0", slots=4)
        c.start_agent("agent-1", slots=4)
        yield c
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


def collectives_experiment(
    cluster: Cluster, tmp_path: pathlib.Path, mode: str
) -> tuple[int, pathlib.Path]:
    sync_dir = tmp_path / "sync"
    sync_dir.mkdir()
    ctx = write_context(tmp_path / "ctx", {"collectives.py": COLLECTIVES})
    cfg = tmp_path / "collectives.yaml"
    cfg.write_text(
        json.dumps(
            {
                "entrypoint": "python3 collectives.py launcher",
                "hyperparameters": {"mode": mode, "sync_dir": str(sync_dir)},
                "resources": {"slots_per_trial": 8},
                "searcher": {"name": "single", "metric": "x", "max_length": 1},
                "max_restarts": 0,
            }
        )
    )
    return cluster.create(cfg, ctx), sync_dir


def test_launchers_eight_ranks_on_two_agents_allgather_everything(
    two_agents: Cluster, tmp_path: pathlib.Path
) -> None:
    api = Api(two_agents)
    exp_id, _ = collectives_experiment(two_agents, tmp_path, "allgather")
    api.wait(exp_id, "COMPLETED", timeout=180)
    (trial,) = api.trials(exp_id)
    logs = api.logs(trial.id)
    gathered = {
        int(line.split("]")[0].removeprefix("[rank=")): json.loads(line.split("allgather ", 1)[1])
        for line in logs
        if "] allgather [" in line
    }
    # Every one of the 8 ranks received all 8 values, in rank order.
    assert sorted(gathered) == list(range(8))
    for everyone in gathered.values():
        assert [e["rank"] for e in everyone] == list(range(8))
        assert [e["cross_rank"] for e in everyone] == [0] * 4 + [1] * 4
        assert {e["agent"] for e in everyone} == {"agent-0", "agent-1"}
    assert api.metrics(trial.id, "validation") == [(1, {"agents": ["agent-0", "agent-1"]})]

    def outputs(kind: str) -> dict[int, object]:
        prefix = f"] {kind} "
        return {
            int(line.split("]")[0].removeprefix("[rank=")): json.loads(line.split(prefix, 1)[1])
            for line in logs
            if prefix in line
        }

    assert outputs("allgather_local") == {
        r: list(range(4)) if r < 4 else list(range(4, 8)) for r in range(8)
    }
    assert outputs("broadcast") == {r: "from rank 0" for r in range(8)}
    assert outputs("gather") == {0: [r * 10 for r in range(8)], **{r: None for r in range(1, 8)}}


def test_launchers_walkthrough_stage4_with_eight_ranks_on_two_agents(
    two_agents: Cluster,
) -> None:
    api = Api(two_agents)
    # As the walkthrough says to run it, from the example's directory, following its logs;
    # with the walkthrough's 8 slots (and a shorter search, to keep the test quick).
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pydet.cli", "e", "create", "4_distributed.yaml", ".", "-f"),
            *("--config", "resources.slots_per_trial=8", "--config", "searcher.max_length=20"),
        ],
        cwd=EXAMPLES / "core_api",
        env=two_agents.env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "x is now 160" in proc.stdout
    exp_id = int(proc.stdout.split("Created experiment ", 1)[1].split()[0])
    assert api.state(exp_id) == "COMPLETED"
    (trial,) = api.trials(exp_id)
    # Each of 20 steps adds the increment_by of all 8 workers: every allgather had 8 values.
    assert api.metrics(trial.id, "validation") == [(20, {"x": 160})]
    finished = sorted(api.logs(trial.id, search="finished with x="))
    assert len(finished) == 8
    for rank, line in enumerate(finished):
        assert line.startswith(f"[rank={rank}] ")
        assert line.endswith(f"rank {rank} finished with x=160")


def test_launchers_a_dead_container_fails_the_ranks_waiting_in_a_collective(
    two_agents: Cluster, tmp_path: pathlib.Path
) -> None:
    api = Api(two_agents)
    exp_id, sync_dir = collectives_experiment(two_agents, tmp_path, "peer_dies")
    began = time.monotonic()
    api.wait(exp_id, "ERROR", timeout=180)
    # Well before the collective's own timeout (an hour): the master ended it.
    assert time.monotonic() - began < 150
    (trial,) = api.trials(exp_id)
    assert len(list(sync_dir.glob("ready-*"))) == 4
    assert api.logs(trial.id, search="container 1 exits with 3")
    errors = api.logs(trial.id, search="got CollectiveError")
    assert sorted(line.split("]")[0] for line in errors) == [f"[rank={r}" for r in range(4)]
    for line in errors:
        # The error names the collective, the ranks it waited for and the dead container.
        assert "DistributedContext.allgather()" in line
        assert "[4, 5, 6, 7]" in line
        assert "container 1 (agent agent-1) exited with code 3" in line
    assert not api.logs(trial.id, search="the allgather completed")
