"""Task logs: lines from agents get their rank and level parsed, stored in batches, and
served with head/tail/filters and follow.

Lines that find the master's disk full wait in memory (``MAX_WAITING`` at most; beyond that
the oldest are dropped and counted in the log) and are written, in order, once it has space:
the agents and tasks that sent them are not made to fail for it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from determined.common import errors
from pydet.master import queries
from pydet.master.events import EventBus
from pydet.master.queries import LogFilter, LogRow
from pydet.master.store.db import Database

log = logging.getLogger(__name__)

_RANK = re.compile(r"^\[rank=(\d+)\] ")
_LEVEL = re.compile(r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)[:\s]")

# Lines kept while the disk is full, and how often their write is tried again.
MAX_WAITING = 100_000
RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class LogLine:
    trial_id: int | None
    task_id: str
    allocation_id: str
    agent_id: str
    container_id: str
    stdtype: str
    timestamp: float
    text: str


def parse_line(text: str) -> tuple[int | None, str, str]:
    """Split a raw line into (rank, level, message); the rank prefix is removed."""
    rank = None
    m = _RANK.match(text)
    if m:
        rank = int(m.group(1))
        text = text[m.end() :]
    level = ""
    lm = _LEVEL.match(text)
    if lm:
        level = {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(lm.group(1), lm.group(1))
    return rank, level or "INFO", text


class LogStore:
    def __init__(self, db: Database, events: EventBus | None = None) -> None:
        self._db = db
        self._bus = events
        # Followers wait on the trial's (or, for other tasks, the task's) event; it is
        # replaced after each notification.
        self._events: dict[int | str, asyncio.Event] = {}
        self._watchers: list[Callable[[Sequence[LogLine]], Awaitable[None]]] = []
        self._waiting: deque[LogLine] = deque()
        self._dropped = 0
        self._retry: asyncio.Task[None] | None = None

    def watch(self, watcher: Callable[[Sequence[LogLine]], Awaitable[None]]) -> None:
        """Show every stored batch to ``watcher`` (the log policies), after it is stored."""
        self._watchers.append(watcher)

    async def append(self, lines: Sequence[LogLine]) -> None:
        """Store ``lines`` (after any still waiting for space, so that order is kept)."""
        if self._waiting or (self._retry is not None and not self._retry.done()):
            self._wait(lines)
            return
        try:
            await self._store(lines)
        except errors.ResourceExhausted:
            self._wait(lines)

    def _wait(self, lines: Sequence[LogLine]) -> None:
        self._waiting.extend(lines)
        while len(self._waiting) > MAX_WAITING:
            self._waiting.popleft()
            self._dropped += 1
        if self._retry is None or self._retry.done():
            self._retry = asyncio.create_task(self._write_waiting(), name="log-lines-waiting")

    async def _write_waiting(self) -> None:
        while self._waiting:
            await asyncio.sleep(RETRY_SECONDS)
            # Lines arriving during the write wait behind this batch, as they would in the
            # deque; on failure the batch goes back in front of them.
            batch, self._waiting = self._waiting, deque()
            try:
                await self._store(batch)
            except errors.ResourceExhausted:
                batch.extend(self._waiting)
                self._waiting = deque()
                self._wait(batch)
                continue
            except Exception:
                log.exception("writing %d waiting log lines failed; they are dropped", len(batch))
            if self._dropped:
                log.warning("%d log lines were dropped while the disk was full", self._dropped)
                self._dropped = 0

    async def _store(self, lines: Sequence[LogLine]) -> None:
        rows = []
        for line in lines:
            rank, level, message = parse_line(line.text)
            rows.append(
                (
                    line.trial_id,
                    line.task_id,
                    line.allocation_id,
                    line.agent_id,
                    line.container_id,
                    rank,
                    level,
                    line.stdtype,
                    line.timestamp,
                    message,
                )
            )
        if not rows:
            return
        await self._db.execute_many(
            "INSERT INTO task_logs (trial_id, task_id, allocation_id, agent_id, container_id,"
            " rank, level, stdtype, timestamp, message) VALUES (?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        for watcher in self._watchers:
            try:
                await watcher(lines)
            except Exception:
                # The lines are stored; a watcher's bug must not stop the logs.
                log.exception("a log watcher failed")
        for trial_id in {line.trial_id for line in lines}:
            if trial_id is not None:
                self.notify(trial_id)
                if self._bus is not None:
                    self._bus.publish("logs", trial_id=trial_id)
        for task_id in {line.task_id for line in lines if line.trial_id is None}:
            self.notify(task_id)

    def notify(self, key: int | str) -> None:
        """Wake the followers of a trial (by its id) or of another task (by its task id)."""
        event = self._events.pop(key, None)
        if event is not None:
            event.set()

    def _waiter(self, key: int | str) -> asyncio.Event:
        return self._events.setdefault(key, asyncio.Event())

    async def stream(
        self,
        trial_id: int,
        f: LogFilter,
        *,
        follow: bool,
        is_done: Callable[[], Awaitable[bool]],
        task_id: str = "",
    ) -> AsyncIterator[list[LogRow]]:
        """Yield batches of matching lines of a trial (or, given ``task_id``, of a task that
        is not a trial's); with ``follow``, until it has ended and every line it wrote was
        sent."""
        after = f.after_id
        sent = 0
        first = True
        while True:
            waiter = self._waiter(task_id or trial_id)
            done = await is_done()
            batch_filter = dataclasses.replace(
                f,
                head=f.head - sent if f.head else 0,
                tail=f.tail if first else 0,
                after_id=after,
            )
            rows = await queries.task_logs(
                self._db, trial_id, batch_filter, limit=5000, task_id=task_id
            )
            first = False
            if rows:
                after = rows[-1].id
                sent += len(rows)
                yield rows
                if f.head and sent >= f.head:
                    return
                continue
            if not follow or done:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await waiter.wait()
