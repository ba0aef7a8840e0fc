"""Daemon containers on a real cluster: a trial whose second container only serves the first
(as Horovod's and DeepSpeed's sshd containers do) ends when the first one ends.

The launcher below trains on the chief container; the other container marks itself a
daemon (``determined.launch.rpc.mark_resources_daemon``) and then only waits, for ten
minutes unless the master stops it.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import time
from collections.abc import Iterator

import pytest

from determined.api.gen import v1
from determined.common import client, errors
from tests.cluster import Cluster, cluster_fixture, wait_until
from tests.integration.test_core_api import Api, write_context

LAUNCHER = """
import json, os, pathlib, sys, time

import determined as det
from determined.common import errors
from determined.launch import rpc

info = det.get_cluster_info()
mode = info.trial.hparams["mode"]
sync = pathlib.Path(info.trial.hparams["sync_dir"])


def try_mark(what, **env):
    other = det.ClusterInfo.from_env({**os.environ, **env})
    try:
        rpc.mark_resources_daemon(other, retry_seconds=0)
        print(f"marking {what}: accepted", flush=True)
    except errors.DetError as e:
        print(f"marking {what}: {type(e).__name__}: {e.message}", flush=True)


if info.container_rank > 0:
    try_mark("unknown resources", DET_RESOURCES_ID="no-such-resources")
    try_mark("another allocation", DET_ALLOCATION_ID="1.1.123")
    rpc.mark_resources_daemon(info)
    (sync / "daemon.json").write_text(
        json.dumps({"pid": os.getpid(), "allocation_id": info.allocation_id,
                    "resources_id": info.resources_id, "token": info.session_token})
    )
    if mode == "daemon_fails_early":
        print("the daemon exits with 5", flush=True)
        sys.exit(5)
    print("the daemon waits", flush=True)
    time.sleep(600)
    print("the daemon woke up", flush=True)
    sys.exit(0)

# The chief: train once the other container is a daemon (or gone), then end.
deadline = time.monotonic() + 120
while not (sync / "daemon.json").exists():
    assert time.monotonic() < deadline, "the other container never marked itself"
    time.sleep(0.1)
if mode == "daemon_fails_early":
    time.sleep(3)  # it has surely exited by now
with det.core.init(distributed=det.core.DummyDistributedContext()) as core_context:
    core_context.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
if mode == "chief_fails":
    print("the chief exits with 4", flush=True)
    sys.exit(4)
print("the chief is done", flush=True)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # One slot per agent: a two-slot trial gets one container on each.
    yield from cluster_fixture(tmp_path_factory.mktemp("daemons"), agents=2, slots=1)


def experiment(cluster: Cluster, tmp_path: pathlib.Path, mode: str) -> tuple[int, pathlib.Path]:
    sync = tmp_path / "sync"
    sync.mkdir()
    ctx = write_context(tmp_path / "ctx", {"daemon_launcher.py": LAUNCHER})
    cfg = tmp_path / "daemon.yaml"
    cfg.write_text(
        json.dumps(
            {
                "entrypoint": "python3 daemon_launcher.py",
                "hyperparameters": {"mode": mode, "sync_dir": str(sync)},
                "resources": {"slots_per_trial": 2},
                "searcher": {"name": "single", "metric": "loss", "max_length": 1},
                "max_restarts": 0,
            }
        )
    )
    return cluster.create(cfg, ctx), sync


def mark_directly(cluster: Cluster, daemon: dict[str, str]) -> None:
    """MarkAllocationResourcesDaemon with the daemon's own token, from outside its task."""

    async def go() -> None:
        async with client.session(cluster.address, token=daemon["token"]) as s:
            request = v1.MarkAllocationResourcesDaemonRequest(
                allocation_id=daemon["allocation_id"], resources_id=daemon["resources_id"]
            )
            await s.call(s.stub.mark_allocation_resources_daemon(request))

    asyncio.run(go())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_trial_ends_when_its_only_working_container_ends(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    api = Api(cluster)
    exp_id, sync = experiment(cluster, tmp_path, "daemon")
    began = time.monotonic()
    api.wait(exp_id, "COMPLETED", timeout=180)
    # The daemon would sleep ten minutes; the master stopped it.
    assert time.monotonic() - began < 120
    (trial,) = api.trials(exp_id)
    assert trial.restarts == 0 and trial.run_id == 1
    assert api.metrics(trial.id, "training") == [(1, {"loss": 0.5})]
    assert api.logs(trial.id, search="the chief is done")
    assert api.logs(trial.id, search="the daemon waits")
    assert not api.logs(trial.id, search="the daemon woke up")
    assert api.logs(trial.id, search="stopping the daemon container(s) 1")
    daemon = json.loads((sync / "daemon.json").read_text())
    wait_until(lambda: gone(daemon["pid"]), 30, "the daemon's process to be gone")

    # Only the allocation's own containers, naming its own resources, may mark.
    (unknown,) = api.logs(trial.id, search="marking unknown resources")
    assert "NotFound" in unknown and "has no resources 'no-such-resources'" in unknown
    (other,) = api.logs(trial.id, search="marking another allocation")
    assert "PermissionDenied" in other and daemon["allocation_id"] in other

    # Its task token ended with it: a late mark is refused, and says why.
    with pytest.raises(errors.DetError) as late:
        mark_directly(cluster, daemon)
    assert isinstance(late.value, errors.Unauthenticated)
    assert late.value.message == (
        f"the task token of allocation {daemon['allocation_id']}, which has ended: a task's "
        "token is good only while the task runs"
    )


def test_a_failed_chief_still_fails_the_trial(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    api = Api(cluster)
    exp_id, _ = experiment(cluster, tmp_path, "chief_fails")
    api.wait(exp_id, "ERROR", timeout=180)
    (trial,) = api.trials(exp_id)
    assert api.logs(trial.id, search="the chief exits with 4")
    assert api.logs(trial.id, search="failed (exit code 4)")
    assert not api.logs(trial.id, search="the daemon woke up")


def test_a_daemon_that_exits_early_with_an_error_is_not_held_against_the_trial(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    api = Api(cluster)
    exp_id, _ = experiment(cluster, tmp_path, "daemon_fails_early")
    api.wait(exp_id, "COMPLETED", timeout=180)
    (trial,) = api.trials(exp_id)
    assert trial.restarts == 0
    assert api.logs(trial.id, search="the daemon exits with 5")
    assert api.logs(trial.id, search="the chief is done")
