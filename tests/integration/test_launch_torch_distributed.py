"""torch_distributed with real torchrun and gloo workers on this machine."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import grpclib.server
import pytest

from determined.api.gen import v1

pytest.importorskip("torch")

LAUNCH = [sys.executable, "-m", "determined.launch.torch_distributed"]

ALL_REDUCE = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item():g} "
      f"chief {os.environ['DET_CHIEF_IP']}", flush=True)
dist.destroy_process_group()
"""

CRASH_ONE = """
import os, sys, time
if os.environ["RANK"] == "1":
    # Crash only once the other worker is up, so the test sees whom the launch must end.
    deadline = time.time() + 60
    while not os.path.exists(sys.argv[2]) and time.time() < deadline:
        time.sleep(0.05)
    open(sys.argv[1], "w").write(str(time.time()))
    sys.exit(7)
open(sys.argv[2] + ".tmp", "w").write(str(os.getpid()))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
time.sleep(300)
"""


def task_env(*, slots: int, addrs: list[str], rank: int = 0, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env.update(
        DET_ALLOCATION_ID="7.1",
        DET_SLOT_IDS=json.dumps(list(range(slots))),
        DET_CONTAINER_ADDRS=json.dumps(addrs),
        DET_CONTAINER_RANK=str(rank),
        **extra,
    )
    return env


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_two_workers_all_reduce_and_tag_their_lines(tmp_path: Path) -> None:
    script = write(tmp_path / "all_reduce.py", ALL_REDUCE)
    p = subprocess.run(
        [*LAUNCH, sys.executable, script],
        env=task_env(slots=2, addrs=["127.0.0.1"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    lines = sorted(line for line in p.stdout.splitlines() if line.startswith("[rank="))
    assert lines == [
        "[rank=0] rank 0 of 2 sum 3 chief 127.0.0.1",
        "[rank=1] rank 1 of 2 sum 3 chief 127.0.0.1",
    ]


def test_a_crashing_worker_ends_the_launch_promptly(tmp_path: Path) -> None:
    script = write(tmp_path / "crash.py", CRASH_ONE)
    crashed_at, sleeper_pid = tmp_path / "crashed_at", tmp_path / "sleeper_pid"
    p = subprocess.run(
        [*LAUNCH, sys.executable, script, str(crashed_at), str(sleeper_pid)],
        env=task_env(slots=2, addrs=["127.0.0.1"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    ended_at = time.time()
    assert p.returncode != 0
    assert ended_at - float(crashed_at.read_text()) < 10
    with pytest.raises(ProcessLookupError):
        os.kill(int(sleeper_pid.read_text()), 0)


def test_sigterm_ends_every_worker(tmp_path: Path) -> None:
    script = write(tmp_path / "sleep.py", "import time\nprint('up', flush=True)\ntime.sleep(300)\n")
    proc = subprocess.Popen(
        [*LAUNCH, sys.executable, script],
        env=task_env(slots=2, addrs=["127.0.0.1"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    seen = {proc.stdout.readline().strip(), proc.stdout.readline().strip()}
    assert seen == {"[rank=0] up", "[rank=1] up"}
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) != 0


def test_usage_errors_exit_2() -> None:
    p = subprocess.run(LAUNCH, env=task_env(slots=1, addrs=["127.0.0.1"]), capture_output=True)
    assert p.returncode == 2
    assert b"usage: python3 -m determined.launch.torch_distributed" in p.stderr


class AllGatherMaster(v1.DeterminedBase):
    """Just enough of the master for the launchers' rendezvous."""

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


async def test_two_containers_share_the_chiefs_port_through_the_master(tmp_path: Path) -> None:
    script = write(tmp_path / "all_reduce.py", ALL_REDUCE)
    master = AllGatherMaster()
    server = grpclib.server.Server([master])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    await server.start("127.0.0.1", port)
    try:
        procs = [
            await asyncio.create_subprocess_exec(
                *LAUNCH,
                sys.executable,
                script,
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
        results = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 120)
    finally:
        server.close()
        await server.wait_closed()
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err.decode()
    outs = [out.decode().strip() for out, _ in results]
    assert outs == [
        "[rank=0] rank 0 of 2 sum 3 chief 127.0.0.1",
        "[rank=1] rank 1 of 2 sum 3 chief 127.0.0.1",
    ]
    assert list(master.calls) == [("7.1", "launcher", 0)]
