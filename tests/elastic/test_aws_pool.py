"""An elastic pool on AWS: the master's boto3 talks to moto's EC2 server on loopback, and the
test cloud boots every instance moto runs as a host at its private address (198.18.0.0/15,
the test's subnet) running the instance's actual user data, which starts a real agent."""

from __future__ import annotations

import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cloud import Cloud, default_env
from tests.cluster import Cluster, wait_until
from tests.ec2server import IMAGE_ID, EC2Server, ec2_server
from tests.elastic.conftest import (
    context,
    elastic_cluster,
    experiment,
    instances,
    master_config,
    master_log,
    provisioner,
    up,
)
from tests.netns import Network

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

POOL = "gpu"
CLUSTER_TAG = "pydet-ci"


@pytest.fixture(scope="module")
def ec2(tmp_path_factory: Any) -> Iterator[EC2Server]:
    yield from ec2_server(tmp_path_factory)


class Setup:
    def __init__(self, tmp_path: pathlib.Path, network: Network, ec2: EC2Server) -> None:
        self.tmp_path = tmp_path
        self.network = network
        self.ec2 = ec2
        self.subnet = ec2.subnet(network)
        # Each test its own tag value: moto's server is shared by the module's tests.
        self.tag = f"{CLUSTER_TAG}-{tmp_path.name}"
        (tmp_path / "cluster").mkdir()
        env = default_env({"PYDET_AGENT_ROOT": str(tmp_path / "agents")})
        self.cloud = Cloud(ec2.client, network, tmp_path / "hosts", env=env, subnet_id=self.subnet)

    def provider(self, **settings: Any) -> dict[str, Any]:
        return {
            "type": "aws",
            "region": "us-east-1",
            "image_id": IMAGE_ID,
            "instance_type": "t3.large",
            "cpu_slots_allowed": True,
            "instance_slots": 1,
            "ssh_key_name": "ci",
            "network_interface": {"subnet_id": self.subnet, "public_ip": False},
            "tag_value": self.tag,
            "max_instances": 2,
            "max_idle_agent_period": "4s",
            **settings,
        }

    def cluster(self, *, aws_env: bool = True, **settings: Any) -> Cluster:
        config = master_config(POOL, self.provider(**settings))
        c = elastic_cluster(self.tmp_path, self.network, config)
        c.master_env = self.ec2.env() if aws_env else {"AWS_ENDPOINT_URL": self.ec2.endpoint_url}
        return c

    def ours(self, *states: str) -> list[dict[str, Any]]:
        """The instances launched for this test's master, oldest first."""
        filters = [{"Name": "tag:managed_by", "Values": [self.tag]}]
        if states:
            filters.append({"Name": "instance-state-name", "Values": list(states)})
        found = [
            i
            for r in self.ec2.client.describe_instances(Filters=filters)["Reservations"]
            for i in r["Instances"]
        ]
        return sorted(found, key=lambda i: (i["LaunchTime"], i["InstanceId"]))


@pytest.fixture
def setup(tmp_path: pathlib.Path, network: Network, ec2: EC2Server) -> Iterator[Setup]:
    s = Setup(tmp_path, network, ec2)
    try:
        with s.cloud:
            yield s
    finally:  # what the test's master left running is not the next test's
        left = [i["InstanceId"] for i in s.ours("pending", "running", "stopped")]
        if left:
            ec2.terminate(*left)


def steps(c: Cluster, trial_id: int) -> int:
    return int(c.get(f"/api/v1/trials/{trial_id}")["trial"].get("totalBatchesProcessed", 0))


def tags(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def test_the_pool_grows_under_its_queue_and_shrinks_when_idle(setup: Setup) -> None:
    c = setup.cluster()
    with up(c):
        exp = c.create(
            experiment(setup.tmp_path, pool=POOL, trials=3, steps=4), context(setup.tmp_path)
        )
        wait_until(lambda: len(setup.ours()) == 2, 30, "two instances run")
        assert c.wait_state(exp, "COMPLETED", timeout=180) == "COMPLETED"
        launched = setup.ours()
        assert len(launched) == 2  # max_instances, though three trials were queued
        for inst in launched:
            t = tags(inst)
            assert t["managed_by"] == setup.tag and t["pydet:pool"] == POOL
            assert t["pydet:agent-id"].startswith(f"{POOL}-") and t["Name"] == "pydet-agent"
            assert inst["PrivateIpAddress"].startswith("198.18.")
        # The user data started det-agent with the id the master tagged: they match.
        agents = {a["id"] for a in c.agents_json() if a["resourcePools"] == [POOL]}
        assert agents == {tags(i)["pydet:agent-id"] for i in launched}
        shown = c.det("agent", "list").stdout
        assert "from its aws provider (min 0, max 2)" in shown
        wait_until(lambda: not setup.ours("pending", "running"), 20, "idle instances to end")
        assert "idle for max_idle_agent_period" in master_log(c)


def test_a_restarted_master_finds_its_instances_by_their_tags(setup: Setup) -> None:
    c = setup.cluster(max_idle_agent_period="10m")
    with up(c):
        exp = c.create(experiment(setup.tmp_path, pool=POOL), context(setup.tmp_path))
        wait_until(lambda: len(setup.ours("running")) == 1, 30, "an instance runs")
        assert c.wait_state(exp, "COMPLETED", timeout=120) == "COMPLETED"
        c.stop_master(signal.SIGKILL)
        c.start_master()
        # The same instance is back in the pool, and new work runs on it: none is added.
        wait_until(lambda: len(instances(c, POOL)) == 1, 30, "the instance listed again")
        config = experiment(setup.tmp_path, pool=POOL, name="again")
        again = c.create(config, context(setup.tmp_path))
        assert c.wait_state(again, "COMPLETED", timeout=120) == "COMPLETED"
        assert len(setup.ours()) == 1


def test_a_spot_instance_taken_away_mid_trial_resumes_elsewhere(setup: Setup) -> None:
    c = setup.cluster(spot=True, max_instances=1, max_idle_agent_period="10m")
    with up(c):
        exp = c.create(
            experiment(setup.tmp_path, pool=POOL, steps=40, step_seconds=0.25),
            context(setup.tmp_path),
        )
        (trial,) = wait_until(lambda: c.trials(exp) or None, 30, "the trial")
        # Some steps checkpointed on the first instance, then the cloud takes it away.
        wait_until(
            lambda: steps(c, trial["id"]) >= 5,
            60,
            "five steps reported",
        )
        (first,) = setup.ours("running")
        setup.cloud.interrupt(first["InstanceId"])
        assert c.wait_state(exp, "COMPLETED", timeout=240) == "COMPLETED"
        launched = setup.ours()
        assert len(launched) == 2 and launched[0]["InstanceId"] == first["InstanceId"]
        assert "resumed after step" in c.logs(trial["id"])


@pytest.mark.parametrize(
    ("settings", "aws_env", "error"),
    [
        ({"network_interface": {"subnet_id": "subnet-0nosuch"}}, True, "InvalidSubnetID"),
        ({}, False, "no AWS credentials"),
    ],
)
def test_a_provider_that_cannot_launch_says_why_and_backs_off(
    setup: Setup, settings: dict[str, Any], aws_env: bool, error: str
) -> None:
    c = setup.cluster(aws_env=aws_env, launch_error_retries=0, **settings)
    with up(c):
        c.create(experiment(setup.tmp_path, pool=POOL), context(setup.tmp_path))
        wait_until(lambda: error in provisioner(c, POOL)["error"], 30, "the pool's error")
        assert error in c.det("agent", "list").stdout
        time.sleep(5)
        log = master_log(c)
        warnings = [line for line in log.splitlines() if "WARNING" in line and error in line]
        assert len(warnings) == 1, warnings  # one line, however often it is retried
        # Backing off, not a loop: without credentials nothing can even be listed, so
        # nothing is decided; with a bad subnet a few launches are tried (1 s, 2 s, ...).
        assert log.count("launching 1 instance") <= 4
        if aws_env:
            assert log.count("launching 1 instance") >= 2
        assert setup.ours() == []
