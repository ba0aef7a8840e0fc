"""The start orders of a trial's containers: the DET_* environment and the container spec."""

from __future__ import annotations

import json

from determined.common import expconf
from pydet.master.agents.table import Agent, Slot
from pydet.master.tasks.allocation import Allocation, Container
from pydet.master.tasks.task_list import UnknownJob
from pydet.master.tasks.task_spec import TrialLaunch, start_orders

CONFIG = {
    "name": "x",
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": 4},
    "resources": {"slots_per_trial": 3, "shm_size": "1G"},
    "environment": {"environment_variables": ["FOO=bar=baz"]},
}


def agent(agent_id: str, address: str, n: int, kind: str = "cpu") -> Agent:
    slots = {
        str(i): Slot(id=str(i), type=kind, device="", uuid=f"{agent_id}-{i}") for i in range(n)
    }
    return Agent(id=agent_id, address=address, slots=slots)


def test_each_container_gets_its_rank_the_peers_addresses_and_the_task_token() -> None:
    agents = {"a": agent("a", "198.18.0.2", 2), "b": agent("b", "198.18.0.3", 1, "cuda")}
    alloc = Allocation(
        id="1.1.7",
        task_id="1.1",
        trial_id=1,
        token="secret-token",
        containers={
            "1.1.7.1": Container(id="1.1.7.1", agent_id="b", slot_ids=("0",), rank=1),
            "1.1.7.0": Container(id="1.1.7.0", agent_id="a", slot_ids=("0", "1"), rank=0),
        },
        job=UnknownJob(),
    )
    launch = TrialLaunch(
        cluster_id="c",
        master_address="198.18.0.1:8080",
        experiment_id=1,
        trial_id=1,
        task_id="1.1",
        seed=42,
        hparams={"lr": 0.1},
        run_id=2,
        steps_completed=3,
        latest_checkpoint="ckpt-uuid",
        config=expconf.parse_experiment_config(CONFIG),
    )
    first, second = start_orders(launch, alloc, agents)
    assert [first.container_id, second.container_id] == ["1.1.7.0", "1.1.7.1"]
    for rank, order in enumerate((first, second)):
        env = order.env
        assert env["DET_CONTAINER_RANK"] == str(rank)
        # The id MarkAllocationResourcesDaemon names this container by.
        assert env["DET_RESOURCES_ID"] == order.container_id
        assert json.loads(env["DET_CONTAINER_ADDRS"]) == ["198.18.0.2", "198.18.0.3"]
        assert json.loads(env["DET_CONTAINER_SLOT_COUNTS"]) == [2, 1]
        assert env["DET_SESSION_TOKEN"] == "secret-token"
        assert env["DET_LATEST_CHECKPOINT"] == "ckpt-uuid"
        assert env["DET_STEPS_COMPLETED"] == "3" and env["DET_TRIAL_RUN_ID"] == "2"
        assert json.loads(env["DET_HPARAMS"]) == {"lr": 0.1}
        assert env["FOO"] == "bar=baz"
        assert order.argv == ["python3", "-m", "determined.exec.launch"]
        assert order.spec is not None and order.spec.shm_size == 2**30
    assert json.loads(first.env["DET_GPU_UUIDS"]) == []
    assert json.loads(second.env["DET_GPU_UUIDS"]) == ["b-0"]
