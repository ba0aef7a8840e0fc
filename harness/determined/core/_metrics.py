"""Metric reports leave the training loop at once and reach the master in batches.

``MetricShipper.put()`` appends a report to a queue and returns; a task on the session's
event loop takes everything queued (up to ``max_batch`` reports) and ships it in one RPC.
The first report after a quiet spell goes out at once; later ones wait until ``interval``
(0.1 s) has passed since the last batch left, unless a ``flush()`` or ``close()`` waits for
them. A training loop that reports every step therefore costs the master at most one call
per interval, not one per step (with steps of 10 ms, ten calls became two). Progress (a
single number where only the latest value matters) rides along after each batch.

A batch that fails (after the session has retried an unreachable master for a while) is
raised by the next ``put()`` / ``put_progress()`` / ``flush()`` / ``close()``. ``close()``
ships everything reported before it and waits for the master to acknowledge it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from determined.core._train import MetricRecord, ReportError

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_BATCH = 5000
SHIP_INTERVAL = 0.1


class LoopOwner(Protocol):
    """What the shipper needs from a session: its loop, a way to wait, owned tasks."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T: ...

    def spawn(self, factory: Callable[[], Coroutine[Any, Any, None]], *, name: str) -> None: ...


SendBatch = Callable[[list[MetricRecord]], Awaitable[None]]
SendProgress = Callable[[float], Awaitable[None]]


class MetricShipper:
    """A queue of metric reports and the background task that ships it in batches."""

    def __init__(
        self,
        owner: LoopOwner,
        send: SendBatch,
        send_progress: SendProgress,
        *,
        max_batch: int = MAX_BATCH,
        interval: float = SHIP_INTERVAL,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, not {max_batch}")
        self._owner = owner
        self._loop = owner.loop
        self._send = send
        self._send_progress = send_progress
        self._max_batch = max_batch
        self._interval = interval
        self._lock = threading.Lock()
        self._queue: deque[MetricRecord] = deque()
        self._progress: float | None = None
        # True while the shipping task waits for work and no wake-up is on its way; only the
        # report that ends an idle period pays for waking the loop.
        self._idle = True
        self._error: BaseException | None = None
        self._closed = False
        self._wakeup = asyncio.Event()
        # Set while something waits for the queue to drain: the interval is not waited out.
        self._hurry = asyncio.Event()
        self._drain_waiters: list[asyncio.Future[None]] = []
        owner.spawn(self._run, name="pydet-metrics-shipper")

    def put(self, record: MetricRecord) -> None:
        """Queue one report; raises the failure of an earlier batch, if there was one."""
        with self._lock:
            self._check_locked()
            self._queue.append(record)
            wake = self._idle
            self._idle = False
        if wake:
            self._loop.call_soon_threadsafe(self._wakeup.set)

    def put_progress(self, progress: float) -> None:
        """Queue a progress value, replacing one not shipped yet."""
        with self._lock:
            self._check_locked()
            self._progress = progress
            wake = self._idle
            self._idle = False
        if wake:
            self._loop.call_soon_threadsafe(self._wakeup.set)

    def flush(self) -> None:
        """Wait until everything queued so far has been shipped; raise an earlier failure."""
        self._drain()

    def close(self) -> None:
        """Ship everything queued and wait for it; later reports are refused. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._drain()

    def _drain(self) -> None:
        with self._lock:
            idle = self._idle
        # Idle: everything put so far was shipped, and there is no need to ask the loop.
        if not idle:
            self._owner.run(self._wait_drained())
        with self._lock:
            self._raise_pending_locked()

    def _check_locked(self) -> None:
        self._raise_pending_locked()
        if self._closed:
            raise RuntimeError("metrics cannot be reported after core.Context.close()")

    def _raise_pending_locked(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    async def _wait_drained(self) -> None:
        with self._lock:
            if self._idle:
                return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        self._hurry.set()
        await waiter

    async def _run(self) -> None:
        last = -math.inf  # when the last batch left (loop time)
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while True:
                await self._linger(last + self._interval - self._loop.time())
                with self._lock:
                    count = min(len(self._queue), self._max_batch)
                    batch = [self._queue.popleft() for _ in range(count)]
                    progress, self._progress = self._progress, None
                    if not batch and progress is None:
                        self._idle = True
                        waiters, self._drain_waiters = self._drain_waiters, []
                        self._hurry.clear()
                        break
                if batch:
                    last = self._loop.time()
                    await self._ship(batch)
                if progress is not None:
                    await self._ship_progress(progress)
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def _linger(self, delay: float) -> None:
        """Let reports gather for ``delay`` seconds, or until something waits for them."""
        if delay <= 0 or self._hurry.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._hurry.wait()

    async def _ship(self, batch: list[MetricRecord]) -> None:
        try:
            await self._send(batch)
        except Exception as e:
            first, last = batch[0].steps_completed, batch[-1].steps_completed
            groups = sorted({r.group for r in batch})
            self._fail(
                ReportError(
                    f"{len(batch)} metric reports ({', '.join(groups)}; steps_completed "
                    f"{first}..{last}) were not recorded by the master: {e}"
                ),
                e,
            )

    async def _ship_progress(self, progress: float) -> None:
        try:
            await self._send_progress(progress)
        except Exception as e:
            self._fail(ReportError(f"progress {progress:.3f} was not recorded: {e}"), e)

    def _fail(self, error: ReportError, cause: Exception) -> None:
        error.__cause__ = cause
        log.error("%s", error.message)
        with self._lock:
            if self._error is None:
                self._error = error
