"""The Core API's connection to the master: one event-loop thread that owns the gRPC channel.

Training code is synchronous. A ``Session`` runs an event loop in a background thread;
synchronous callers hand it coroutines (``run``) and wait for the answer, and long-lived
background work (the metrics shipper, the preemption long poll) runs there as tasks the
session owns (``spawn``). The calls themselves are blocking (``determined.api.channel``,
which imports in milliseconds where grpclib takes a tenth of a second); the loop awaits each
in a thread of the session's own pool. ``close()`` cancels and awaits those tasks, closes
the channel (which ends calls still waiting in the pool), stops the loop and joins the
thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import grpclib.const
import grpclib.exceptions

from determined.api import channel, lite
from determined.common import client, errors

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long an RPC keeps being retried while the master cannot be reached (it may be
# restarting) before the failure is reported to the caller.
RETRY_FOR_SECONDS = 30.0
# How long a call the master refuses because its disk is full (RESOURCE_EXHAUSTED) keeps
# being retried: the master writes again as soon as someone frees space.
DISK_FULL_RETRY_FOR_SECONDS = 6 * 3600.0
_CLOSED = "the Core API session is closed (core.Context.close() was called)"


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is the master saying its disk is full: worth trying again later."""
    return (
        isinstance(exc, grpclib.exceptions.GRPCError)
        and exc.status is grpclib.const.Status.RESOURCE_EXHAUSTED
    )


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` means "the master could not be reached", worth another try."""
    if isinstance(exc, grpclib.exceptions.GRPCError):
        return exc.status is grpclib.const.Status.UNAVAILABLE
    if client.is_tls_failure(exc):
        return False
    return isinstance(
        exc, (ConnectionError, OSError, grpclib.exceptions.StreamTerminatedError)
    ) and not isinstance(exc, TimeoutError)


class Session:
    """An event-loop thread, a channel to the master, and the tasks running on that loop."""

    def __init__(
        self,
        master_url: str,
        token: str,
        *,
        name: str = "pydet-core",
        cert_file: str | None = None,
    ) -> None:
        self.master_url = master_url
        # None: DET_MASTER_CERT_FILE, which the agent sets for every task of a TLS master.
        self._cert_file = cert_file
        self._metadata = client.metadata(token)
        self._loop = client.quiet_event_loop()
        self._channel: channel.Channel | None = None
        self._stub: Any = None
        self._blocking_stub: Any = None
        # Calls in flight (a long poll holds one for its whole wait).
        self._calls = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix=f"{name}-call")
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run_loop, name=name, daemon=True)
        self._thread.start()

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def stub(self) -> Any:
        """A ``determined.api.lite.Stub`` (``v1.DeterminedStub``'s calls with light messages)
        whose calls return awaitables; only for coroutines running on this session's loop."""
        if self._stub is None:
            self._stub = lite.stub(self._invoke, metadata=self._metadata)
        return self._stub

    @property
    def blocking_stub(self) -> Any:
        """The same calls, made in the calling thread (for ``call_blocking``): a synchronous
        caller's answer does not pass through the loop and a pool thread."""
        if self._blocking_stub is None:
            channel = self._get_channel()
            self._blocking_stub = lite.stub(channel.unary, metadata=self._metadata)
        return self._blocking_stub

    def _get_channel(self) -> channel.Channel:
        with self._lock:
            if self._channel is None:
                if self._closed:
                    raise RuntimeError(_CLOSED)
                self._channel = client.blocking_channel(self.master_url, cert_file=self._cert_file)
            return self._channel

    def _invoke(self, *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        if self._closed:
            # close() is cancelling the loop's tasks: a call one of them makes meanwhile
            # ends as they do, not as a failure of the task.
            raise asyncio.CancelledError
        call = functools.partial(self._get_channel().unary, *args, **kwargs)
        return self._loop.run_in_executor(self._calls, call)

    @property
    def metadata(self) -> dict[str, str]:
        return self._metadata

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; the caller waits on the returned future."""
        if self._closed:
            coro.close()
            raise RuntimeError(_CLOSED)
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and return its result (from a non-loop thread)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("Session.run() was called from the session's own loop thread")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            # Interrupted (Ctrl-C) or timed out: do not leave the RPC running unowned.
            future.cancel()
            raise

    def spawn(self, factory: Callable[[], Coroutine[Any, Any, None]], *, name: str) -> None:
        """Start a long-lived task on the loop; the session cancels it at ``close()``.

        Returns without waiting for the loop: the task is created before anything handed to
        the loop later (``run``, ``close``) starts, so ``close()`` still finds it.
        """
        if self._closed:
            raise RuntimeError(_CLOSED)

        def start() -> None:
            task = self._loop.create_task(factory(), name=name)
            self._tasks.add(task)
            task.add_done_callback(self._task_done)

        self._loop.call_soon_threadsafe(start)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "Core API background task %s failed", task.get_name(), exc_info=task.exception()
            )

    async def call(
        self,
        what: str,
        rpc: Callable[[], Awaitable[T]],
        *,
        retry_for: float = RETRY_FOR_SECONDS,
    ) -> T:
        """Await ``rpc()``; retry while the master is unreachable, then raise a ``DetError``.

        ``rpc`` is called afresh for each attempt. Errors the master answers with (not found,
        invalid argument, aborted, ...) are not retried.
        """
        retry = _Retry(what, self.master_url, retry_for)
        while True:
            try:
                return await rpc()
            except Exception as e:
                await asyncio.sleep(retry.delay_after(e))

    def call_blocking(
        self, what: str, rpc: Callable[[], T], *, retry_for: float = RETRY_FOR_SECONDS
    ) -> T:
        """``call`` for a synchronous caller: ``rpc()`` (a ``blocking_stub`` call) runs in the
        calling thread, retried and translated as ``call`` does."""
        retry = _Retry(what, self.master_url, retry_for)
        while True:
            if self._closed:  # its channel is closed: a call would wait for nothing
                raise RuntimeError(_CLOSED)
            try:
                return rpc()
            except Exception as e:
                time.sleep(retry.delay_after(e))

    def close(self) -> None:
        """Cancel and await the session's tasks, close the channel, stop and join the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if threading.current_thread() is self._thread:
            raise RuntimeError("Session.close() was called from the session's own loop thread")
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()

    async def _shutdown(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._channel is not None:
            self._channel.close()
            self._channel = None
            self._stub = None
            self._blocking_stub = None  # bound to the channel just closed
        self._calls.shutdown(wait=False, cancel_futures=True)


class _Retry:
    """One call's attempts: how long to wait after a failure, or the error to raise."""

    def __init__(self, what: str, master_url: str, retry_for: float) -> None:
        self._what = what
        self._master_url = master_url
        self._deadline = time.monotonic() + retry_for
        self._delay = 0.2
        self._disk_full_until: float | None = None

    def delay_after(self, e: Exception) -> float:
        """Seconds to wait before the next attempt; raises when there is none to make."""
        if isinstance(e, TimeoutError):
            # grpclib's client-side deadline; OSError's subclass, but not "unreachable".
            raise errors.DeadlineExceeded(
                f"{self._what}: the master did not answer before the deadline"
            ) from None
        delay = self._delay
        if is_disk_full(e):
            if self._disk_full_until is None:
                self._disk_full_until = time.monotonic() + DISK_FULL_RETRY_FOR_SECONDS
                log.warning("%s: %s; retrying until it has space", self._what, _message(e))
            if time.monotonic() + delay < self._disk_full_until:
                self._delay = min(delay * 2, 5.0)
                return delay
        elif is_transient(e) and time.monotonic() + delay < self._deadline:
            log.debug("%s: master unreachable (%s); retrying in %.1fs", self._what, e, delay)
            self._delay = min(delay * 2, 5.0)
            return delay
        translated = client.translate(e, self._master_url)
        if translated is None:
            raise  # the caller's exception, as it is
        raise type(translated)(f"{self._what}: {translated.message}") from None


def _message(e: Exception) -> str:
    return str(getattr(e, "message", None) or e)
