"""What a task container is made of, checked without an engine (runs in the default suite)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pydet.agent import config, docker_harness, docker_logs, docker_positions, docker_spec
from pydet.agent.runtime import BindMount, ContainerSpec, DeviceMapping, StartOrder
from pydet.agent.slots import SlotSpec

GPUS = {
    "0": SlotSpec("0", "cuda", "H100", "GPU-aaa"),
    "1": SlotSpec("1", "cuda", "H100", "GPU-bbb"),
    "2": SlotSpec("2", "cuda", "H100", ""),
}
CPUS = {"0": SlotSpec("0", "cpu", "cpu")}


def order(**spec: Any) -> StartOrder:
    storage = {"type": "shared_fs", "host_path": "/data/ckpt"}
    return StartOrder(
        container_id="7.123.0",
        allocation_id="7.123",
        task_id="7",
        argv=("python3", "-m", "determined.exec.launch"),
        env={
            "DET_MASTER": "elsewhere:1",
            "DET_EXPERIMENT_CONFIG": json.dumps({"checkpoint_storage": storage}),
            "PYTHONPATH": "/mine",
        },
        slot_ids=("1", "2"),
        spec=ContainerSpec(**spec),
    )


def body(
    o: StartOrder, *, harness: bool = False, slots: dict[str, SlotSpec] = GPUS
) -> dict[str, Any]:
    mounted = [docker_harness.HostPath("/site/determined", "determined")] if harness else []
    return docker_spec.create_body(
        o,
        image="img:1",
        agent_id="node-1",
        master="127.0.0.1:8080",
        workdir=Path("/work/7.123.0"),
        slots=slots,
        harness=mounted,
        storage=docker_spec.shared_fs_path(o.env),
    )


def test_container_uses_host_network_and_runs_the_order_argv_in_the_workdir() -> None:
    b = body(order())
    assert b["HostConfig"]["NetworkMode"] == "host"
    assert [b["Entrypoint"][0], *b["Cmd"]] == ["python3", "-m", "determined.exec.launch"]
    assert b["WorkingDir"] == "/run/determined/workdir"
    assert b["HostConfig"]["Mounts"][0] == {
        "Type": "bind",
        "Source": "/work/7.123.0",
        "Target": "/run/determined/workdir",
    }
    assert b["Tty"] is False


def test_environment_is_the_order_plus_the_agent_and_no_host_variables() -> None:
    env = dict(e.split("=", 1) for e in body(order())["Env"])
    assert env["DET_MASTER"] == "127.0.0.1:8080"  # the agent's view of the master wins
    assert env["DET_AGENT_ID"] == "node-1"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["PYTHONPATH"] == "/mine"
    assert "PATH" not in env and "HOME" not in env


def test_mounted_harness_comes_first_on_pythonpath_read_only() -> None:
    b = body(order(), harness=True)
    env = dict(e.split("=", 1) for e in b["Env"])
    assert env["PYTHONPATH"] == "/run/determined/pylib:/mine"
    assert {
        "Type": "bind",
        "Source": "/site/determined",
        "Target": "/run/determined/pylib/determined",
        "ReadOnly": True,
    } in b["HostConfig"]["Mounts"]


def test_config_mounts_devices_caps_shm_and_checkpoint_storage() -> None:
    o = order(
        bind_mounts=(
            BindMount("/data", "/data", True, "rslave"),
            BindMount("/scratch", "scratch"),
        ),
        shm_size=1 << 30,
        add_capabilities=("SYS_PTRACE",),
        drop_capabilities=("NET_RAW",),
        devices=(DeviceMapping("/dev/fuse", "/dev/fuse", "rw"),),
    )
    hc = body(o)["HostConfig"]
    mounts = {m["Target"]: m for m in hc["Mounts"]}
    assert mounts["/data"] == {
        "Type": "bind",
        "Source": "/data",
        "Target": "/data",
        "ReadOnly": True,
        "BindOptions": {"Propagation": "rslave"},
    }
    assert mounts["/run/determined/workdir/scratch"]["Source"] == "/scratch"
    assert mounts["/data/ckpt"]["Source"] == "/data/ckpt"  # shared_fs at the same path
    assert hc["ShmSize"] == 1 << 30
    assert hc["CapAdd"] == ["SYS_PTRACE"] and hc["CapDrop"] == ["NET_RAW"]
    assert hc["Devices"] == [
        {"PathOnHost": "/dev/fuse", "PathInContainer": "/dev/fuse", "CgroupPermissions": "rw"}
    ]


def test_gpus_are_requested_for_the_allocated_slots_only() -> None:
    assert body(order())["HostConfig"]["DeviceRequests"] == [
        {"Driver": "nvidia", "DeviceIDs": ["GPU-bbb", "2"], "Capabilities": [["gpu"]]}
    ]
    cpu = StartOrder("c", "a", "t", ("true",), {}, ("0",))
    assert "DeviceRequests" not in body(cpu, slots=CPUS)["HostConfig"]


def test_labels_tie_the_container_to_agent_and_allocation() -> None:
    labels = body(order(labels={"ai.pydet.task": "7"}))["Labels"]
    assert labels == {
        "ai.pydet.task": "7",
        "ai.pydet.agent": "node-1",
        "ai.pydet.container": "7.123.0",
        "ai.pydet.allocation": "7.123",
        "ai.pydet.workdir": "/work/7.123.0",
    }


def test_container_names_are_valid_for_the_engine() -> None:
    assert docker_spec.container_name("node 1", "7.123.0") == "pydet-node_1-7.123.0"


def test_registry_auth_becomes_the_header_and_image_names_split() -> None:
    header = docker_spec.registry_auth_header('{"username": "u", "password": "p"}')
    assert header is not None
    assert json.loads(base64.urlsafe_b64decode(header)) == {"username": "u", "password": "p"}
    assert docker_spec.registry_auth_header("") is None
    with pytest.raises(ValueError):
        docker_spec.registry_auth_header("[1]")
    assert docker_spec.split_image("ubuntu") == ("ubuntu", "latest")
    assert docker_spec.split_image("reg:5000/team/img:2.1") == ("reg:5000/team/img", "2.1")
    assert docker_spec.split_image("reg:5000/img") == ("reg:5000/img", "latest")
    assert docker_spec.split_image("img@sha256:ab") == ("img@sha256:ab", "")


def test_harness_is_mounted_unless_the_image_has_it() -> None:
    labelled = {docker_harness.HARNESS_LABEL: "installed"}
    assert not docker_harness.use_mount("auto", labelled)
    assert docker_harness.use_mount("auto", {})
    assert docker_harness.use_mount("mount", labelled)
    assert not docker_harness.use_mount("image", {})
    names = [p.name for p in docker_harness.host_packages()]
    assert names[0] == "determined" and "grpclib" in names and "yaml" in names
    assert all(Path(p.host_path).exists() for p in docker_harness.host_packages())


def frame(kind: int, payload: bytes) -> bytes:
    return bytes([kind, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def test_log_frames_become_lines_per_stream_with_engine_timestamps() -> None:
    parser = docker_logs.FrameParser()
    data = (
        frame(1, b"2024-05-01T12:00:00.5Z hello\n")
        + frame(2, b"2024-05-01T12:00:01.000000001Z oops\n")
        + frame(1, b"2024-05-01T12:00:02Z partial ")
    )
    lines = parser.feed(data[:5]) + parser.feed(data[5:])
    base = 1714564800 * 10**9
    assert lines == [
        docker_logs.Line("stdout", base + 500_000_000, "hello"),
        docker_logs.Line("stderr", base + 1_000_000_001, "oops"),
    ]
    assert parser.feed(frame(1, b"2024-05-01T12:00:03Z line\n")) == [
        docker_logs.Line("stdout", base + 3 * 10**9, "partial line")
    ]
    assert parser.flush() == []


def test_log_lines_already_handed_on_are_skipped_after_a_restart() -> None:
    after = docker_logs.parse_timestamp("2024-05-01T12:00:01Z")
    assert after is not None
    parser = docker_logs.FrameParser(after_ns=after)
    lines = parser.feed(
        frame(1, b"2024-05-01T12:00:00Z old\n")
        + frame(1, b"2024-05-01T12:00:01Z last seen\n")
        + frame(1, b"2024-05-01T12:00:01.1Z new\n")
    )
    assert [ln.text for ln in lines] == ["new"]
    assert docker_logs.since_param(after) == "1714564801.000000000"


def test_agent_config_selects_docker_with_its_options(tmp_path: Path) -> None:
    cfg = config.load(["--runtime", "docker", "--default-image", "mine:2"], environ={})
    assert (cfg.runtime, cfg.default_image, cfg.docker_harness) == ("docker", "mine:2", "auto")
    f = tmp_path / "agent.yaml"
    f.write_text("runtime: docker\ndefault_image: x:1\ndocker_harness: mount\n")
    cfg = config.load(["--config-file", str(f)], environ={})
    assert (cfg.default_image, cfg.docker_harness) == ("x:1", "mount")
    with pytest.raises(config.ConfigError, match="docker_harness: must be one of"):
        config.load(["--docker-harness", "maybe"], environ={})


async def test_log_positions_survive_for_the_next_agent_and_go_with_the_container(
    tmp_path: Path,
) -> None:
    positions = docker_positions.LogPositions(tmp_path / "pos", interval=0.01)
    positions.update("c1", 123)
    positions.update("c2", 456)
    await wait_for(lambda: (tmp_path / "pos" / "c2").exists())
    await positions.close()
    later = docker_positions.LogPositions(tmp_path / "pos")
    assert await later.read("c1") == 123
    assert await later.read("nope") == 0
    await later.forget("c1")
    await later.prune(["c3"])
    assert sorted(p.name for p in (tmp_path / "pos").iterdir()) == []


async def wait_for(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not check():
            await asyncio.sleep(0.01)
