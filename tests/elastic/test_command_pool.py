"""An elastic pool whose provider is the admin's own programs (provider type command): the
master runs tests/cloud_commands/{launch,terminate,list}, the test cloud boots each
instance as a host running the master's startup script, and a real agent joins."""

from __future__ import annotations

import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cloud import CommandCloud, default_env
from tests.cluster import Cluster, wait_until
from tests.elastic.conftest import (
    context,
    elastic_cluster,
    experiment,
    instances,
    master_config,
    master_log,
    provisioner,
    up,
    wait_log,
)
from tests.netns import Network

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

POOL = "burst"


def provider(cloud: CommandCloud, **settings: Any) -> dict[str, Any]:
    return {
        "type": "command",
        "launch": [str(cloud.command("launch"))],
        "terminate": [str(cloud.command("terminate"))],
        "list": [str(cloud.command("list"))],
        "max_instances": 2,
        "max_idle_agent_period": "4s",
        "max_agent_starting_period": "60s",
        **settings,
    }


class Setup:
    def __init__(self, tmp_path: pathlib.Path, network: Network) -> None:
        self.tmp_path = tmp_path
        self.network = network
        (tmp_path / "cluster").mkdir()
        env = default_env({"PYDET_AGENT_ROOT": str(tmp_path / "agents")})
        self.cloud = CommandCloud(tmp_path / "books", network, tmp_path / "hosts", env=env)

    def cluster(self, **settings: Any) -> Cluster:
        config = master_config(POOL, provider(self.cloud, **settings))
        c = elastic_cluster(self.tmp_path, self.network, config)
        c.master_env = self.cloud.env()
        return c


@pytest.fixture
def setup(tmp_path: pathlib.Path, network: Network) -> Iterator[Setup]:
    s = Setup(tmp_path, network)
    with s.cloud:
        yield s


def launched(setup: Setup) -> list[str]:
    """Every instance the master launched, in launch order."""
    return [r["id"] for r in setup.cloud.store.records()]


def record(setup: Setup, instance_id: str) -> dict[str, Any]:
    found = setup.cloud.store.record(instance_id)
    assert found is not None, instance_id
    return found


def test_a_queue_grows_the_pool_to_its_maximum_and_idle_instances_go(setup: Setup) -> None:
    c = setup.cluster()
    with up(c):
        exp = c.create(
            experiment(setup.tmp_path, pool=POOL, trials=4, steps=4), context(setup.tmp_path)
        )
        wait_until(lambda: len(launched(setup)) == 2, 30, "two instances launched")
        assert c.wait_state(exp, "COMPLETED", timeout=180) == "COMPLETED"
        # Four trials on two instances: never a third, and every trial ran on one of them.
        assert len(launched(setup)) == 2
        agents = {i["agentId"] for i in instances(c, POOL)}
        assert len(agents) == 2
        log = master_log(c)
        assert f"launching 2 instances: 4 slots queued in pool {POOL}" in log
        # Idle for max_idle_agent_period (4 s): both terminated, and their hosts gone.
        wait_until(lambda: instances(c, POOL) == [], 20, "the idle instances to be terminated")
        assert "idle for max_idle_agent_period" in master_log(c)
        setup.cloud.wait_for(lambda hosts: not any(h.up for h in hosts.values()), 10)
        # Their agents leave the agent table at the provider's next listing.
        wait_until(
            lambda: not [a for a in c.agents_json() if a["resourcePools"] == [POOL]],
            15,
            "the terminated instances' agents to leave the table",
        )


def test_an_instance_whose_agent_never_connects_is_replaced(setup: Setup) -> None:
    # The startup script fails before det-agent starts: the agent never connects.
    c = setup.cluster(max_instances=1, max_agent_starting_period="5s", startup_script="exit 3")
    with up(c):
        c.create(experiment(setup.tmp_path, pool=POOL), context(setup.tmp_path))
        wait_until(lambda: len(launched(setup)) >= 1, 30, "an instance launched")
        first = launched(setup)[0]
        wait_log(c, f"{first} (its agent did not connect within max_agent_starting_period)", 30)
        # Work is still queued: another instance replaces it.
        wait_until(lambda: len(launched(setup)) >= 2, 30, "a replacement launched")
        assert record(setup, first)["state"] in ("stopping", "terminated")


def test_a_failing_provider_backs_off_and_says_why(setup: Setup) -> None:
    setup.cloud.refuse_launches("no capacity in zone ci-1")
    c = setup.cluster(launch_error_retries=1)
    with up(c):
        c.create(experiment(setup.tmp_path, pool=POOL), context(setup.tmp_path))
        wait_until(lambda: provisioner(c, POOL)["error"], 30, "the pool's error")
        error = provisioner(c, POOL)["error"]
        assert "no capacity in zone ci-1" in error
        shown = c.det("agent", "list").stdout
        assert f"error: {error}" in shown
        start = time.monotonic()
        time.sleep(6)
        attempts = master_log(c).count("launching 1 instance")
        # Backing off (1 s, 2 s, 4 s, ...): a handful of tries, never one per tick (0.25 s).
        assert 2 <= attempts <= 5, attempts
        assert master_log(c).count("no capacity in zone ci-1") == 1  # logged once
        setup.cloud.refuse_launches(None)
        wait_until(lambda: len(launched(setup)) == 1, 30 + time.monotonic() - start, "a launch")
        wait_until(lambda: not provisioner(c, POOL)["error"], 30, "the error to clear")


def test_a_master_killed_mid_launch_neither_forgets_nor_doubles(setup: Setup) -> None:
    c = setup.cluster(max_instances=3)
    with up(c):
        exp = c.create(
            experiment(setup.tmp_path, pool=POOL, trials=3, steps=30, step_seconds=0.2),
            context(setup.tmp_path),
        )
        wait_until(lambda: len(launched(setup)) >= 1, 30, "a first instance launched")
        c.stop_master(signal.SIGKILL)  # while it launches the others
        c.start_master()
        assert c.wait_state(exp, "COMPLETED", timeout=240) == "COMPLETED"
        # Three one-slot trials: three instances in all, whatever the kill interrupted.
        assert len(launched(setup)) == 3, setup.cloud.describe()
        agents = {record(setup, i)["agent_id"] for i in launched(setup)}
        assert len(agents) == 3
