"""What the agent has to tell the master, kept until it has been told.

Runtime events go in, in order; batches come out, in the same order per container, for
the stream to send. Log lines are grouped into batches of up to ``batch_lines`` lines of
one container, held at most ``flush_interval`` seconds so the master sees output promptly.
While the master is unreachable everything waits here; log lines are bounded by
``max_lines`` (the oldest are dropped first, and the container's next batch starts with
one line saying how many). Exits are kept until the master acknowledges them, so that a
reconnect can send again those that were sent but may not have arrived.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pydet.agent.runtime import Event, Exited, LogLine, Output, Pulling, Started

log = logging.getLogger(__name__)

MAX_LINES = 200_000
BATCH_LINES = 500
BATCH_BYTES = 1 << 20
FLUSH_INTERVAL = 0.05


@dataclass(eq=False)
class _Chunk:
    container_id: str
    allocation_id: str
    lines: list[LogLine]
    nbytes: int
    created: float


_Record = Pulling | Started | _Chunk | Exited


@dataclass(frozen=True, eq=False)
class Batch:
    """One message's worth: send ``item``, then ``commit`` it, or ``restore`` it on failure."""

    item: Event
    record: _Record | None
    dropped: tuple[str, int] | None = None


class Outbox:
    def __init__(
        self,
        *,
        max_lines: int = MAX_LINES,
        batch_lines: int = BATCH_LINES,
        batch_bytes: int = BATCH_BYTES,
        flush_interval: float = FLUSH_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        on_sent: Callable[[str, float], None] | None = None,
    ) -> None:
        self._max_lines = max_lines
        self._batch_lines = batch_lines
        self._batch_bytes = batch_bytes
        self._flush_interval = flush_interval
        self._clock = clock
        # Told (container, timestamp of its last line) when a batch of log lines was sent.
        self._on_sent = on_sent
        self._queue: deque[_Record] = deque()
        self._line_count = 0
        self._dropped: dict[str, int] = {}
        self._warned_drop = False
        self._unacked: dict[str, Exited] = {}
        self._sent: set[str] = set()
        self._changed = asyncio.Event()
        self._all_acked = asyncio.Event()
        self._all_acked.set()
        self._urgent = False

    @property
    def line_count(self) -> int:
        """Log lines waiting to be sent."""
        return self._line_count

    @property
    def unacked_count(self) -> int:
        """Exits the master has not acknowledged yet (sent or not)."""
        return len(self._unacked)

    def empty(self) -> bool:
        return not self._queue

    def put(self, event: Event) -> None:
        """Queue a runtime event; this is the runtime's event sink."""
        if isinstance(event, Output):
            self._put_lines(event)
        else:
            self._queue.append(event)
            if isinstance(event, Exited):
                self._unacked[event.container_id] = event
                self._all_acked.clear()
        self._changed.set()

    async def take(self) -> Batch | None:
        """The next batch once it is due; None when ``wake`` was called and nothing is left."""
        while True:
            delay: float | None = None
            if self._queue:
                head = self._queue[0]
                if not isinstance(head, _Chunk) or self._due(head):
                    return self._pop()
                delay = head.created + self._flush_interval - self._clock()
            elif self._urgent:
                self._urgent = False
                return None
            self._changed.clear()
            try:
                async with asyncio.timeout(delay):
                    await self._changed.wait()
            except TimeoutError:
                pass

    def wake(self) -> None:
        """Hand out everything queued now, then make ``take`` return None once (closing)."""
        self._urgent = True
        self._changed.set()

    def commit(self, batch: Batch) -> None:
        """``batch`` was sent."""
        if isinstance(batch.record, Exited):
            self._sent.add(batch.record.container_id)
        elif isinstance(batch.record, _Chunk) and batch.record.lines and self._on_sent:
            self._on_sent(batch.record.container_id, batch.record.lines[-1].timestamp)
        self._warned_drop = False

    def restore(self, batch: Batch) -> None:
        """``batch`` could not be sent: put it back at the front, to go first next time."""
        if batch.record is not None:
            self._queue.appendleft(batch.record)
            if isinstance(batch.record, _Chunk):
                self._line_count += len(batch.record.lines)
                self._trim()
        if batch.dropped is not None:
            cid, n = batch.dropped
            self._dropped[cid] = self._dropped.get(cid, 0) + n
        self._changed.set()

    def ack(self, container_id: str) -> None:
        """The master acknowledged the container's exit; forget it."""
        self._unacked.pop(container_id, None)
        self._sent.discard(container_id)
        if not self._unacked:
            self._all_acked.set()

    def unacked_sent(self) -> list[Exited]:
        """Exits that were sent but not acknowledged: to send again after a reconnect."""
        return [e for cid, e in self._unacked.items() if cid in self._sent]

    async def wait_all_acked(self) -> None:
        await self._all_acked.wait()

    def _put_lines(self, event: Output) -> None:
        cid = event.container_id
        tail = self._queue[-1] if self._queue else None
        for line in event.lines:
            size = len(line.text)
            if (
                not isinstance(tail, _Chunk)
                or tail.container_id != cid
                or len(tail.lines) >= self._batch_lines
                or tail.nbytes + size > self._batch_bytes
            ):
                tail = _Chunk(cid, event.allocation_id, [], 0, self._clock())
                self._queue.append(tail)
            tail.lines.append(line)
            tail.nbytes += size
        self._line_count += len(event.lines)
        self._trim()

    def _due(self, chunk: _Chunk) -> bool:
        return (
            self._urgent
            or len(self._queue) > 1
            or len(chunk.lines) >= self._batch_lines
            or chunk.nbytes >= self._batch_bytes
            or self._clock() >= chunk.created + self._flush_interval
        )

    def _pop(self) -> Batch:
        record = self._queue.popleft()
        dropped = 0
        if not isinstance(record, Pulling | Started):
            dropped = self._dropped.pop(record.container_id, 0)
        if isinstance(record, _Chunk):
            self._line_count -= len(record.lines)
            lines = record.lines
            if dropped:
                lines = [_drop_notice(dropped, self._max_lines, lines[0].timestamp), *lines]
            item: Event = Output(record.container_id, record.allocation_id, tuple(lines))
        elif isinstance(record, Exited) and dropped:
            # The notice must reach the master before the exit: hand it out on its own.
            self._queue.appendleft(record)
            notice = _drop_notice(dropped, self._max_lines, record.timestamp)
            item = Output(record.container_id, record.allocation_id, (notice,))
            return Batch(item, None, (record.container_id, dropped))
        else:
            item = record
        return Batch(item, record, (record.container_id, dropped) if dropped else None)

    def _trim(self) -> None:
        excess = self._line_count - self._max_lines
        if excess <= 0:
            return
        if not self._warned_drop:
            self._warned_drop = True
            log.warning(
                "more than %d log lines are waiting for the master; dropping the oldest",
                self._max_lines,
            )
        kept: list[_Record] = []
        while excess > 0:
            record = self._queue.popleft()
            if not isinstance(record, _Chunk):
                kept.append(record)
                continue
            n = min(excess, len(record.lines))
            del record.lines[:n]
            record.nbytes = sum(len(line.text) for line in record.lines)
            excess -= n
            self._line_count -= n
            self._dropped[record.container_id] = self._dropped.get(record.container_id, 0) + n
            if record.lines:
                kept.append(record)
        self._queue.extendleft(reversed(kept))


def _drop_notice(count: int, limit: int, timestamp: float) -> LogLine:
    return LogLine(
        timestamp,
        "stderr",
        f"[pydet agent] {count} earlier log line(s) were dropped: the master was unreachable "
        f"and the agent keeps at most {limit} lines",
    )
