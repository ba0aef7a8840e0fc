"""The process runtime: each container is a plain subprocess tree on this machine.

A container is its argv run directly (no shell) in a new session, so it leads its own
process group and a kill reaches its children too, in a fresh working directory
``<work_dir>/<container_id>``. Like a real container, it ends with its main process: when
that exits, whatever else is left in its group is killed.

A trial's container is ``python3 -m determined.exec.launch``, whose interpreter and imports
take a few hundred milliseconds of CPU. The runtime keeps one launcher loaded as a template
(``launcher_template.py``, started at the first trial) and has it fork a launcher per trial:
a process of its own, in a new session, with the task's environment, directory and output
pipes, that runs as a launcher started from scratch would. A task whose environment
differs from the template's where an interpreter reads it at startup (``PYTHON*``, locale,
loader, ``PATH``, ``HOME``, ``TZ``, ``TMPDIR``) starts from scratch, as does any other
command, and any trial while the template cannot run. Its launchers keep experiments' contexts in
``<work_dir>/contexts``, so an experiment's later trials on this agent do not download them
again (``determined.launch.context_cache``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from determined.launch import context_cache
from pydet.agent.launcher_template import ForkedLauncher, LauncherTemplate, TemplateGone
from pydet.agent.lines import LineSplitter
from pydet.agent.runtime import (
    EventSink,
    Exited,
    LogLine,
    Output,
    RunAs,
    RunningContainer,
    Started,
    StartOrder,
    give_directory,
)
from pydet.agent.slots import SlotSpec

log = logging.getLogger(__name__)

_READ_SIZE = 64 * 1024
# How long to keep reading a container's pipes after its process group was killed; only a
# process that escaped the group (its own setsid) can hold them open longer.
_DRAIN_SECONDS = 5.0
# The command of a trial's container, which the launcher template forks.
LAUNCHER = ("python3", "-m", "determined.exec.launch")
# Under the work directory, beside the containers' own: the agent's copies of experiments'
# contexts (determined.launch.context_cache).
CONTEXTS_DIR = "contexts"
# Environment variables an interpreter reads as it starts: a template that started with
# other values than a task's cannot run that task.
_STARTUP_PREFIXES = ("PYTHON", "LC_", "LD_")
# TMPDIR and the like: the template found its temporary directory once for its launchers.
_STARTUP_NAMES = frozenset({"LANG", "PATH", "HOME", "TZ", "TMPDIR", "TEMP", "TMP"})
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


@dataclass(eq=False)
class _Main:
    """A container's main process, exec'd or forked by the template: its pid, its output
    and its end. ``status()`` is its exit status once ``exited`` is set (128+N for death by
    signal N), None if no one could tell it."""

    pid: int
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    exited: asyncio.Event
    status: Callable[[], int | None]
    close: Callable[[], None]

    @classmethod
    def of_process(
        cls, proc: asyncio.subprocess.Process, transport: asyncio.SubprocessTransport
    ) -> _Main:
        protocol = transport.get_protocol()
        assert isinstance(protocol, _Protocol)
        assert proc.stdout is not None and proc.stderr is not None

        def status() -> int | None:
            code = proc.returncode
            return None if code is None else (code if code >= 0 else 128 - code)

        return cls(
            proc.pid, proc.stdout, proc.stderr, protocol.main_exited, status, transport.close
        )

    @classmethod
    def of_fork(cls, child: ForkedLauncher) -> _Main:
        return cls(
            child.pid, child.stdout, child.stderr, child.exited, lambda: child.status, child.close
        )


def fits_at_startup(started_with: Mapping[str, str], env: Mapping[str, str]) -> bool:
    """Whether a process started with ``started_with`` can run a task whose environment is
    ``env``: the same values where an interpreter reads them as it starts."""
    keys = {k for k in (*started_with, *env) if _read_at_startup(k)}
    return all(started_with.get(k) == env.get(k) for k in keys)


def _read_at_startup(name: str) -> bool:
    return name.startswith(_STARTUP_PREFIXES) or name in _STARTUP_NAMES


@dataclass(eq=False)
class _Container:
    order: StartOrder
    main: _Main
    on_event: EventSink
    returned: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    watcher: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.main.pid

    def signal_group(self, sig: signal.Signals) -> None:
        # Once the exit was reported the group id may belong to someone else.
        if self.finished.is_set():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.main.pid, sig)


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
        launcher_template: bool = True,
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
        self._use_template = launcher_template
        self._template: LauncherTemplate | None = None
        self._template_lock = asyncio.Lock()

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
            main = await self._spawn(order)
        except _StartFailed as e:
            log.warning("container %s could not start: %s", cid, e.message)
            _report_failure(order, on_event, e.message, e.exit_code)
            return
        finally:
            self._starting.discard(cid)
        container = _Container(order=order, main=main, on_event=on_event)
        self._containers[cid] = container
        log.info("started container %s (pid %d): %s", cid, main.pid, _describe(order.argv))
        on_event(Started(cid, order.allocation_id, main.pid, time.time()))
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
        if self._template is not None:
            await self._template.close()
        watchers = [c.watcher for c in self._containers.values() if c.watcher is not None]
        if not watchers:
            return
        # Give the watchers a moment to reap and report, then stop them.
        _, pending = await asyncio.wait(watchers, timeout=_DRAIN_SECONDS)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _spawn(self, order: StartOrder) -> _Main:
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
        run_as = order.run_as
        if run_as is not None and os.geteuid() not in (0, run_as.uid):
            raise _StartFailed(
                f"the task must run as {run_as.describe()} (its owner's agent user), but this "
                f"agent runs as uid {os.geteuid()}, not root, and cannot switch; run the agent "
                "as root, or clear the agent user (det user link-with-agent-user)"
            )
        env = self._environment(order.env, order.slot_ids)
        if run_as is not None:
            env.update(USER=run_as.user, LOGNAME=run_as.user)
        exe = order.argv[0]
        if os.sep not in exe and shutil.which(exe, path=env["PATH"]) is None:
            raise _StartFailed(f"executable {exe!r} not found on PATH", EXIT_NOT_FOUND)
        cwd = self._work_dir / cid
        try:
            await asyncio.to_thread(_fresh_directory, cwd)
            await asyncio.to_thread(give_directory, cwd, run_as)
        except OSError as e:
            raise _StartFailed(f"cannot create working directory {cwd}: {e.strerror or e}") from e
        # The launcher template runs as the agent: another identity starts from scratch.
        if tuple(order.argv) == LAUNCHER and self._use_template and run_as is None:
            template = await self._running_template()
            if template is not None and fits_at_startup(template.env, env):
                try:
                    return _Main.of_fork(await template.fork(env, cwd))
                except TemplateGone as e:
                    log.warning("%s; starting container %s from scratch", e, cid)
        return await self._exec(order.argv, env, cwd, run_as)

    async def _running_template(self) -> LauncherTemplate | None:
        """The launcher template, started (again) if it is not running; None if it cannot."""
        async with self._template_lock:
            if self._template is not None and self._template.running:
                return self._template
            if self._template is not None:
                log.warning("the launcher template ended; starting it again")
                await self._template.close()
            self._template = LauncherTemplate(LAUNCHER, self._environment({}, ()), self._work_dir)
            try:
                await self._template.start()
            except TemplateGone as e:
                log.warning("%s; trials start their launchers from scratch", e)
                return None
            return self._template

    async def _exec(
        self, argv: Sequence[str], env: dict[str, str], cwd: Path, run_as: RunAs | None = None
    ) -> _Main:
        exe = argv[0]
        loop = asyncio.get_running_loop()
        # Another identity: its uid and gid, and no supplementary group of the agent's.
        identity: dict[str, Any] = (
            {}
            if run_as is None or run_as.uid == os.geteuid()
            else {"user": run_as.uid, "group": run_as.gid, "extra_groups": []}
        )
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(loop),
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                **identity,
            )
        except FileNotFoundError as e:
            raise _StartFailed(f"executable {exe!r} not found", EXIT_NOT_FOUND) from e
        except PermissionError as e:
            raise _StartFailed(f"cannot execute {exe!r}: permission denied") from e
        except (OSError, ValueError) as e:
            raise _StartFailed(f"cannot execute {exe!r}: {e}") from e
        return _Main.of_process(asyncio.subprocess.Process(transport, protocol, loop), transport)

    def _environment(self, order_env: dict[str, str], slot_ids: Sequence[str]) -> dict[str, str]:
        env = {**self._base_env, **order_env}
        env["DET_MASTER"] = self._master
        if self._master_cert_file:
            env["DET_MASTER_CERT_FILE"] = self._master_cert_file
        env["DET_AGENT_ID"] = self._agent_id
        env["PYTHONUNBUFFERED"] = "1"
        env[context_cache.CACHE_ENV] = str(self._work_dir / CONTEXTS_DIR)
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
            exit_code, error = await self._supervise(container)
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

    async def _supervise(self, container: _Container) -> tuple[int, str]:
        """The container's exit status and an error ("" unless the agent failed it)."""
        main = container.main
        readers = [
            asyncio.create_task(_pump(main.stdout, "stdout", container)),
            asyncio.create_task(_pump(main.stderr, "stderr", container)),
        ]
        try:
            # Not the pipes' end: a leftover child can hold them.
            await main.exited.wait()
            status = main.status()
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
            main.close()
        if status is None:
            return EXIT_START_FAILED, "the launcher template died; the task's exit status is lost"
        return status, ""


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
