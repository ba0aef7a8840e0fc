"""One run of a task on its slots: containers, their exits, the all-gather barrier and the
preemption signal. In memory; the task manager persists what must survive a restart."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from determined.common import errors

if TYPE_CHECKING:
    from pydet.master.tasks.task_list import Job


@dataclass
class Container:
    id: str
    agent_id: str
    slot_ids: tuple[str, ...]
    rank: int
    started: bool = False
    # Its agent pulls its image (reported before it starts): its trial shows PULLING.
    pulling: bool = False
    exit_code: int | None = None
    error: str = ""
    # Its agent was lost (it did not report the container in time): not the code's failure.
    lost: bool = False
    # It only serves the others (MarkAllocationResourcesDaemon): stopped once they have all
    # exited, and its exit is not held against the task.
    daemon: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent_id": self.agent_id,
            "slot_ids": list(self.slot_ids),
            "rank": self.rank,
            "exit_code": self.exit_code,
            "error": self.error,
            "lost": self.lost,
            "daemon": self.daemon,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Container:
        return cls(
            id=d["id"],
            agent_id=d["agent_id"],
            slot_ids=tuple(d["slot_ids"]),
            rank=int(d["rank"]),
            exit_code=d.get("exit_code"),
            error=d.get("error", ""),
            lost=bool(d.get("lost", False)),
            daemon=bool(d.get("daemon", False)),
        )


_KEEP_FINISHED = 64


@dataclass
class _Gather:
    size: int
    entries: dict[int, bytes] = field(default_factory=dict)
    request_ids: dict[int, str] = field(default_factory=dict)
    done: asyncio.Future[list[bytes]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


@dataclass
class Allocation:
    id: str
    task_id: str
    trial_id: int | None
    token: str
    containers: dict[str, Container]
    # The job it runs for, whose settings the scheduler reads on every pass.
    job: Job
    start_time: float = field(default_factory=time.time)
    preemption_acked: bool = False
    # The owner has been told that every container started.
    running: bool = False
    # Why the master is ending it ("killed", "preempted", ...), "" while it runs freely.
    stop_reason: str = ""
    preempt: asyncio.Event = field(default_factory=asyncio.Event)
    # When to kill it if it has not exited after being asked to preempt.
    kill_at: float | None = None
    # The container that failed first: the one to blame, whatever its siblings did after.
    failed_first: str | None = None
    # When to stop the siblings of a failed container (they get a moment to report).
    siblings_kill_at: float | None = None
    # The master has ordered its daemon containers stopped: every other container exited.
    daemons_stopped: bool = False
    _gathers: dict[tuple[str, int], _Gather] = field(default_factory=dict)
    # Recently finished rounds, so a rank that retries after a lost response gets the answer:
    # the result, and the request id each rank sent.
    _finished: dict[tuple[str, int], tuple[list[bytes], dict[int, str]]] = field(
        default_factory=dict
    )
    _aborted: str = ""
    # What held() answers until a container exits, and whether any container is a daemon.
    _held: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    _has_daemons: bool = False

    def __post_init__(self) -> None:
        self._has_daemons = any(c.daemon for c in self.containers.values())

    @property
    def has_daemons(self) -> bool:
        return self._has_daemons

    def held(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(agent, slot ids) of each container that has not exited: what it holds."""
        if self._held is None:
            self._held = tuple(
                (c.agent_id, tuple(c.slot_ids))
                for c in self.containers.values()
                if c.exit_code is None
            )
        return self._held

    def containers_json(self) -> str:
        return json.dumps([c.to_json() for c in self.containers.values()])

    @property
    def exited(self) -> bool:
        return all(c.exit_code is not None for c in self.containers.values())

    def first_failure(self) -> Container | None:
        return None if self.failed_first is None else self.containers[self.failed_first]

    @property
    def lost(self) -> bool:
        """It failed because an agent holding it was lost."""
        first = self.first_failure()
        return first is not None and first.lost

    @property
    def succeeded(self) -> bool:
        return self.exited and self.first_failure() is None

    def mark_daemon(self, container_id: str) -> Container:
        """Mark one of its containers as serving the others only (idempotent)."""
        container = self.containers.get(container_id)
        if container is None:
            known = ", ".join(sorted(self.containers))
            raise errors.NotFound(
                f"allocation {self.id} has no resources {container_id!r} (it has {known})"
            )
        if container.exit_code is not None and not container.daemon:
            raise errors.FailedPrecondition(
                f"resources {container_id} of allocation {self.id} have already exited "
                f"(code {container.exit_code}); only running resources can become daemons"
            )
        if not container.daemon and all(
            c.daemon for c in self.containers.values() if c is not container
        ):
            raise errors.FailedPrecondition(
                f"resources {container_id} are the last of allocation {self.id} that are not "
                "daemons: at least one container must do the task's work"
            )
        container.daemon = True
        self._has_daemons = True
        return container

    def daemons_to_stop(self) -> list[Container]:
        """Its running daemon containers once every other container has exited (and they
        have not been ordered stopped yet); otherwise none."""
        if self.daemons_stopped or not self._has_daemons:
            return []
        if any(c.exit_code is None for c in self.containers.values() if not c.daemon):
            return []
        return [c for c in self.containers.values() if c.daemon and c.exit_code is None]

    def container_exited(self, container: Container, exit_code: int, error: str) -> None:
        container.exit_code = exit_code
        container.error = error
        self._held = None
        if container.daemon:
            # Stopped by the master, or gone early: either way the others decide the outcome
            # (a chief that needed it fails on its own).
            if self.exited:
                self.abort_gathers(f"container {container.rank} (a daemon) exited")
            return
        if exit_code != 0 and self.failed_first is None:
            self.failed_first = container.id
        reason = (
            f"container {container.rank} (agent {container.agent_id}) exited with code {exit_code}"
        )
        if exit_code != 0 or self.exited:
            self.abort_gathers(reason)

    async def allgather(
        self,
        group: str,
        seq: int,
        rank: int,
        size: int,
        data: bytes,
        timeout: float,
        request_id: str = "",
    ) -> list[bytes]:
        if self._aborted:
            raise errors.Aborted(f"all-gather in group {group!r} aborted: {self._aborted}")
        if not 0 <= rank < size:
            raise errors.InvalidArgument(f"rank {rank} is outside a group of size {size}")
        key = (group, seq)
        finished = self._finished.get(key)
        if finished is not None:
            result, ids = finished
            if request_id and ids.get(rank) == request_id:
                return result
            # A new process of the same task counting from 0 again: a new round.
            del self._finished[key]
        gather = self._gathers.get(key)
        if gather is None:
            gather = self._gathers[key] = _Gather(size)
        elif gather.size != size:
            raise errors.InvalidArgument(
                f"all-gather {group!r}#{seq}: rank {rank} says the group has {size} ranks, "
                f"an earlier rank said {gather.size}"
            )
        gather.entries[rank] = data
        gather.request_ids[rank] = request_id
        if len(gather.entries) == size and not gather.done.done():
            result = [gather.entries[r] for r in range(size)]
            gather.done.set_result(result)
            del self._gathers[key]
            self._finished[key] = (result, dict(gather.request_ids))
            if len(self._finished) > _KEEP_FINISHED:
                del self._finished[next(iter(self._finished))]
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(gather.done)
        except TimeoutError:
            missing = sorted(set(range(size)) - set(gather.entries))
            raise errors.DeadlineExceeded(
                f"all-gather in group {group!r} timed out after {timeout:.0f}s waiting for "
                f"rank(s) {missing}"
            ) from None

    def abort_gathers(self, reason: str) -> None:
        self._aborted = self._aborted or reason
        for key, gather in list(self._gathers.items()):
            if not gather.done.done():
                missing = sorted(set(range(gather.size)) - set(gather.entries))
                gather.done.set_exception(
                    errors.Aborted(
                        f"all-gather in group {key[0]!r} aborted while waiting for rank(s) "
                        f"{missing}: {reason}"
                    )
                )
                # Nobody may be awaiting it any more; don't warn about an unread exception.
                gather.done.exception()
        self._gathers.clear()

    async def wait_preemption(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.preempt.wait()
        return self.preempt.is_set()
