"""A ``python3 script.py`` entrypoint run in a fork of the launcher behaves as ``python3``
would run it, and the agent's launcher template forks a launcher per task.

The launcher runs as on an agent: ``python3 -m determined.exec.launch`` with this
interpreter's directory first on PATH, against a stand-in master serving the context.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpclib.server
import pytest

from determined.common.context import pack_context
from pydet.agent.launcher_template import LauncherTemplate, TemplateGone
from tests.integration.test_launch_exec import (
    ContextMaster,
    free_port,
    serve,
    start_launch,
    task_env,
)

FORKED = b"running the entrypoint in a fork of the launcher"

SCRIPT = """\
import atexit, gzip, logging, os, pickle, signal, sys, threading, time

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
zipped = gzip.open("unclosed.gz", "wt")
zipped.write("zipped")
text = open("hidden.txt", "w")
text.write("also kept")
hidden = [text]
hidden.append(hidden)  # reachable only from a cycle once the globals are gone
del text

class Finalized:
    def __del__(self):
        print("finalized", flush=True)

kept_until_exit = Finalized()
atexit.register(print, "atexit hook ran")
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


def serve_script(stand_in: ContextMaster, tmp_path: Path, name: str, text: str) -> None:
    """Experiment 1's context becomes one script, ``name``."""
    src = tmp_path / "one-script"
    src.mkdir()
    (src / name).write_text(text)
    stand_in.contexts[1] = pack_context(src)


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
        "atexit hook ran",
        "finalized",
    ]
    assert "DEBUG own debug line" in err
    # Files the script left open are written out at its exit, as the interpreter does.
    assert (workdir / "unclosed.txt").read_text() == "kept"
    assert (workdir / "hidden.txt").read_text() == "also kept"
    with gzip.open(workdir / "unclosed.gz", "rt") as f:
        assert f.read() == "zipped"


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
    serve_script(
        stand_in,
        tmp_path,
        "wait.py",
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n",
    )
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


async def test_the_template_forks_a_launcher_per_task(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    _, port = master
    base = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    launcher = (sys.executable, "-m", "determined.exec.launch")
    template = LauncherTemplate(launcher, base, tmp_path)
    await template.start()
    try:
        for i, code in enumerate([3, 0]):
            workdir = tmp_path / f"work-{i}"
            workdir.mkdir()
            child = await template.fork(agent_env(port, f"python3 train.py {code}"), workdir)
            out, err = await asyncio.gather(child.stdout.read(), child.stderr.read())
            await asyncio.wait_for(child.exited.wait(), 60)
            child.close()
            assert child.status == code, err.decode()
            assert b"path0 True" in out and b"session leader True" in out
            assert FORKED in err  # the launcher forked the script in turn
            assert (workdir / "unclosed.txt").read_text() == "kept"
            assert not (tmp_path / "train.py").exists()
        assert template.running
    finally:
        await template.close()
    assert not template.running


async def test_an_order_after_the_template_died_fails_clearly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    template = LauncherTemplate((sys.executable, "-m", "determined.exec.launch"), env, tmp_path)
    await template.start()
    try:
        assert template._proc is not None
        template._proc.kill()
        await template._proc.wait()
        await asyncio.sleep(0.2)  # the socket's end reaches its reader
        with pytest.raises(TemplateGone, match="not running"):
            await template.fork(env, tmp_path)
    finally:
        await template.close()


async def test_a_launcher_outliving_its_template_is_seen_gone_without_a_status(
    master: tuple[ContextMaster, int], tmp_path: Path
) -> None:
    stand_in, port = master
    serve_script(
        stand_in, tmp_path, "wait.py", "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    template = LauncherTemplate((sys.executable, "-m", "determined.exec.launch"), env, tmp_path)
    await template.start()
    try:
        workdir = tmp_path / "work"
        workdir.mkdir()
        child = await template.fork(agent_env(port, "python3 wait.py"), workdir)
        assert await asyncio.wait_for(child.stdout.readline(), 30) == b"ready\n"
        assert template._proc is not None
        template._proc.kill()  # the template dies; its launcher runs on
        await template._proc.wait()
        await asyncio.sleep(0.5)
        assert not child.exited.is_set()
        os.killpg(child.pid, signal.SIGKILL)
        await asyncio.wait_for(child.exited.wait(), 10)
        assert child.status is None
        child.close()
    finally:
        await template.close()
