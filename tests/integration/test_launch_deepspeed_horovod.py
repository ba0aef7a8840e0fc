"""The DeepSpeed and Horovod launchers as real processes (DeepSpeed runs only if installed)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import grpclib.server
import pytest

from determined.api.gen import v1
from determined.launch import deepspeed

# Real DeepSpeed runs compile its CPU ops on first use: minutes on a 2-core machine.
pytestmark = pytest.mark.slow

DEEPSPEED = [sys.executable, "-m", "determined.launch.deepspeed"]
HOROVOD = [sys.executable, "-m", "determined.launch.horovod"]

# DeepSpeed's CPU accelerator wants oneCCL for deepspeed.init_distributed(); plain gloo with
# the environment DeepSpeed's launcher sets is enough to prove the wiring.
ALL_REDUCE = """
import os, torch, torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item():g} "
      f"hostfile {os.path.exists(os.environ['DET_DEEPSPEED_HOSTFILE_PATH'])}", flush=True)
dist.destroy_process_group()
"""

needs_deepspeed = pytest.mark.skipif(not deepspeed.installed(), reason="deepspeed not installed")


def task_env(*, slots: int, addrs: list[str], rank: int = 0, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update(
        DET_ALLOCATION_ID="9.1",
        DET_SLOT_IDS=json.dumps(list(range(slots))),
        DET_CONTAINER_ADDRS=json.dumps(addrs),
        DET_CONTAINER_RANK=str(rank),
        **extra,
    )
    return env


@needs_deepspeed
def test_deepspeed_runs_two_tagged_workers_on_one_container(tmp_path: Path) -> None:
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    p = subprocess.run(
        [*DEEPSPEED, sys.executable, str(script)],
        env=task_env(slots=2, addrs=["127.0.0.1"]),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    lines = sorted(line for line in p.stdout.splitlines() if line.startswith("[rank="))
    assert lines == [
        "[rank=0] rank 0 of 2 sum 3 hostfile True",
        "[rank=1] rank 1 of 2 sum 3 hostfile True",
    ]


@contextlib.asynccontextmanager
async def serving(servicer: v1.DeterminedBase) -> AsyncIterator[int]:
    """A stand-in master serving ``servicer`` on a free local port, for the launchers' calls."""
    server = grpclib.server.Server([servicer])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    await server.start("127.0.0.1", port)
    try:
        yield port
    finally:
        server.close()
        await server.wait_closed()


class AllGatherMaster(v1.DeterminedBase):
    def __init__(self) -> None:
        self.calls: dict[tuple[str, str, int], dict[int, bytes]] = defaultdict(dict)
        self.done: dict[tuple[str, str, int], asyncio.Event] = defaultdict(asyncio.Event)

    async def allocation_all_gather(self, message: v1.AllGatherRequest) -> v1.AllGatherResponse:
        key = (message.allocation_id, message.group, message.seq)
        self.calls[key][message.rank] = message.data
        if len(self.calls[key]) == message.size:
            self.done[key].set()
        await self.done[key].wait()
        return v1.AllGatherResponse(data=[self.calls[key][r] for r in range(message.size)])


@needs_deepspeed
async def test_deepspeed_spans_two_containers_without_ssh(tmp_path: Path) -> None:
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    async with serving(AllGatherMaster()) as port:
        procs = [
            await asyncio.create_subprocess_exec(
                *DEEPSPEED,
                sys.executable,
                str(script),
                env=task_env(
                    slots=1,
                    addrs=["127.0.0.1", "127.0.0.1"],
                    rank=rank,
                    DET_MASTER=f"127.0.0.1:{port}",
                ),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for rank in (0, 1)
        ]
        results = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 180)
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, (out + err).decode()
    tagged = [
        [line for line in out.decode().splitlines() if line.startswith("[rank=")]
        for out, _ in results
    ]
    assert tagged == [
        ["[rank=0] rank 0 of 2 sum 3 hostfile True"],
        ["[rank=1] rank 1 of 2 sum 3 hostfile True"],
    ]


def test_deepspeed_missing_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in task_env(slots=1, addrs=["127.0.0.1"]).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(deepspeed, "installed", lambda: False)
    assert deepspeed.main(["python3", "train.py"]) == 1
    assert "deepspeed is not installed: pip install deepspeed" in capsys.readouterr().err


def test_horovod_chief_without_horovodrun_is_a_clear_error(tmp_path: Path) -> None:
    env = task_env(slots=2, addrs=["127.0.0.1"])
    env["PATH"] = f"{tmp_path}:/usr/bin:/bin"  # no horovodrun anywhere on it
    p = subprocess.run([*HOROVOD, "python3", "train.py"], env=env, capture_output=True, text=True)
    assert p.returncode == 1
    assert "horovodrun is not installed: pip install horovod" in p.stderr


class DaemonMaster(v1.DeterminedBase):
    def __init__(self) -> None:
        self.marked: list[tuple[str, str]] = []

    async def mark_allocation_resources_daemon(
        self, message: v1.MarkAllocationResourcesDaemonRequest
    ) -> v1.MarkAllocationResourcesDaemonResponse:
        self.marked.append((message.allocation_id, message.resources_id))
        return v1.MarkAllocationResourcesDaemonResponse()


async def test_horovod_non_chief_marks_itself_a_daemon_and_waits_until_ended() -> None:
    master = DaemonMaster()
    async with serving(master) as port:
        env = task_env(
            slots=1,
            addrs=["198.18.0.1", "198.18.0.2"],
            rank=1,
            DET_MASTER=f"127.0.0.1:{port}",
            DET_RESOURCES_ID="9.1.1",
        )
        proc = await asyncio.create_subprocess_exec(
            *HOROVOD, "--trial", "model_def:T", env=env, stderr=asyncio.subprocess.PIPE
        )
        assert proc.stderr is not None
        line = await asyncio.wait_for(proc.stderr.readline(), 30)
        assert b"waiting" in line
        assert master.marked == [("9.1", "9.1.1")]
        await asyncio.sleep(0.3)
        assert proc.returncode is None
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0


def test_horovod_non_chief_without_a_resources_id_is_a_clear_error() -> None:
    env = task_env(slots=1, addrs=["198.18.0.1", "198.18.0.2"], rank=1)
    p = subprocess.run(
        [*HOROVOD, "--trial", "model_def:T"], env=env, capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 1
    assert "DET_RESOURCES_ID is not set" in p.stderr
    assert "Traceback" not in p.stderr
