"""The process runtime: each container is a plain subprocess tree on this machine.

A container is its argv run directly (no shell) in a new session, so it leads its own
process group and a kill reaches its children too, in a fresh working directory
``<work_dir>/<container_id>``. Like a real container, it ends with its main process: when
that exits, whatever else is left in its group is killed.

A trial's container is ``python3 -m determined.exec.launch``, whose interpreter and imports
take a few hundred milliseconds. The runtime keeps launchers started ahead of their tasks
(standbys, one per slot up to ``MAX_STANDBYS``), waiting on stdin with their imports done; a
start order for a trial hands one its environment and working directory
(``determined.exec.launch.await_order``) and a new standby starts behind it. Each standby
runs one task, as a cold-started launcher would. A task whose environment differs where an
interpreter reads it at startup (``PYTHON*``, locale, loader, ``PATH``, ``HOME``, ``TZ``)
starts cold.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydet.agent.lines import LineSplitter
from pydet.agent.runtime import (
    EventSink,
    Exited,
    LogLine,
    Output,
    RunningContainer,
    Started,
    StartOrder,
)
from pydet.agent.slots import SlotSpec

log = logging.getLogger(__name__)

_READ_SIZE = 64 * 1024
# How long to keep reading a container's pipes after its process group was killed; only a
# process that escaped the group (its own setsid) can hold them open longer.
_DRAIN_SECONDS = 5.0
# The command of a trial's container, which standbys run ahead of their tasks.
LAUNCHER = ("python3", "-m", "determined.exec.launch")
MAX_STANDBYS = 4
STANDBY_ENV = "PYDET_LAUNCH_STANDBY"
# Environment variables an interpreter reads as it starts: a standby that started with other
# values than a task's cannot run that task.
_STARTUP_PREFIXES = ("PYTHON", "LC_", "LD_")
_STARTUP_NAMES = frozenset({"LANG", "PATH", "HOME", "TZ"})
# Exit codes for containers that never ran, as a shell would report them.
EXIT_NOT_FOUND = 127
EXIT_START_FAILED = 1


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for ``Process``, plus an event for the main process's exit."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=_READ_SIZE, loop=loop)
        self.main_exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.main_exited.set()


class _StartFailed(Exception):
    def __init__(self, message: str, exit_code: int = EXIT_START_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True)
class _Spawned:
    proc: asyncio.subprocess.Process
    transport: asyncio.SubprocessTransport
    protocol: _Protocol


@dataclass(eq=False)
class _Standby:
    """A launcher started ahead of its task, waiting on stdin for its order."""

    spawned: _Spawned
    env: dict[str, str]

    def fits(self, env: dict[str, str]) -> bool:
        keys = {k for k in (*self.env, *env) if k != STANDBY_ENV and _read_at_startup(k)}
        alive = self.spawned.proc.returncode is None
        return alive and all(self.env.get(k) == env.get(k) for k in keys)


def _read_at_startup(name: str) -> bool:
    return name.startswith(_STARTUP_PREFIXES) or name in _STARTUP_NAMES


@dataclass(eq=False)
class _Container:
    order: StartOrder
    spawned: _Spawned
    on_event: EventSink
    returned: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    watcher: asyncio.Task[None] | None = None

    @property
    def proc(self) -> asyncio.subprocess.Process:
        return self.spawned.proc

    @property
    def pid(self) -> int:
        return self.spawned.proc.pid

    def signal_group(self, sig: signal.Signals) -> None:
        # Once the exit was reported the group id may belong to someone else.
        if self.finished.is_set():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


class ProcessRuntime:
    """Runs containers as process groups; see the module docstring."""

    def __init__(
        self,
        *,
        work_dir: Path,
        agent_id: str,
        master: str,
        slots: Sequence[SlotSpec],
        base_env: dict[str, str] | None = None,
        master_cert_file: str | None = None,
        standbys: int | None = None,
    ) -> None:
        self._work_dir = work_dir
        self._agent_id = agent_id
        self._master = master
        # The CA file that verifies a TLS master; None leaves the agent's own
        # DET_MASTER_CERT_FILE (in base_env), if any, to its tasks.
        self._master_cert_file = master_cert_file
        self._slots = {s.id: s for s in slots}
        self._has_gpus = any(s.type == "cuda" for s in slots)
        self._base_env = dict(os.environ if base_env is None else base_env)
        self._containers: dict[str, _Container] = {}
        self._starting: set[str] = set()
        self._closed = False
        self._max_standbys = (
            min(MAX_STANDBYS, max(1, len(slots))) if standbys is None else max(0, standbys)
        )
        self._standbys: list[_Standby] = []
        self._standbys_starting = 0
        self._standby_tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return "process"

    async def start(self, order: StartOrder, on_event: EventSink) -> None:
        cid = order.container_id
        if cid in self._containers or cid in self._starting:
            log.warning("ignoring a second start order for container %s: it is running", cid)
            return
        if self._closed:
            _report_failure(order, on_event, "the agent is shutting down", EXIT_START_FAILED)
            return
        self._starting.add(cid)
        try:
            spawned = await self._spawn(order)
        except _StartFailed as e:
            log.warning("container %s could not start: %s", cid, e.message)
            _report_failure(order, on_event, e.message, e.exit_code)
            return
        finally:
            self._starting.discard(cid)
        container = _Container(order=order, spawned=spawned, on_event=on_event)
        proc = spawned.proc
        self._containers[cid] = container
        log.info("started container %s (pid %d): %s", cid, proc.pid, _describe(order.argv))
        on_event(Started(cid, order.allocation_id, proc.pid, time.time()))
        container.watcher = asyncio.create_task(self._watch(container), name=f"watch-{cid}")

    async def kill(self, container_id: str, grace_seconds: float) -> None:
        container = self._containers.get(container_id)
        if container is None or container.finished.is_set():
            return
        grace = grace_seconds if math.isfinite(grace_seconds) and grace_seconds > 0 else 0.0
        log.info("stopping container %s (SIGKILL after %.1f s)", container_id, grace)
        container.signal_group(signal.SIGTERM)
        if not container.returned.is_set():
            try:
                async with asyncio.timeout(grace):
                    await container.returned.wait()
            except TimeoutError:
                log.info("container %s outlived its grace period; sending SIGKILL", container_id)
        container.signal_group(signal.SIGKILL)
        await container.finished.wait()

    def running(self) -> list[RunningContainer]:
        return [
            RunningContainer(c.order.container_id, c.order.allocation_id, c.pid)
            for c in self._containers.values()
            if not c.finished.is_set()
        ]

    def lines_sent(self, container_id: str, timestamp: float) -> None:
        """Nothing to note: a process's output is gone with the agent that read it."""

    def kill_now(self) -> None:
        for container in self._containers.values():
            container.signal_group(signal.SIGKILL)

    async def close(self) -> None:
        self._closed = True
        self.kill_now()
        for task in self._standby_tasks:
            task.cancel()
        await asyncio.gather(*self._standby_tasks, return_exceptions=True)
        for standby in self._standbys:
            await _end_standby(standby)
        self._standbys.clear()
        watchers = [c.watcher for c in self._containers.values() if c.watcher is not None]
        if not watchers:
            return
        # Give the watchers a moment to reap and report, then stop them.
        _, pending = await asyncio.wait(watchers, timeout=_DRAIN_SECONDS)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _spawn(self, order: StartOrder) -> _Spawned:
        if not order.argv or not order.argv[0]:
            raise _StartFailed("the container has no command (empty argv)")
        cid = order.container_id
        if not cid or cid in (".", "..") or "/" in cid or "\0" in cid:
            raise _StartFailed(f"invalid container id {cid!r}")
        unknown = [s for s in order.slot_ids if s not in self._slots]
        if unknown:
            raise _StartFailed(
                f"slot id(s) {', '.join(unknown)} do not exist on agent {self._agent_id} "
                f"(it has {', '.join(self._slots) or 'no slots'})"
            )
        env = self._environment(order.env, order.slot_ids)
        exe = order.argv[0]
        if os.sep not in exe and shutil.which(exe, path=env["PATH"]) is None:
            raise _StartFailed(f"executable {exe!r} not found on PATH", EXIT_NOT_FOUND)
        cwd = self._work_dir / cid
        try:
            await asyncio.to_thread(_fresh_directory, cwd)
        except OSError as e:
            raise _StartFailed(f"cannot create working directory {cwd}: {e.strerror or e}") from e
        if tuple(order.argv) == LAUNCHER:
            standby = self._take_standby(env)
            self._refill_standbys()  # behind this order, for the trials that follow
            if standby is not None:
                if await _hand_over(standby, env, cwd):
                    return standby.spawned
                await _end_standby(standby)
        return await self._exec(order.argv, env, cwd)

    async def _exec(self, argv: Sequence[str], env: dict[str, str], cwd: Path) -> _Spawned:
        exe = argv[0]
        stdin = asyncio.subprocess.PIPE if env.get(STANDBY_ENV) else asyncio.subprocess.DEVNULL
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(loop),
                *argv,
                stdin=stdin,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError as e:
            raise _StartFailed(f"executable {exe!r} not found", EXIT_NOT_FOUND) from e
        except PermissionError as e:
            raise _StartFailed(f"cannot execute {exe!r}: permission denied") from e
        except (OSError, ValueError) as e:
            raise _StartFailed(f"cannot execute {exe!r}: {e}") from e
        return _Spawned(asyncio.subprocess.Process(transport, protocol, loop), transport, protocol)

    def _take_standby(self, env: dict[str, str]) -> _Standby | None:
        for i, standby in enumerate(self._standbys):
            if standby.fits(env):
                return self._standbys.pop(i)
        return None

    def _refill_standbys(self) -> None:
        """Start launchers ahead of tasks until ``_max_standbys`` wait or are starting."""
        while (
            not self._closed and len(self._standbys) + self._standbys_starting < self._max_standbys
        ):
            self._standbys_starting += 1
            task = asyncio.create_task(self._start_standby(), name="standby-launcher")
            self._standby_tasks.add(task)
            task.add_done_callback(self._standby_tasks.discard)

    async def _start_standby(self) -> None:
        env = self._environment({}, ())
        env[STANDBY_ENV] = "1"
        try:
            spawned = await self._exec(LAUNCHER, env, self._work_dir)
        except _StartFailed as e:
            log.warning("cannot start a standby launcher: %s", e.message)
            return
        finally:
            self._standbys_starting -= 1
        del env[STANDBY_ENV]
        standby = _Standby(spawned, env)
        if self._closed:
            await _end_standby(standby)
        else:
            self._standbys.append(standby)

    def _environment(self, order_env: dict[str, str], slot_ids: Sequence[str]) -> dict[str, str]:
        env = {**self._base_env, **order_env}
        env["DET_MASTER"] = self._master
        if self._master_cert_file:
            env["DET_MASTER_CERT_FILE"] = self._master_cert_file
        env["DET_AGENT_ID"] = self._agent_id
        env["PYTHONUNBUFFERED"] = "1"
        # `python3` in an argv means this interpreter, which has `determined` installed.
        bindir = os.path.dirname(sys.executable)
        rest = [d for d in env.get("PATH", "").split(os.pathsep) if d]
        env["PATH"] = os.pathsep.join([bindir, *rest])
        if self._has_gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(slot_ids)
        return env

    async def _watch(self, container: _Container) -> None:
        order = container.order
        cid = order.container_id
        error = ""
        try:
            exit_code = await self._supervise(container)
        except Exception as e:
            # A fault here is the agent's, not the task's: report it on this container only.
            log.exception("lost track of container %s", cid)
            container.signal_group(signal.SIGKILL)
            exit_code, error = EXIT_START_FAILED, f"the agent lost track of the container: {e}"
        finally:
            container.returned.set()
        log.info("container %s exited with code %d", cid, exit_code)
        container.on_event(Exited(cid, order.allocation_id, exit_code, error, time.time()))
        container.finished.set()
        del self._containers[cid]

    async def _supervise(self, container: _Container) -> int:
        proc = container.proc
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            asyncio.create_task(_pump(proc.stdout, "stdout", container)),
            asyncio.create_task(_pump(proc.stderr, "stderr", container)),
        ]
        try:
            # Not proc.wait(): it also waits for the pipes, which a leftover child can hold.
            await container.spawned.protocol.main_exited.wait()
            code = proc.returncode
            assert code is not None
            container.returned.set()
            container.signal_group(signal.SIGKILL)
            _, pending = await asyncio.wait(readers, timeout=_DRAIN_SECONDS)
            if pending:
                log.warning(
                    "container %s: a process outside its group holds its output open; "
                    "not waiting for more output",
                    container.order.container_id,
                )
            for task in readers:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    log.error(
                        "container %s: reading output failed",
                        container.order.container_id,
                        exc_info=task.exception(),
                    )
        finally:
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            container.spawned.transport.close()
        return code if code >= 0 else 128 - code


async def _pump(stream: asyncio.StreamReader, stdtype: str, container: _Container) -> None:
    splitter = LineSplitter()
    order = container.order
    while True:
        data = await stream.read(_READ_SIZE)
        texts = splitter.feed(data) if data else splitter.flush()
        if texts:
            now = time.time()
            lines = tuple(LogLine(now, stdtype, t) for t in texts)
            container.on_event(Output(order.container_id, order.allocation_id, lines))
        if not data:
            return


async def _hand_over(standby: _Standby, env: dict[str, str], cwd: Path) -> bool:
    """Give ``standby`` its task; False if it is gone (it then runs nothing)."""
    stdin = standby.spawned.proc.stdin
    assert stdin is not None
    try:
        stdin.write(json.dumps({"env": env, "cwd": str(cwd)}).encode() + b"\n")
        await stdin.drain()
        stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


async def _end_standby(standby: _Standby) -> None:
    """Close an unused standby's stdin, which ends it; SIGKILL if it lingers."""
    proc = standby.spawned.proc
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            await standby.spawned.protocol.main_exited.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    standby.spawned.transport.close()


def _describe(argv: Sequence[str], limit: int = 200) -> str:
    text = shlex.join(argv).replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fresh_directory(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def _report_failure(order: StartOrder, on_event: EventSink, message: str, code: int) -> None:
    on_event(Exited(order.container_id, order.allocation_id, code, message, time.time()))
