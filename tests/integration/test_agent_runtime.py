"""The process runtime against real subprocesses."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pydet.agent.process_runtime import ProcessRuntime
from pydet.agent.runtime import Event, Exited, Output, RunAs, Started, StartOrder
from pydet.agent.slots import SlotSpec, artificial


class Recorder:
    """An event sink that remembers every event and lets a test wait for the exit."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._exited = asyncio.Event()

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, Exited):
            self._exited.set()

    async def exited(self, timeout: float = 20.0) -> Exited:
        async with asyncio.timeout(timeout):
            await self._exited.wait()
        last = self.events[-1]
        assert isinstance(last, Exited), self.events
        return last

    def lines(self, stdtype: str | None = None) -> list[str]:
        return [
            line.text
            for e in self.events
            if isinstance(e, Output)
            for line in e.lines
            if stdtype is None or line.stdtype == stdtype
        ]

    async def wait_line(self, text: str, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while text not in self.lines():
                await asyncio.sleep(0.01)


def order(
    cid: str, *argv: str, env: dict[str, str] | None = None, slots: tuple[str, ...] = ()
) -> StartOrder:
    return StartOrder(
        container_id=cid,
        allocation_id=f"alloc-{cid}",
        task_id="task-1",
        argv=argv,
        env=env or {},
        slot_ids=slots,
    )


def py(code: str) -> tuple[str, ...]:
    return ("python3", "-c", textwrap.dedent(code))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still "exists"; it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[ProcessRuntime]:
    rt = ProcessRuntime(
        work_dir=tmp_path / "work",
        agent_id="agent-7",
        master="master.example:1234",
        slots=artificial(2),
    )
    try:
        yield rt
    finally:
        await rt.close()


async def test_output_is_reported_per_stream_then_the_exit_code(runtime: ProcessRuntime) -> None:
    rec = Recorder()
    code = """
        import sys
        print("out 1"); print("err 1", file=sys.stderr); print("out 2")
        sys.stdout.write("no newline at the end")
        sys.exit(3)
    """
    await runtime.start(order("c1", *py(code)), rec)
    exited = await rec.exited()
    assert isinstance(rec.events[0], Started)
    assert rec.events[0].pid > 0 and rec.events[0].allocation_id == "alloc-c1"
    assert rec.lines("stdout") == ["out 1", "out 2", "no newline at the end"]
    assert rec.lines("stderr") == ["err 1"]
    assert (exited.exit_code, exited.error, exited.allocation_id) == (3, "", "alloc-c1")
    assert runtime.running() == []


async def test_container_environment_and_working_directory(
    runtime: ProcessRuntime, tmp_path: Path
) -> None:
    rec = Recorder()
    code = """
        import json, os, sys
        keys = ["DET_MASTER", "DET_AGENT_ID", "PYTHONUNBUFFERED", "MY_VAR", "DET_TASK_ID"]
        print(json.dumps({
            "env": {k: os.environ.get(k) for k in keys},
            "cwd": os.getcwd(),
            "exe": sys.executable,
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pgid_is_pid": os.getpgid(0) == os.getpid(),
        }))
    """
    env = {"MY_VAR": "x y", "DET_TASK_ID": "task-1", "DET_MASTER": "overridden?"}
    await runtime.start(order("envtest", *py(code), env=env, slots=("1",)), rec)
    assert (await rec.exited()).exit_code == 0
    seen = json.loads(rec.lines("stdout")[0])
    assert seen["env"] == {
        "DET_MASTER": "master.example:1234",
        "DET_AGENT_ID": "agent-7",
        "PYTHONUNBUFFERED": "1",
        "MY_VAR": "x y",
        "DET_TASK_ID": "task-1",
    }
    assert Path(seen["cwd"]) == tmp_path / "work" / "envtest"
    assert os.path.dirname(seen["exe"]) == os.path.dirname(sys.executable)
    assert seen["cuda"] is None  # artificial slots: GPUs are not touched
    assert seen["pgid_is_pid"] is True


async def test_working_directory_is_created_fresh(runtime: ProcessRuntime, tmp_path: Path) -> None:
    stale = tmp_path / "work" / "again" / "stale.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    rec = Recorder()
    await runtime.start(order("again", *py("import os; print(sorted(os.listdir()))")), rec)
    await rec.exited()
    assert rec.lines() == ["[]"]


async def test_cuda_slots_set_cuda_visible_devices(tmp_path: Path) -> None:
    gpus = [SlotSpec(id=str(i), type="cuda", device="H100", uuid=f"GPU-{i}") for i in range(4)]
    rt = ProcessRuntime(work_dir=tmp_path, agent_id="a", master="m:1", slots=gpus)
    try:
        rec = Recorder()
        code = "import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']))"
        await rt.start(order("gpu", *py(code), slots=("1", "3")), rec)
        await rec.exited()
        cpu_only = Recorder()
        await rt.start(order("cpu", *py(code)), cpu_only)
        await cpu_only.exited()
    finally:
        await rt.close()
    assert rec.lines() == ["'1,3'"]
    assert cpu_only.lines() == ["''"]  # a 0-slot task sees no GPU


async def test_exit_by_signal_is_128_plus_the_signal(runtime: ProcessRuntime) -> None:
    rec = Recorder()
    await runtime.start(order("sig", *py("import os, signal; os.kill(os.getpid(), 9)")), rec)
    assert (await rec.exited()).exit_code == 128 + 9


async def test_kill_sends_sigterm_first(runtime: ProcessRuntime) -> None:
    rec = Recorder()
    code = """
        import signal, sys, time
        def bye(*_):
            print("got SIGTERM", flush=True)
            sys.exit(42)
        signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        time.sleep(60)
    """
    await runtime.start(order("polite", *py(code)), rec)
    await rec.wait_line("ready")
    await runtime.kill("polite", 10)
    exited = await rec.exited(timeout=1)
    assert exited.exit_code == 42
    assert rec.lines()[-1] == "got SIGTERM"


async def test_kill_escalates_to_sigkill_after_the_grace(runtime: ProcessRuntime) -> None:
    rec = Recorder()
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """
    await runtime.start(order("stubborn", *py(code)), rec)
    await rec.wait_line("ready")
    began = time.monotonic()
    await runtime.kill("stubborn", 0.5)
    took = time.monotonic() - began
    exited = await rec.exited(timeout=1)
    assert exited.exit_code == 128 + 9
    assert 0.4 <= took < 5


async def test_kill_reaches_the_whole_process_group(
    runtime: ProcessRuntime, tmp_path: Path
) -> None:
    rec = Recorder()
    pidfile = tmp_path / "grandchild.pid"
    code = f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        print("ready", flush=True)
        child.wait()
    """
    await runtime.start(order("tree", *py(code)), rec)
    await rec.wait_line("ready")
    grandchild = int(pidfile.read_text())
    assert alive(grandchild)
    await runtime.kill("tree", 0.3)
    await rec.exited(timeout=1)
    async with asyncio.timeout(5):
        while alive(grandchild):
            await asyncio.sleep(0.02)


async def test_leftover_processes_die_with_the_main_process(
    runtime: ProcessRuntime, tmp_path: Path
) -> None:
    rec = Recorder()
    pidfile = tmp_path / "daemon.pid"
    code = f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        print("leaving a child behind")
    """
    await runtime.start(order("leaky", *py(code)), rec)
    exited = await rec.exited(timeout=5)
    assert exited.exit_code == 0
    grandchild = int(pidfile.read_text())
    async with asyncio.timeout(5):
        while alive(grandchild):
            await asyncio.sleep(0.02)


async def test_long_lines_are_split_not_dropped(runtime: ProcessRuntime) -> None:
    rec = Recorder()
    code = """
        import sys
        sys.stdout.write("a" * 200_000 + "\\n")
        sys.stdout.write("é" * 40_000 + "\\n")
        print("after")
    """
    await runtime.start(order("long", *py(code)), rec)
    assert (await rec.exited()).exit_code == 0
    lines = rec.lines()
    assert lines[-1] == "after"
    assert "".join(lines[:-1]) == "a" * 200_000 + "é" * 40_000
    assert all(len(line.encode()) <= 64 * 1024 for line in lines)
    assert "\ufffd" not in "".join(lines)


async def test_missing_executable_is_reported_as_exit_127(runtime: ProcessRuntime) -> None:
    rec = Recorder()
    await runtime.start(order("nope", "definitely-not-a-command-xyz", "arg"), rec)
    exited = await rec.exited(timeout=1)
    assert len(rec.events) == 1
    assert exited.exit_code == 127
    assert "definitely-not-a-command-xyz" in exited.error
    assert "not found" in exited.error


async def test_bad_orders_are_reported_not_raised(runtime: ProcessRuntime, tmp_path: Path) -> None:
    cases = {
        "empty": order("empty"),
        "../escape": order("../escape", "true"),
        "badslot": order("badslot", "true", slots=("7",)),
        "notexec": order("notexec", str(tmp_path)),
    }
    for cid, o in cases.items():
        rec = Recorder()
        await runtime.start(o, rec)
        exited = await rec.exited(timeout=5)
        assert len(rec.events) == 1, cid
        assert exited.exit_code in (1, 127), cid
        assert exited.error, cid


async def test_unusable_work_dir_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    rt = ProcessRuntime(work_dir=blocker, agent_id="a", master="m:1", slots=[])
    try:
        rec = Recorder()
        await rt.start(order("c", "true"), rec)
        exited = await rec.exited(timeout=5)
    finally:
        await rt.close()
    assert exited.exit_code == 1
    assert "working directory" in exited.error


NOBODY = RunAs(65534, 65534, "nobody", "nogroup")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching identity needs a root agent")
async def test_a_container_runs_as_its_owners_agent_user(
    runtime: ProcessRuntime, tmp_path: Path
) -> None:
    rec = Recorder()
    who = order("as-nobody", "sh", "-c", "id -u; id -g; id -G; echo $USER")
    await runtime.start(dataclasses.replace(who, run_as=NOBODY), rec)
    exited = await rec.exited()
    assert exited.exit_code == 0, (exited.error, rec.lines())
    assert rec.lines("stdout") == ["65534", "65534", "65534", "nobody"]
    cwd = tmp_path / "work" / "as-nobody"
    assert (cwd.stat().st_uid, cwd.stat().st_mode & 0o777) == (65534, 0o700)
    # The agent's work dir (private, as the agent makes it) lets it through.
    assert (tmp_path / "work").stat().st_mode & 0o011 == 0o011


async def test_an_agent_that_is_not_root_refuses_another_identity(
    runtime: ProcessRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    rec = Recorder()
    await runtime.start(dataclasses.replace(order("refused", "true"), run_as=NOBODY), rec)
    exited = await rec.exited(timeout=5)
    assert exited.exit_code == 1 and len(rec.events) == 1
    assert "must run as nobody (uid 65534, gid 65534)" in exited.error
    assert "this agent runs as uid 1000, not root" in exited.error


async def test_running_lists_live_containers_and_kill_of_unknown_is_a_noop(
    runtime: ProcessRuntime,
) -> None:
    rec = Recorder()
    await runtime.start(order("live", *py("import time; time.sleep(60)")), rec)
    started = rec.events[0]
    assert isinstance(started, Started)
    [running] = runtime.running()
    assert (running.container_id, running.allocation_id, running.pid) == (
        "live",
        "alloc-live",
        started.pid,
    )
    await runtime.kill("no-such-container", 1)
    # A second start order for a running container does not start it twice.
    await runtime.start(order("live", *py("print('twice')")), rec)
    assert len(runtime.running()) == 1
    await runtime.kill("live", 1)
    assert (await rec.exited()).exit_code == 128 + 15
    await runtime.kill("live", 1)  # finished: no-op
    assert runtime.running() == []


async def test_close_kills_what_still_runs(tmp_path: Path) -> None:
    rt = ProcessRuntime(work_dir=tmp_path, agent_id="a", master="m:1", slots=[])
    rec = Recorder()
    await rt.start(order("c", *py("import time; print('up', flush=True); time.sleep(60)")), rec)
    await rec.wait_line("up")
    pid = rt.running()[0].pid
    await rt.close()
    await rt.close()
    assert not alive(pid)
    refused = Recorder()
    await rt.start(order("late", "true"), refused)
    assert (await refused.exited(timeout=1)).error == "the agent is shutting down"


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


async def test_trial_launchers_are_forked_from_the_template_when_their_environment_fits(
    tmp_path: Path,
) -> None:
    rt = ProcessRuntime(work_dir=tmp_path / "work", agent_id="a", master="m:1", slots=artificial(1))
    launcher = ("python3", "-m", "determined.exec.launch")
    try:
        forked = Recorder()
        await rt.start(order("c1", *launcher, env={"DET_ALLOCATION_ID": "x"}), forked)
        started = forked.events[0]
        assert isinstance(started, Started)
        template = parent_of(started.pid)
        assert template != os.getpid()  # not the agent's child: the template's
        assert (await forked.exited(60)).exit_code == 1
        # The order's environment reached it: the launcher ran and found no trial id.
        assert "(DET_TRIAL_ID is not set)" in forked.lines("stderr")[-1]

        again = Recorder()
        await rt.start(order("c2", *launcher), again)
        started = again.events[0]
        assert isinstance(started, Started) and parent_of(started.pid) == template
        assert (await again.exited(60)).exit_code == 2  # not a task at all: "off cluster"

        cold = Recorder()  # PYTHONPATH is read at startup: the template does not fit
        env = {"DET_ALLOCATION_ID": "x", "PYTHONPATH": os.pathsep.join(sys.path[1:])}
        await rt.start(order("c3", *launcher, env=env), cold)
        started = cold.events[0]
        assert isinstance(started, Started) and parent_of(started.pid) == os.getpid()
        assert (await cold.exited(60)).exit_code == 1

        elsewhere = Recorder()  # the template found its temporary directory for its TMPDIR
        env = {"DET_ALLOCATION_ID": "x", "TMPDIR": str(tmp_path)}
        await rt.start(order("c4", *launcher, env=env), elsewhere)
        started = elsewhere.events[0]
        assert isinstance(started, Started) and parent_of(started.pid) == os.getpid()
        assert (await elsewhere.exited(60)).exit_code == 1
    finally:
        await rt.close()
    assert not alive(template)
