"""The container runtime interface: what the agent's stream code needs from a runtime.

A runtime turns the master's start and kill orders into running containers and reports
what happens to them as events, in order per container: ``Pulling`` if the runtime pulls
its image first (only an image-based runtime does), ``Started``, any number of ``Output``,
then exactly one ``Exited``. A container that cannot be started gets only an
``Exited`` with an ``error``. The process runtime (``process_runtime.py``) is the one in use
today; a Docker runtime implements the same interface.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class BindMount:
    host_path: str
    container_path: str
    read_only: bool = False
    propagation: str = ""


@dataclass(frozen=True)
class DeviceMapping:
    host_path: str
    container_path: str
    mode: str = ""


@dataclass(frozen=True)
class ContainerSpec:
    """What an image-based runtime needs; the process runtime ignores it."""

    image: str = ""
    force_pull: bool = False
    registry_auth: str = ""
    bind_mounts: tuple[BindMount, ...] = ()
    shm_size: int = 0
    add_capabilities: tuple[str, ...] = ()
    drop_capabilities: tuple[str, ...] = ()
    devices: tuple[DeviceMapping, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunAs:
    """The identity a container's processes run as (its owner's agent user and group)."""

    uid: int
    gid: int
    user: str
    group: str

    def describe(self) -> str:
        return f"{self.user} (uid {self.uid}, gid {self.gid})"


@dataclass(frozen=True)
class StartOrder:
    container_id: str
    allocation_id: str
    task_id: str
    argv: tuple[str, ...]
    env: dict[str, str]
    slot_ids: tuple[str, ...]
    spec: ContainerSpec = field(default_factory=ContainerSpec)
    # None: the agent's own identity.
    run_as: RunAs | None = None


def give_directory(path: Path, run_as: RunAs | None) -> None:
    """Hand a container's fresh working directory to the identity it runs as: its own,
    closed to others; the agent's (private) work dir above it becomes passable, though not
    listable, for that identity to reach it."""
    if run_as is None:
        return
    os.chown(path, run_as.uid, run_as.gid)
    path.chmod(0o700)
    mode = path.parent.stat().st_mode & 0o7777
    if mode & 0o011 != 0o011:
        path.parent.chmod(mode | 0o011)


@dataclass(frozen=True)
class KillOrder:
    container_id: str
    grace_seconds: float


Order = StartOrder | KillOrder


@dataclass(frozen=True)
class LogLine:
    timestamp: float
    stdtype: str  # "stdout" or "stderr"
    text: str


@dataclass(frozen=True)
class Pulling:
    container_id: str
    allocation_id: str
    image: str
    timestamp: float


@dataclass(frozen=True)
class Started:
    container_id: str
    allocation_id: str
    pid: int
    timestamp: float


@dataclass(frozen=True)
class Output:
    container_id: str
    allocation_id: str
    lines: tuple[LogLine, ...]


@dataclass(frozen=True)
class Exited:
    container_id: str
    allocation_id: str
    exit_code: int
    error: str
    timestamp: float


Event = Pulling | Started | Output | Exited

# Called synchronously, in order, from the runtime's own tasks; it must not block.
EventSink = Callable[[Event], None]


@dataclass(frozen=True)
class RunningContainer:
    container_id: str
    allocation_id: str
    pid: int


class Runtime(Protocol):
    """A way to run containers. Implementations own the tasks that watch them."""

    @property
    def name(self) -> str:
        """``"process"`` or ``"docker"``, as announced in the hello."""
        ...

    async def start(self, order: StartOrder, on_event: EventSink) -> None:
        """Start a container and return once it runs (``Started`` was emitted) or could not
        be started (``Exited`` with an error was emitted). Never raises for a bad order."""
        ...

    async def kill(self, container_id: str, grace_seconds: float) -> None:
        """Ask the container to stop, force it after ``grace_seconds``, and return once it
        has exited and its ``Exited`` was emitted. Unknown or finished ids are a no-op."""
        ...

    def running(self) -> list[RunningContainer]:
        """Containers whose ``Exited`` has not been emitted yet."""
        ...

    def kill_now(self) -> None:
        """Force-kill every container without waiting, for an emergency exit."""
        ...

    def lines_sent(self, container_id: str, timestamp: float) -> None:
        """The container's log lines up to ``timestamp`` reached the master's stream."""
        ...

    async def close(self) -> None:
        """Kill whatever still runs and release the runtime's tasks; idempotent."""
        ...
