"""The Docker runtime: each container is a Docker container, driven through aiodocker.

A start order becomes a container of the order's image (the agent's default image when the
order names none) on the host's network, with the order's environment, the allocated GPUs
as device requests, the config's bind mounts, and an empty working directory bind-mounted
from ``<work_dir>/<container_id>``; its command is the order's argv. Output is followed from
the engine's log, line by line, and a container is removed once its exit was reported.

Containers carry the label ``ai.pydet.agent=<agent id>``: an agent that was killed leaves
them running, and the next agent with that id adopts them (``adopt``), following their
output from where the last one stopped and reporting their exits. See ``docker_spec`` for
the container body, ``docker_images`` for getting its image, ``docker_logs`` for the log
stream, ``docker_harness`` for how the harness gets into images that do not have it, and
``docker_engine`` for reaching the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
from aiodocker.containers import DockerContainer
from aiodocker.exceptions import DockerError

from pydet.agent import docker_images, docker_logs, docker_spec
from pydet.agent.docker_engine import (
    API_TIMEOUT,
    LONG_TIMEOUT,
    DockerUnavailable,
    docker_host,
    post_sync,
)
from pydet.agent.docker_harness import MODES, host_packages, use_mount
from pydet.agent.docker_positions import LogPositions
from pydet.agent.runtime import (
    EventSink,
    Exited,
    LogLine,
    Output,
    RunningContainer,
    Started,
    StartOrder,
    give_directory,
)
from pydet.agent.slots import SlotSpec

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "pydet-task:latest"
EXIT_NOT_FOUND = 127
EXIT_START_FAILED = 1
# After the container exited: how long its log may take to be read to the end.
_DRAIN_SECONDS = 10.0
# How many times in a row waiting on a container may fail (the engine restarting) before
# the container counts as lost.
_WAIT_RETRIES = 10
_RUNNING_STATES = ("running", "paused", "restarting")
# Where a task container finds the CA certificate of a TLS master (a read-only bind).
MASTER_CERT_PATH = "/run/determined/master-cert.pem"


def _add_master_cert(body: dict[str, Any], cert_file: str) -> None:
    """Give the container the CA file of a TLS master, read-only, and say where it is."""
    body["Env"] = [e for e in body["Env"] if not e.startswith("DET_MASTER_CERT_FILE=")]
    body["Env"].append(f"DET_MASTER_CERT_FILE={MASTER_CERT_PATH}")
    body["HostConfig"]["Mounts"].append(
        {"Type": "bind", "Source": cert_file, "Target": MASTER_CERT_PATH, "ReadOnly": True}
    )


class _StartFailed(Exception):
    def __init__(self, message: str, exit_code: int = EXIT_START_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(eq=False)
class _Container:
    container_id: str
    allocation_id: str
    handle: DockerContainer
    pid: int
    workdir: Path | None
    on_event: EventSink
    # The engine timestamp of the last line handed on; a restarted agent resumes after it.
    position_ns: int = 0
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    watcher: asyncio.Task[None] | None = None


class DockerRuntime:
    """Runs containers in a Docker engine; see the module docstring."""

    def __init__(
        self,
        *,
        docker: aiodocker.Docker,
        url: str,
        agent_id: str,
        master: str,
        work_dir: Path,
        slots: Sequence[SlotSpec],
        default_image: str = DEFAULT_IMAGE,
        harness: str = "auto",
        master_cert_file: str | None = None,
    ) -> None:
        if harness not in MODES:
            raise ValueError(f"harness must be one of {', '.join(MODES)}, got {harness!r}")
        self._docker = docker
        self._url = url
        self._agent_id = agent_id
        self._master = master
        self._work_dir = work_dir
        self._positions = LogPositions(work_dir / ".docker-log-positions")
        self._slots = {s.id: s for s in slots}
        self._default_image = default_image
        self._harness = harness
        # Nothing of the agent's environment reaches a container, so its own
        # DET_MASTER_CERT_FILE is looked up here when none was given.
        cert = master_cert_file or os.environ.get("DET_MASTER_CERT_FILE")
        self._master_cert_file = str(Path(cert).resolve()) if cert else None
        self._containers: dict[str, _Container] = {}
        self._starting: set[str] = set()
        # Every watcher until it has finished, cleanup included (it leaves _containers once
        # the exit is reported, before the container is removed).
        self._watchers: set[asyncio.Task[None]] = set()
        self._closed = False
        self._client_closed = False

    @classmethod
    async def connect(
        cls,
        *,
        agent_id: str,
        master: str,
        work_dir: Path,
        slots: Sequence[SlotSpec],
        default_image: str = DEFAULT_IMAGE,
        harness: str = "auto",
        url: str | None = None,
        master_cert_file: str | None = None,
    ) -> DockerRuntime:
        """A runtime on the engine at ``url`` (default ``docker_host()``), once it answers.

        Raises:
            DockerUnavailable: the engine cannot be reached.
        """
        url = url or docker_host()
        try:
            docker = aiodocker.Docker(url=url, timeout=API_TIMEOUT)
        except ValueError as e:
            raise DockerUnavailable(f"DOCKER_HOST={url!r} is not usable: {e}") from None
        try:
            version = await docker.version()
        except (DockerError, aiohttp.ClientError, OSError, TimeoutError) as e:
            await docker.close()
            detail = e.message if isinstance(e, DockerError) else str(e) or type(e).__name__
            raise DockerUnavailable(
                f"cannot reach the Docker engine at {url}: {detail}. Start one (on Debian: "
                "scripts/docker/install.sh), set DOCKER_HOST, or use --runtime process"
            ) from None
        log.info(
            "Docker engine %s (API %s) at %s; default image %s",
            version.get("Version", "?"),
            version.get("ApiVersion", "?"),
            url,
            default_image,
        )
        return cls(
            docker=docker,
            url=url,
            agent_id=agent_id,
            master=master,
            work_dir=work_dir,
            slots=slots,
            default_image=default_image,
            harness=harness,
            master_cert_file=master_cert_file,
        )

    @property
    def name(self) -> str:
        return "docker"

    # -- adoption after a restart ----------------------------------------------------------

    async def adopt(self, on_event: EventSink) -> None:
        """Take over this agent's containers left by an earlier agent process: follow the
        running ones, report (then remove) the ones that exited meanwhile. Call it before
        the agent says hello, so that the hello lists them."""
        filters = json.dumps({"label": [f"{docker_spec.AGENT_LABEL}={self._agent_id}"]})
        try:
            found = await self._docker.containers.list(all=True, filters=filters)
        except (DockerError, aiohttp.ClientError) as e:
            raise DockerUnavailable(f"cannot list this agent's containers: {e}") from e
        known = [(s["Labels"] or {}).get(docker_spec.CONTAINER_LABEL, "") for s in found]
        await self._positions.prune(known)
        for summary in found:
            labels: dict[str, str] = summary["Labels"] or {}
            cid = labels.get(docker_spec.CONTAINER_LABEL, "")
            alloc = labels.get(docker_spec.ALLOCATION_LABEL, "")
            state = str(summary["State"])
            if not cid or cid in self._containers or state == "removing":
                continue
            workdir_label = labels.get(docker_spec.WORKDIR_LABEL)
            c = _Container(
                container_id=cid,
                allocation_id=alloc,
                handle=self._docker.containers.container(summary.id),
                pid=0,
                workdir=Path(workdir_label) if workdir_label else None,
                on_event=on_event,
                position_ns=await self._positions.read(cid),
            )
            if state == "created":
                log.warning("container %s never started before the agent restarted", cid)
                on_event(
                    Exited(
                        cid,
                        alloc,
                        EXIT_START_FAILED,
                        "the agent restarted before the container started",
                        time.time(),
                    )
                )
                await self._remove(c)
                continue
            if state in _RUNNING_STATES:
                with contextlib.suppress(DockerError):
                    c.pid = int((await c.handle.show())["State"].get("Pid") or 0)
                log.info("adopting running container %s (%s)", cid, summary.id[:12])
            else:
                log.info("container %s exited while the agent was away; reporting it", cid)
            self._register(c)

    # -- the Runtime interface ------------------------------------------------------------

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
            c = await self._create(order, on_event)
        except _StartFailed as e:
            log.warning("container %s could not start: %s", cid, e.message)
            _report_failure(order, on_event, e.message, e.exit_code)
            return
        finally:
            self._starting.discard(cid)
        log.info("started container %s (%s, pid %d)", cid, c.handle.id[:12], c.pid)
        on_event(Started(cid, order.allocation_id, c.pid, time.time()))
        self._register(c)

    async def kill(self, container_id: str, grace_seconds: float) -> None:
        c = self._containers.get(container_id)
        if c is None or c.finished.is_set():
            return
        grace = grace_seconds if math.isfinite(grace_seconds) and grace_seconds > 0 else 0.0
        log.info("stopping container %s (SIGKILL after %.1f s)", container_id, grace)
        await self._signal(c, "SIGTERM")
        if not c.exited.is_set():
            try:
                async with asyncio.timeout(grace):
                    await c.exited.wait()
            except TimeoutError:
                log.info("container %s outlived its grace period; sending SIGKILL", container_id)
        if not c.exited.is_set():
            await self._signal(c, "SIGKILL")
        await c.finished.wait()

    def running(self) -> list[RunningContainer]:
        return [
            RunningContainer(c.container_id, c.allocation_id, c.pid)
            for c in self._containers.values()
            if not c.finished.is_set()
        ]

    def kill_now(self) -> None:
        # Called from a signal handler just before the process exits: no event loop to
        # wait on, so plain blocking requests, a short timeout each.
        for c in list(self._containers.values()):
            if c.exited.is_set():
                continue
            try:
                post_sync(self._url, f"/containers/{c.handle.id}/kill?signal=SIGKILL")
            except OSError as e:
                log.warning("could not kill container %s: %s", c.container_id, e)

    async def close(self) -> None:
        self._closed = True
        if self._client_closed:
            return
        try:
            live = [c for c in self._containers.values() if not c.exited.is_set()]
            await asyncio.gather(*(self._signal(c, "SIGKILL") for c in live))
            watchers = list(self._watchers)
            if watchers:
                # Give the watchers a moment to report and clean up, then stop them.
                _, pending = await asyncio.wait(watchers, timeout=_DRAIN_SECONDS)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
            await self._positions.close()
        finally:
            self._client_closed = True
            await self._docker.close()

    # -- starting ---------------------------------------------------------------------------

    async def _create(self, order: StartOrder, on_event: EventSink) -> _Container:
        cid = order.container_id
        if not order.argv or not order.argv[0]:
            raise _StartFailed("the container has no command (empty argv)")
        if not cid or cid in (".", "..") or "/" in cid or "\0" in cid:
            raise _StartFailed(f"invalid container id {cid!r}")
        unknown = [s for s in order.slot_ids if s not in self._slots]
        if unknown:
            raise _StartFailed(
                f"slot id(s) {', '.join(unknown)} do not exist on agent {self._agent_id} "
                f"(it has {', '.join(self._slots) or 'no slots'})"
            )
        image = order.spec.image or self._default_image
        try:
            image_labels = await docker_images.ensure_image(self._docker, image, order, on_event)
        except docker_images.ImageUnavailable as e:
            raise _StartFailed(e.message) from e
        try:
            harness = host_packages() if use_mount(self._harness, image_labels) else ()
        except RuntimeError as e:
            raise _StartFailed(f"cannot mount the harness into image {image}: {e}") from e
        storage = docker_spec.shared_fs_path(order.env)
        if storage:
            # A bind mount needs its source; the harness would create it anyway.
            with contextlib.suppress(OSError):
                await asyncio.to_thread(os.makedirs, storage, exist_ok=True)
        workdir = self._work_dir / cid
        try:
            await asyncio.to_thread(_fresh_directory, workdir)
            await asyncio.to_thread(give_directory, workdir, order.run_as)
        except OSError as e:
            detail = e.strerror or e
            raise _StartFailed(f"cannot create working directory {workdir}: {detail}") from e
        body = docker_spec.create_body(
            order,
            image=image,
            agent_id=self._agent_id,
            master=self._master,
            workdir=workdir,
            slots=self._slots,
            harness=harness,
            storage=storage,
        )
        if self._master_cert_file:
            _add_master_cert(body, self._master_cert_file)
        name = docker_spec.container_name(self._agent_id, cid)
        handle = await self._create_container(body, name, image)
        c = _Container(cid, order.allocation_id, handle, 0, workdir, on_event)
        try:
            await handle.start()
        except DockerError as e:
            await self._remove(c)
            raise _StartFailed(
                f"cannot start the container: {e.message}",
                EXIT_NOT_FOUND if _not_found(e.message) else EXIT_START_FAILED,
            ) from e
        with contextlib.suppress(DockerError):
            c.pid = int((await handle.show())["State"].get("Pid") or 0)
        return c

    async def _create_container(
        self, body: dict[str, Any], name: str, image: str
    ) -> DockerContainer:
        for attempt in (1, 2):
            try:
                return await self._docker.containers.create(body, name=name)
            except DockerError as e:
                if e.status == 409 and attempt == 1:
                    # A container of that name is left from an earlier run that was never
                    # reported (adoption found nothing to do with it): it is stale.
                    log.warning("removing a stale container named %s", name)
                    with contextlib.suppress(DockerError):
                        await self._docker.containers.container(name).delete(force=True)
                    continue
                raise _StartFailed(
                    f"cannot create a container of image {image}: {e.message}"
                ) from e
        raise AssertionError("unreachable")

    # -- watching -----------------------------------------------------------------------------

    def _register(self, c: _Container) -> None:
        self._containers[c.container_id] = c
        c.watcher = asyncio.create_task(self._watch(c), name=f"watch-{c.container_id}")
        self._watchers.add(c.watcher)
        c.watcher.add_done_callback(self._watchers.discard)

    async def _watch(self, c: _Container) -> None:
        cid = c.container_id
        error = ""
        try:
            exit_code, error = await self._supervise(c)
        except Exception as e:
            # A fault here is the agent's or the engine's, not the task's.
            log.exception("lost track of container %s", cid)
            await self._signal(c, "SIGKILL")
            exit_code, error = EXIT_START_FAILED, f"the agent lost track of the container: {e}"
        finally:
            c.exited.set()
        log.info("container %s exited with code %d", cid, exit_code)
        c.on_event(Exited(cid, c.allocation_id, exit_code, error, time.time()))
        c.finished.set()
        self._containers.pop(cid, None)
        await self._remove(c)

    async def _supervise(self, c: _Container) -> tuple[int, str]:
        reader = asyncio.create_task(
            docker_logs.follow(
                self._docker, c.handle.id, after_ns=c.position_ns, emit=lambda ls: self._emit(c, ls)
            ),
            name=f"logs-{c.container_id}",
        )
        try:
            code = await self._wait(c)
            c.exited.set()
            _, pending = await asyncio.wait([reader], timeout=_DRAIN_SECONDS)
            if pending:
                log.warning(
                    "container %s: its log did not end; not waiting for more", c.container_id
                )
            elif not reader.cancelled() and reader.exception() is not None:
                log.error(
                    "container %s: reading its log failed",
                    c.container_id,
                    exc_info=reader.exception(),
                )
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        error = ""
        with contextlib.suppress(DockerError):
            state = (await c.handle.show())["State"]
            if state.get("OOMKilled"):
                error = "the container ran out of memory and was killed"
            elif state.get("Error"):
                error = str(state["Error"])
        return code, error

    async def _wait(self, c: _Container) -> int:
        """The container's exit code, once it has exited; rides out an engine restart."""
        failures = 0
        while True:
            try:
                result = await c.handle.wait(timeout=LONG_TIMEOUT)
                code = int(result.get("StatusCode", EXIT_START_FAILED))
                return code if code >= 0 else EXIT_START_FAILED
            except (DockerError, aiohttp.ClientError) as e:
                if isinstance(e, DockerError) and e.status == 404:
                    raise RuntimeError("the container was removed outside pydet") from e
                failures += 1
                if failures > _WAIT_RETRIES:
                    raise
                log.warning("waiting on container %s failed (%s); retrying", c.container_id, e)
                await asyncio.sleep(min(2.0**failures, 10.0))

    def _emit(self, c: _Container, lines: list[docker_logs.Line]) -> None:
        out = tuple(LogLine(ln.timestamp_ns / 1e9, ln.stdtype, ln.text) for ln in lines)
        c.on_event(Output(c.container_id, c.allocation_id, out))
        c.position_ns = max(c.position_ns, *(ln.timestamp_ns for ln in lines))

    def lines_sent(self, container_id: str, timestamp: float) -> None:
        """Lines reached the master's stream: the next agent process may start after them.
        Noted only now, not when read, or lines read but not yet sent by a killed agent
        would be skipped by the next one."""
        if container_id in self._containers:
            self._positions.update(container_id, int(timestamp * 1e9))

    async def _signal(self, c: _Container, sig: str) -> None:
        try:
            await c.handle.kill(signal=sig)
        except DockerError as e:
            if e.status not in (404, 409):  # gone, or not running: nothing to signal
                log.warning("could not send %s to container %s: %s", sig, c.container_id, e)
        except aiohttp.ClientError as e:
            log.warning("could not send %s to container %s: %s", sig, c.container_id, e)

    async def _remove(self, c: _Container) -> None:
        """Remove the container, its working directory and its saved log position."""
        try:
            await c.handle.delete(force=True, v=True)
        except DockerError as e:
            if e.status != 404:
                log.warning("could not remove container %s: %s", c.container_id, e)
        except aiohttp.ClientError as e:
            log.warning("could not remove container %s: %s", c.container_id, e)
        await self._positions.forget(c.container_id)
        if c.workdir is not None:
            # Files the task wrote as another user may resist; they are only clutter.
            await asyncio.to_thread(shutil.rmtree, c.workdir, ignore_errors=True)


def _not_found(message: str) -> bool:
    text = message.lower()
    return "executable file not found" in text or "no such file or directory" in text


def _fresh_directory(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def _report_failure(order: StartOrder, on_event: EventSink, message: str, code: int) -> None:
    on_event(Exited(order.container_id, order.allocation_id, code, message, time.time()))
