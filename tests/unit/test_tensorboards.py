"""What a TensorBoard task is started with (master/tasks/tensorboards.py)."""

from __future__ import annotations

import json

from determined.api.gen import v1
from pydet.master.agents.table import Agent
from pydet.master.tasks.allocation import Allocation, Container
from pydet.master.tasks.generic import GenericTask, Phase, TaskType
from pydet.master.tasks.task_spec import MasterInfo
from pydet.master.tasks.tensorboards import start_order, to_proto

SHARED = {"type": "shared_fs", "host_path": "/mnt/ckpt"}


def _tensorboard() -> GenericTask:
    sources = [
        {
            "experiment_id": 1,
            "trial_id": t,
            "storage": SHARED,
            "path": f"c/tensorboard/experiment/1/trial/{t}",
        }
        for t in (3, 4)
    ] + [
        {
            "experiment_id": 2,
            "trial_id": 9,
            "storage": {"type": "directory", "container_path": "/data"},
            "path": "c/tensorboard/experiment/2/trial/9",
        }
    ]
    return GenericTask(
        id="tb-1",
        task_type=TaskType.TENSORBOARD,
        username="alice",
        description="TensorBoard (tb-1)",
        resource_pool="default",
        slots=0,
        priority=42,
        phase=Phase.STARTING,
        start_time=0.0,
        extra={"experiment_ids": [1, 2], "trial_ids": [3, 4, 9], "sources": sources},
        ports=[2950],
    )


def test_a_tensorboard_runs_on_no_slot_with_its_sources_and_proxy_path() -> None:
    tb = _tensorboard()
    alloc = Allocation(
        id="tb-1.5",
        task_id="tb-1",
        trial_id=None,
        token="tok",
        containers={"tb-1.5.0": Container(id="tb-1.5.0", agent_id="a", slot_ids=(), rank=0)},
        job=tb.job,
    )
    info = MasterInfo(
        cluster_id="c",
        master_address="10.0.0.1:8080",
        pools=("default",),
        default_pool="default",
        defaults={},
    )
    order = start_order(tb, alloc, info, {"a": Agent(id="a", address="10.0.0.2")})
    assert order.argv == ["python3", "-m", "determined.exec.tensorboard"]
    assert order.slot_ids == []
    env = order.env
    assert env["DET_TASK_TYPE"] == "TENSORBOARD" and env["DET_SESSION_TOKEN"] == "tok"
    assert env["DET_PROXY_PATH"] == "/proxy/tb-1/" and env["DET_PROXY_PORT"] == "2950"
    assert json.loads(env["DET_CONTAINER_ADDRS"]) == ["10.0.0.2"]
    assert [s["trial_id"] for s in json.loads(env["DET_TENSORBOARD_SOURCES"])] == [3, 4, 9]
    assert order.spec is not None
    # The shared_fs storage is mounted once, at its host path, for the docker runtime.
    assert [(m.host_path, m.container_path) for m in order.spec.bind_mounts] == [
        ("/mnt/ckpt", "/mnt/ckpt")
    ]
    shown = to_proto(tb)
    assert shown.state == v1.TensorboardState.STARTING and shown.service_address == "/proxy/tb-1/"
