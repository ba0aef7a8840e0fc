"""The test cloud on its own (tests/cloud.py): instances become hosts, and vanish.

No master here: the user data is a small script that says where it runs and sleeps, with
a child in its process group and a daemon that left it; ending the instance must kill all
of them and remove the host's namespace.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from tests.cloud import Cloud, CloudError, CommandCloud, HostInfo, default_env
from tests.ec2server import EC2Server, ec2_server
from tests.netns import Network

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

# Writes "<its pid> <child's pid> <daemon's pid> <hostname> <hostname -I>" once, atomically.
USER_DATA = """#!/bin/bash
set -e
sleep 600 &
child=$!
setsid sleep 600 < /dev/null > /dev/null 2>&1 &
daemon=$!
out="$OUT_DIR/$PYDET_INSTANCE_ID"
echo "$$ $child $daemon $(hostname) $(hostname -I)" > "$out.tmp"
mv "$out.tmp" "$out"
echo "booted $PYDET_INSTANCE_ID"
wait
"""


@pytest.fixture(scope="module")
def ec2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EC2Server]:
    yield from ec2_server(tmp_path_factory)


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is no zombie."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def booted(cloud: Cloud | CommandCloud, ids: list[str], out: pathlib.Path) -> dict[str, list[str]]:
    """Waits for every instance's host and marker; checks them; the markers' fields."""
    cloud.wait_for(
        lambda h: all(i in h and h[i].alive and (out / i).exists() for i in ids),
        timeout=10,
        what=f"hosts for {ids}",
    )
    hosts = cloud.hosts()
    markers = {}
    for instance_id in ids:
        info = hosts[instance_id]
        pid, child, daemon, hostname, *addresses = (out / instance_id).read_text().split()
        assert int(pid) == info.pid, (pid, info)
        assert hostname == instance_id
        assert addresses == [info.address], addresses
        assert info.address.startswith(cloud.network.subnet + ".")
        assert info.namespace in namespaces()
        assert all(running(int(p)) for p in (pid, child, daemon))
        assert f"booted {instance_id}" in info.log.read_text()
        markers[instance_id] = [pid, child, daemon]
    return markers


def vanishes(cloud: Cloud | CommandCloud, instance_id: str, pids: list[str]) -> HostInfo:
    """Within 2 s of its end the host is gone: its processes and its namespace."""
    cloud.wait_for(lambda h: not h[instance_id].up, timeout=2, what=f"{instance_id} gone")
    info = cloud.hosts()[instance_id]
    assert not info.alive and info.returncode == -9, info
    assert not any(running(int(p)) for p in pids), pids
    assert info.namespace not in namespaces()
    return info


def test_ec2_instances_become_hosts_and_vanish(
    ec2: EC2Server, network: Network, tmp_path: pathlib.Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    subnet = ec2.subnet(network)
    env = default_env({"OUT_DIR": str(out)})
    with Cloud(ec2.client, network, tmp_path / "logs", env=env) as cloud:
        ids = ec2.run(subnet, USER_DATA, count=2)
        markers = booted(cloud, ids, out)
        described = ec2.client.describe_instances(InstanceIds=ids)["Reservations"][0]
        private = {i["InstanceId"]: i["PrivateIpAddress"] for i in described["Instances"]}
        assert {i: cloud.hosts()[i].address for i in ids} == private

        ec2.terminate(ids[0])  # as the master would
        vanishes(cloud, ids[0], markers[ids[0]])
        assert cloud.hosts()[ids[1]].alive

        cloud.interrupt(ids[1])  # behind the master's back
        vanishes(cloud, ids[1], markers[ids[1]])
        assert network.hosts == []


def test_an_ec2_instance_outside_the_test_range_is_refused(
    ec2: EC2Server, network: Network, tmp_path: pathlib.Path
) -> None:
    with Cloud(ec2.client, network, tmp_path / "logs") as cloud:
        (instance_id,) = ec2.client.run_instances(
            ImageId="ami-12345678", MinCount=1, MaxCount=1, UserData="true"
        )["Instances"]
        assert not instance_id["PrivateIpAddress"].startswith("198.18.")
        with pytest.raises(CloudError, match=r"outside 198\.18\.0\.0/15: refused"):
            cloud.wait_for(lambda h: False, timeout=5, what="the refusal")
        assert network.hosts == []
    ec2.terminate(instance_id["InstanceId"])


def commands(cloud: CommandCloud, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    name, *args = argv
    return subprocess.run(
        [str(cloud.command(name)), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **cloud.env()},
    )


def listed(cloud: CommandCloud) -> dict[str, dict[str, object]]:
    proc = commands(cloud, "list")
    assert proc.returncode == 0, proc.stderr
    return {r["id"]: r for r in map(json.loads, proc.stdout.splitlines())}


def test_command_cloud_instances_become_hosts_and_vanish(
    network: Network, tmp_path: pathlib.Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    env = default_env({"OUT_DIR": str(out)})
    with CommandCloud(tmp_path / "cloud", network, tmp_path / "logs", env=env) as cloud:
        ids = []
        for agent_id in ("agent-a", "agent-b"):
            launched = commands(cloud, "launch", agent_id, stdin=USER_DATA)
            assert launched.returncode == 0, launched.stderr
            ids.append(launched.stdout.strip())
        records = listed(cloud)
        assert set(records) == set(ids)
        assert [records[i]["agent_id"] for i in ids] == ["agent-a", "agent-b"]
        for record in records.values():
            assert record["state"] in ("starting", "running")
            assert isinstance(record["launched_at"], float)

        markers = booted(cloud, ids, out)
        cloud.wait_for(
            lambda h: all(r["state"] == "running" for r in listed(cloud).values()), timeout=5
        )

        terminated = commands(cloud, "terminate", ids[0], "ci-nosuch")
        assert terminated.returncode == 1 and "ci-nosuch" in terminated.stderr
        vanishes(cloud, ids[0], markers[ids[0]])
        cloud.interrupt(ids[1])
        vanishes(cloud, ids[1], markers[ids[1]])
        cloud.wait_for(
            lambda h: all(r["state"] == "terminated" for r in listed(cloud).values()), timeout=5
        )
        assert commands(cloud, "terminate", ids[0]).returncode == 0  # again: no error

        cloud.refuse_launches("no capacity in ci-zone-1")
        refused = commands(cloud, "launch", "agent-c", stdin=USER_DATA)
        assert refused.returncode == 1 and "no capacity" in refused.stderr
        assert set(listed(cloud)) == set(ids)
        cloud.refuse_launches(None)
        (third,) = commands(cloud, "launch", "agent-c", stdin=USER_DATA).stdout.split()
        booted(cloud, [third], out)
    # close() took the last host away.
    assert cloud.hosts()[third].up is False
    assert network.hosts == []
