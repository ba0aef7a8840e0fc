"""A ``python3 script.py`` entrypoint run in a fork of the launcher behaves as ``python3``
would run it, and a standby launcher runs the task it is handed on stdin.

The launcher runs as on an agent: ``python3 -m determined.exec.launch`` with this
interpreter's directory first on PATH, against a stand-in master serving the context.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpclib.server
import pytest

from determined.common.context import pack_context
from tests.integration.test_launch_exec import (
    ContextMaster,
    free_port,
    serve,
    start_launch,
    task_env,
)

FORKED = b"running the entrypoint in a fork of the launcher"

SCRIPT = """\
import logging, os, pickle, signal, sys, threading, time

class Point:
    x = 1

def later():
    time.sleep(0.3)
    print("thread joined", flush=True)

print("name", __name__)
print("argv", sys.argv)
print("file", __file__ == os.path.abspath("train.py"))
print("path0", sys.path[0] == os.getcwd())
print("main", sys.modules["__main__"].Point is Point)
print("pickled", type(pickle.loads(pickle.dumps(Point()))) is Point)
print("root handlers", len(logging.getLogger().handlers), logging.getLogger().level)
print("sigterm default", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
print("session leader", os.getsid(0) == os.getpid())
logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(message)s")
logging.debug("own debug line")
unclosed = open("unclosed.txt", "w")
unclosed.write("kept")
threading.Thread(target=later).start()
if sys.argv[1] == "raise":
    raise ValueError("boom")
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[tuple[ContextMaster, int]]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(SCRIPT)
    stand_in = ContextMaster({1: pack_context(src)})
    port = free_port()
    server: grpclib.server.Server = await serve(stand_in, port)
    yield stand_in, port
    server.close()
    await server.wait_closed()


def agent_env(port: int, entrypoint: object) -> dict[str, str]:
    """A task's environment as the agent gives it: this interpreter first on PATH."""
    env = task_env(port, entrypoint)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def run(workdir: Path, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await start_launch(workdir, env, stdin=asyncio.subprocess.DEVNULL)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_script_runs_in_a_fork_as_python3_would_run_it(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    _, port = master
    workdir = tmp_path / "work"
    code, out, err = await run(workdir, agent_env(port, "python3 train.py 6"))
    assert code == 6, err
    assert FORKED.decode() in err
    assert out.splitlines() == [
        "name __main__",
        "argv ['train.py', '6']",
        "file True",
        "path0 True",
        "main True",
        "pickled True",
        "root handlers 0 30",
        "sigterm default True",
        "session leader True",
        "thread joined",
    ]
    assert "DEBUG own debug line" in err
    assert (workdir / "unclosed.txt").read_text() == "kept"


async def test_an_uncaught_exception_prints_the_scripts_traceback_and_exits_1(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    _, port = master
    code, out, err = await run(tmp_path / "work", agent_env(port, ["python3", "train.py", "raise"]))
    assert code == 1
    assert FORKED.decode() in err
    traceback = err[err.index("Traceback") : err.index("ValueError: boom")].splitlines()
    assert traceback[1].startswith('  File "') and 'train.py", line' in traceback[1]
    assert "determined" not in "\n".join(traceback)
    assert "thread joined" in out  # the interpreter's shutdown still joins the script's threads


async def test_sigterm_to_the_launcher_reaches_the_forked_script(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    stand_in, port = master
    src = tmp_path / "src2"
    src.mkdir()
    (src / "wait.py").write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    stand_in.contexts[1] = pack_context(src)
    proc = await start_launch(
        tmp_path / "work", agent_env(port, "python3 wait.py"), stdin=asyncio.subprocess.DEVNULL
    )
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"ready\n"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 10) == 42
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "entrypoint, extra_env",
    [
        ("python3 train.py 0 && true", {}),  # a shell list: sh runs it
        ("python3 -u train.py 0", {}),  # an interpreter option
        ("python3 train.py 0", {"PYDET_FORK_SCRIPTS": "0"}),  # turned off
    ],
)
async def test_anything_but_a_plain_script_command_starts_a_new_interpreter(
    master: tuple[ContextMaster, int], tmp_path: Path, entrypoint: str, extra_env: dict[str, str]
) -> None:
    _, port = master
    env = {**agent_env(port, entrypoint), **extra_env}
    code, out, err = await run(tmp_path / "work", env)
    assert code == 0, err
    assert FORKED.decode() not in err
    assert "name __main__" in out


async def test_a_standby_launcher_runs_the_task_it_is_handed(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    _, port = master
    standby_dir = tmp_path / "standby"
    standby_env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    standby_env["PYDET_LAUNCH_STANDBY"] = "1"
    proc = await start_launch(standby_dir, standby_env, stdin=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    await asyncio.sleep(0.5)  # it waits, having loaded what it can
    assert proc.returncode is None
    workdir = tmp_path / "work"
    workdir.mkdir()
    order = {"env": agent_env(port, "python3 train.py 3"), "cwd": str(workdir)}
    proc.stdin.write(json.dumps(order).encode() + b"\n")
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 3, err.decode()
    assert b"path0 True" in out  # the script ran in the task's directory
    assert (workdir / "unclosed.txt").read_text() == "kept"
    assert not (standby_dir / "train.py").exists()


async def test_a_standby_given_no_task_exits_quietly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYDET_LAUNCH_STANDBY"] = "1"
    proc = await start_launch(tmp_path / "standby", env, stdin=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert (proc.returncode, out, err) == (0, b"", b"")
