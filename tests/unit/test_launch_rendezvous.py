from __future__ import annotations

import subprocess

import pytest

from determined import ClusterInfo
from determined.launch import _rendezvous


def info(addrs: list[str], rank: int = 0) -> ClusterInfo:
    return ClusterInfo(
        master_url="http://127.0.0.1:8080",
        cluster_id="c",
        agent_id="a",
        slot_ids=[0],
        task_id="t",
        allocation_id="t.1",
        session_token="",
        task_type="TRIAL",
        container_addrs=addrs,
        container_rank=rank,
    )


def an_interface_with_an_address() -> tuple[str, str]:
    """A non-loopback interface of this host and its IPv4 address, as `ip` lists them."""
    try:
        out = subprocess.run(
            ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10
        ).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        # "2: eth0    inet 192.0.2.2/24 brd ... scope global eth0 ..."
        fields = line.split()
        if len(fields) > 3 and fields[1] != "lo" and fields[2] == "inet":
            return fields[1].split("@")[0], fields[3].split("/")[0]
    pytest.skip("this host lists no interface with an IPv4 address besides loopback")


def test_loopback_is_found_on_lo() -> None:
    assert _rendezvous.interface_of("127.0.0.1") == "lo"


def test_an_address_of_no_interface_is_none() -> None:
    assert _rendezvous.interface_of("198.19.255.254") is None


def test_one_container_or_loopback_needs_no_interface() -> None:
    assert _rendezvous.interface_env(info(["198.19.255.254"]), {}) == {}
    assert _rendezvous.interface_env(info(["127.0.0.1", "127.0.0.1"]), {}) == {}


def test_gloo_and_nccl_use_the_interface_of_the_containers_own_address() -> None:
    name, address = an_interface_with_an_address()
    peers = info(["198.19.255.254", address], rank=1)
    assert _rendezvous.interface_env(peers, {}) == {
        "GLOO_SOCKET_IFNAME": name,
        "NCCL_SOCKET_IFNAME": name,
    }
    # A user's own choice wins.
    assert _rendezvous.interface_env(peers, {"NCCL_SOCKET_IFNAME": "ib0"}) == {
        "GLOO_SOCKET_IFNAME": name
    }
