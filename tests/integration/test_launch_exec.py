"""determined.exec.launch: the startup hook and the entrypoint in a real directory, and the
whole task entry against a stand-in master that serves the experiment's context."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpclib.events
import grpclib.server
import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from determined import ClusterInfo
from determined.api.gen import v1
from determined.common import errors
from determined.common.context import pack_context
from determined.exec.launch import run_task
from determined.launch import rpc

TOKEN = "task-token"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- after the download: hook and entrypoint --------------------------------------------


def test_startup_hook_runs_first_in_the_context_directory(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "startup-hook.sh", "echo hook-ran; echo ready > marker\n")
    code = run_task(tmp_path, "cat marker; pwd; exit 4")
    out = capfd.readouterr().out
    assert code == 4
    assert out.splitlines() == ["hook-ran", "ready", str(tmp_path)]


def test_a_failing_hook_stops_the_task_with_its_exit_code(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "startup-hook.sh", "echo broken >&2; exit 3\n")
    assert run_task(tmp_path, "echo entrypoint-ran") == 3
    captured = capfd.readouterr()
    assert "entrypoint-ran" not in captured.out
    assert "startup-hook.sh failed with exit code 3" in captured.err


def test_list_entrypoint_runs_without_a_shell(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run_task(tmp_path, ["printf", "%s|", "a b", "$HOME"]) == 0
    assert capfd.readouterr().out == "a b|$HOME|"


def test_death_by_signal_gives_128_plus_signal(tmp_path: Path) -> None:
    assert run_task(tmp_path, "kill -TERM $$") == 128 + signal.SIGTERM


def test_a_bad_entrypoint_is_a_clear_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run_task(tmp_path, None) == 1
    assert "entrypoint must be a command string or a list" in capfd.readouterr().err


def test_legacy_trial_entrypoint_reaches_the_torch_distributed_launcher(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Off-cluster the launcher refuses to run, which proves that it was the one started.
    monkeypatch.delenv("DET_ALLOCATION_ID", raising=False)
    assert run_task(tmp_path, "model_def:MyTrial", python=sys.executable) == 2
    assert "determined.launch.torch_distributed runs inside a pydet task" in capfd.readouterr().err


# --- the whole entry, against a stand-in master -------------------------------------------


class ContextMaster(v1.DeterminedBase):
    def __init__(self, contexts: dict[int, bytes]) -> None:
        self.contexts = contexts
        self.tokens: list[str] = []

    async def get_experiment_context(
        self, message: v1.GetExperimentContextRequest
    ) -> v1.GetExperimentContextResponse:
        if message.experiment_id not in self.contexts:
            raise GRPCError(Status.NOT_FOUND, f"experiment {message.experiment_id} not found")
        return v1.GetExperimentContextResponse(context=self.contexts[message.experiment_id])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def serve(master: ContextMaster, port: int) -> grpclib.server.Server:
    server = grpclib.server.Server([master])

    async def on_request(event: grpclib.events.RecvRequest) -> None:
        master.tokens.append(str(event.metadata.get("x-det-token", "")))

    grpclib.events.listen(server, grpclib.events.RecvRequest, on_request)
    await server.start("127.0.0.1", port)
    return server


@pytest.fixture
def context(tmp_path: Path) -> bytes:
    src = tmp_path / "src"
    src.mkdir()
    write(src / "startup-hook.sh", "echo hook > from-hook\n")
    write(
        src / "train.py",
        "import json, os, sys\n"
        "print('trained', open('from-hook').read().strip(), os.getcwd() == sys.argv[1])\n"
        "sys.exit(int(sys.argv[2]))\n",
    )
    return pack_context(src)


def task_env(port: int, entrypoint: object, experiment_id: int = 1) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env.update(
        DET_MASTER=f"127.0.0.1:{port}",
        DET_SESSION_TOKEN=TOKEN,
        DET_ALLOCATION_ID="1.1",
        DET_TASK_ID="1.1",
        DET_TASK_TYPE="TRIAL",
        DET_TRIAL_ID="1",
        DET_EXPERIMENT_ID=str(experiment_id),
        DET_SLOT_IDS="[]",
        DET_EXPERIMENT_CONFIG=json.dumps({"entrypoint": entrypoint}),
    )
    return env


async def start_launch(
    workdir: Path, env: dict[str, str], *, stdin: int | None = None
) -> asyncio.subprocess.Process:
    workdir.mkdir(exist_ok=True)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "determined.exec.launch",
        cwd=workdir,
        env=env,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.fixture
async def master(context: bytes) -> AsyncIterator[tuple[ContextMaster, int]]:
    stand_in = ContextMaster({1: context})
    port = free_port()
    server = await serve(stand_in, port)
    yield stand_in, port
    server.close()
    await server.wait_closed()


async def test_task_downloads_its_context_runs_hook_and_entrypoint(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    stand_in, port = master
    workdir = tmp_path / "work"
    env = task_env(port, f"python3 train.py {workdir} 6")
    proc = await start_launch(workdir, env)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 6, err.decode()
    assert out.decode().splitlines() == ["trained hook True"]
    assert stand_in.tokens == [TOKEN]


async def test_an_unknown_experiment_fails_at_once_with_one_line(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    _, port = master
    proc = await start_launch(tmp_path / "work", task_env(port, "true", experiment_id=99))
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 1
    assert "cannot download the experiment's context: experiment 99 not found" in err.decode()


async def test_a_master_that_comes_up_late_is_waited_for(context: bytes, tmp_path: Path) -> None:
    port = free_port()
    workdir = tmp_path / "work"
    proc = await start_launch(workdir, task_env(port, ["python3", "train.py", str(workdir), "0"]))
    await asyncio.sleep(2.0)
    server = await serve(ContextMaster({1: context}), port)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        server.close()
        await server.wait_closed()
    assert proc.returncode == 0, err.decode()
    assert b"trained hook True" in out
    assert b"retrying" in err


async def test_sigterm_reaches_the_entrypoint(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    _, port = master
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = await start_launch(tmp_path / "work", task_env(port, ["python3", "-c", script]))
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"ready\n"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 10) == 42
    assert time.monotonic() - started < 5


async def test_off_cluster_it_says_so_and_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    proc = await start_launch(tmp_path / "work", env)
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 2
    assert b"DET_ALLOCATION_ID is not set" in err


def test_an_unreachable_master_gives_up_after_the_retry_budget() -> None:
    info = ClusterInfo.from_env(task_env(free_port(), "true"))
    assert info is not None
    started = time.monotonic()
    with pytest.raises(errors.Unavailable, match="gave up after"):
        rpc.fetch_context(info, 1, retry_seconds=1.0)
    assert time.monotonic() - started < 5
