"""A master and two agents on three hosts with their own addresses (network namespaces).

The hosts share this machine's filesystem, as nodes share a network file system: the
master's default checkpoint storage is visible to both agents.
"""

from __future__ import annotations

import os
import pathlib
import re
import textwrap
import time
from collections.abc import Iterator

import pytest

from determined.launch import deepspeed
from tests.cluster import EXAMPLES, Cluster, running, wait_until
from tests.netns import Host, Network

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TRAIN = """
import json, os, pathlib, time
import determined as det

def main(core, distributed):
    info = det.get_cluster_info()
    rank = core.distributed.rank
    me = info.container_addrs[info.container_rank]
    print(f"rank {rank} of {core.distributed.size} on {me} pid {os.getpid()} "
          f"chief {os.environ['DET_CHIEF_IP']}", flush=True)
    done = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            done = json.loads((path / "state.json").read_text())["steps"]
        print(f"rank {rank} on {me} resumed after step {done}", flush=True)
    for op in core.searcher.operations():
        while done < op.length:
            done += 1
            total = float(rank + 1)
            if distributed:
                import torch, torch.distributed as dist
                t = torch.tensor([total])
                dist.all_reduce(t)
                total = t.item()
                print(f"rank {rank} step {done} sum {total:g}", flush=True)
            time.sleep(float(os.environ.get("STEP_SECONDS", "0.2")))
            if rank == 0:
                core.train.report_training_metrics(steps_completed=done, metrics={"sum": total})
                with core.checkpoint.store_path({"steps_completed": done}) as (path, _):
                    (path / "state.json").write_text(json.dumps({"steps": done}))
                op.report_progress(done)
            if core.preempt.should_preempt():
                return
        if rank == 0:
            op.report_completed(total)

if __name__ == "__main__":
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        context = det.core.DistributedContext.from_torch_distributed()
    else:
        context = None
    with det.core.init(distributed=context) as core:
        main(core, distributed)
"""


def config(*, slots: int, steps: int, step_seconds: float) -> str:
    return textwrap.dedent(
        f"""
        name: across-hosts
        entrypoint: python3 -m determined.launch.torch_distributed python3 train.py
        environment:
          environment_variables: [STEP_SECONDS={step_seconds}]
        resources:
          slots_per_trial: {slots}
        searcher:
          name: single
          metric: sum
          max_length: {steps}
        max_restarts: 0
        """
    )


@pytest.fixture
def hosts(network: Network) -> tuple[Host, Host, Host]:
    return network.add_host(), network.add_host(), network.add_host()


@pytest.fixture
def cluster(tmp_path: pathlib.Path, hosts: tuple[Host, Host, Host]) -> Iterator[Cluster]:
    master, a, b = hosts

    def start(c: Cluster) -> None:
        c.start_master()
        c.start_agent("agent-a", 1, on=a)
        c.start_agent("agent-b", 1, on=b)

    yield from running(Cluster(tmp_path, on=master, reconnect_timeout=5), start)


def context(tmp_path: pathlib.Path, cfg: str) -> tuple[pathlib.Path, pathlib.Path]:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(TRAIN)
    (tmp_path / "exp.yaml").write_text(cfg)
    return tmp_path / "exp.yaml", ctx


def test_agents_register_with_their_own_addresses(
    cluster: Cluster, hosts: tuple[Host, Host, Host]
) -> None:
    _, a, b = hosts
    addresses = {agent["id"]: agent["addresses"][0] for agent in cluster.agents_json()}
    assert addresses == {"agent-a": a.address, "agent-b": b.address}
    listed = cluster.det("agent", "list").stdout
    assert a.address in listed and b.address in listed
    assert "agent agent-" not in listed  # no problems with either


def test_an_agent_giving_loopback_from_another_host_is_told_what_to_pass(
    cluster: Cluster, hosts: tuple[Host, Host, Host]
) -> None:
    master, _, _ = hosts
    cluster.spawn_agent("agent-c", "--address", "127.0.0.1", on=master)
    wait_until(
        lambda: any(x["id"] == "agent-c" and x["connected"] for x in cluster.agents_json()),
        30,
        "agent-c to connect",
    )
    listed = cluster.det("agent", "list").stdout
    assert (
        f"agent agent-c: it gives 127.0.0.1 as its address but connects from {master.address}"
        in listed
    ), listed
    assert f"--address {master.address}" in listed


def test_a_two_host_torch_distributed_trial_meets_across_hosts(
    cluster: Cluster, hosts: tuple[Host, Host, Host], tmp_path: pathlib.Path
) -> None:
    _, a, b = hosts
    cfg, ctx = context(tmp_path, config(slots=2, steps=3, step_seconds=0.1))
    logs = completed_trial_logs(cluster, cluster.create(cfg, ctx))
    seen = re.findall(r"rank (\d) of 2 on (\S+) pid \d+ chief (\S+)", logs)
    ranks = {rank: address for rank, address, _ in seen}
    # One rank on each host, both told the chief's own address.
    assert sorted(ranks.values()) == sorted([a.address, b.address]), logs
    assert {chief for _, _, chief in seen} == {ranks["0"]}
    # The gloo all-reduce crossed the hosts: 1 + 2 on every step, on both ranks.
    for rank in (0, 1):
        assert [f"rank {rank} step {n} sum 3" in logs for n in (1, 2, 3)] == [True] * 3, logs


def test_the_hand_written_launcher_of_the_seeds_runs_across_hosts(cluster: Cluster) -> None:
    # Two slots per trial and one slot per host: one worker on each host.
    core_api = EXAMPLES / "core_api"
    logs = completed_trial_logs(cluster, cluster.create(core_api / "4_distributed.yaml", core_api))
    assert "rank 0 finished with x=200" in logs and "rank 1 finished with x=200" in logs


@pytest.mark.skipif(not deepspeed.installed(), reason="deepspeed is not installed")
def test_a_two_host_deepspeed_trial_meets_across_hosts(
    cluster: Cluster, hosts: tuple[Host, Host, Host]
) -> None:
    _, a, b = hosts
    # The digits example as it is, for one epoch: one DeepSpeed node per host, each started
    # by its own container's runner (--no_ssh), meeting at the chief's address.
    digits = EXAMPLES / "digits"
    exp_id = cluster.create(
        digits / "deepspeed.yaml",
        digits,
        "--config",
        "entrypoint=python3 -m determined.launch.deepspeed python3 deepspeed_train.py "
        "--deepspeed --deepspeed_config ds_config.json --epochs 1",
    )
    logs = completed_trial_logs(cluster, exp_id)
    for rank in (0, 1):
        assert f"[rank={rank}] " in logs and f"DeepSpeed engine on cpu, rank {rank} of 2" in logs
    # Both containers' runners were given the chief's address, one of the two hosts.
    chief = set(re.findall(r"'--master_addr', '([\d.]+)'", logs))
    assert len(chief) == 1 and chief <= {a.address, b.address}, logs
    # One slot per host: node 0 ran on one host and node 1 on the other.
    assert "'--node_rank', '0'" in logs and "'--node_rank', '1'" in logs, logs
    (trial,) = cluster.trials(exp_id)
    assert trial["restarts"] == 0


def test_a_trial_resumes_on_the_other_host_from_its_checkpoint(
    cluster: Cluster, hosts: tuple[Host, Host, Host], tmp_path: pathlib.Path
) -> None:
    _, a, b = hosts
    cfg, ctx = context(tmp_path, config(slots=1, steps=40, step_seconds=0.25))
    exp_id = cluster.create(cfg, ctx)
    (trial,) = cluster.trials(exp_id)
    trial_id = trial["id"]

    first = re.search(r"rank 0 of 1 on (\S+)", _wait_for(cluster, trial_id, r"rank 0 of 1 on"))
    assert first is not None
    started_on = first.group(1)
    assert started_on in (a.address, b.address)
    _wait_checkpoints(cluster, trial_id, 3)
    cluster.det("experiment", "pause", str(exp_id))
    cluster.wait_state(exp_id, "PAUSED", timeout=120)
    # Take the first host out of the pool; the trial can only come back on the other.
    cluster.det("agent", "disable", "agent-a" if started_on == a.address else "agent-b")
    cluster.det("experiment", "activate", str(exp_id))
    logs = completed_trial_logs(cluster, exp_id)
    resumed = re.search(r"rank 0 on (\S+) resumed after step (\d+)", logs)
    assert resumed is not None, logs
    other = b.address if started_on == a.address else a.address
    assert resumed.group(1) == other
    assert int(resumed.group(2)) >= 3


def completed_trial_logs(cluster: Cluster, exp_id: int) -> str:
    """The logs of the experiment's one trial, once it completed."""
    state = cluster.wait_state(exp_id, "COMPLETED", "ERROR", timeout=300)
    (trial,) = cluster.trials(exp_id)
    logs = cluster.logs(trial["id"])
    assert state == "COMPLETED", logs
    return logs


def _wait_for(cluster: Cluster, trial_id: int, pattern: str) -> str:
    def found() -> str:
        text = cluster.logs(trial_id)
        return text if re.search(pattern, text) else ""

    return str(wait_until(found, 120, f"trial {trial_id} to log {pattern!r}", interval=0.5))


def _wait_checkpoints(cluster: Cluster, trial_id: int, n: int) -> None:
    def count() -> int:
        body = cluster.get(f"/api/v1/trials/{trial_id}/checkpoints")
        return len(body.get("checkpoints", []))

    wait_until(lambda: count() >= n, 120, f"{n} checkpoints of trial {trial_id}", interval=0.5)


def test_a_host_cut_off_loses_its_trial_to_the_other_and_is_fenced_when_back(
    cluster: Cluster, hosts: tuple[Host, Host, Host], tmp_path: pathlib.Path
) -> None:
    _, a, b = hosts
    cfg, ctx = context(tmp_path, config(slots=1, steps=60, step_seconds=0.25))
    cfg.write_text(cfg.read_text().replace("max_restarts: 0", "max_restarts: 1"))
    cluster.det("agent", "disable", "agent-b")  # the trial starts on host a
    exp_id = cluster.create(cfg, ctx)
    (trial,) = cluster.trials(exp_id)
    trial_id = trial["id"]
    first = re.search(r"pid (\d+)", _wait_for(cluster, trial_id, rf"on {a.address} pid \d+"))
    assert first is not None
    stale_pid = int(first.group(1))
    cluster.det("agent", "enable", "agent-b")
    _wait_checkpoints(cluster, trial_id, 3)

    a.unplug()
    cut = time.monotonic()
    wait_until(
        lambda: not any(x["id"] == "agent-a" and x["connected"] for x in cluster.agents_json()),
        120,
        "the master to see agent-a gone",
    )
    detected = time.monotonic() - cut
    _wait_for(cluster, trial_id, rf"rank 0 on {b.address} resumed after step \d+")
    recovered = time.monotonic() - cut
    print(f"cut off: seen in {detected:.1f}s, trial running again on b in {recovered:.1f}s")

    a.plug()
    wait_until(
        lambda: any(x["id"] == "agent-a" and x["connected"] for x in cluster.agents_json()),
        120,
        "agent-a to reconnect",
    )
    # The stale copy on a is ended once its agent is back: never two copies at once.
    wait_until(lambda: not _alive(stale_pid), 60, f"the stale copy (pid {stale_pid}) to end")
    logs = completed_trial_logs(cluster, exp_id)
    resumed = re.search(r"resumed after step (\d+)", logs)
    assert resumed is not None and int(resumed.group(1)) >= 3


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
