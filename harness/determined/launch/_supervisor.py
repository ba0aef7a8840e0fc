"""Run a set of worker commands as one unit: all succeed, or the first failure ends them all.

This is the contract every distributed launcher owes Determined users: a job never hangs
because one worker died while its peers wait for it in a collective. Each worker leads its
own process group, so ending a worker also ends whatever it started (a shell pipeline, a
nested launcher's helpers).

Shutdown has two stages: SIGTERM to every group, then SIGKILL to what is left after
``grace_seconds``. A second SIGTERM or SIGINT from outside skips the wait.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from determined.launch import _process

log = logging.getLogger(__name__)

GRACE_SECONDS = 5.0
# Without pidfds (Linux < 5.3), how often exits are looked for; with them, the longest a
# wait lasts, so that a signal's grace period is kept to within this much.
_POLL_SECONDS = 0.05
_WAKE_SECONDS = 0.25


# A NamedTuple, not a dataclass: dataclasses (with inspect) is ~10 ms of every launcher's start.
class Worker(NamedTuple):
    """One command to supervise, with its environment (``None``: inherit ours); or, with
    ``child``, a forked copy of this process that calls it (``argv`` then only names it, and
    ``env`` and ``cwd`` are the caller's business: see ``_process.fork_call``)."""

    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    child: Callable[[], None] | None = None


class _Run:
    """The state of one ``supervise`` call; its methods also run from signal handlers."""

    def __init__(self, grace_seconds: float) -> None:
        self.grace_seconds = grace_seconds
        self.procs: list[subprocess.Popen[bytes] | _process.Forked] = []
        self.first_failure: int | None = None
        self.kill_at: float | None = None
        self.signals_received = 0

    def stop(self, signum: int) -> None:
        """Send ``signum`` to every group and arm the SIGKILL that follows the grace period."""
        for proc in self.procs:
            _process.signal_group(proc, signum)
        if self.kill_at is None:
            self.kill_at = time.monotonic() + self.grace_seconds

    def kill(self) -> None:
        for proc in self.procs:
            _process.signal_group(proc, signal.SIGKILL)

    def on_signal(self, signum: int) -> None:
        self.signals_received += 1
        if self.signals_received == 1:
            self.stop(signum)
        else:
            self.kill()

    def fail(self, status: int) -> None:
        if self.first_failure is None:
            self.first_failure = status
            self.stop(signal.SIGTERM)

    def running(self) -> bool:
        return any(p.returncode is None for p in self.procs)

    def poll(self) -> None:
        for proc in self.procs:
            if proc.returncode is not None:
                continue
            code = proc.poll()
            if code is not None and code != 0:
                status = _process.exit_status(code)
                if self.first_failure is None:
                    log.debug("worker %s exited with %s; stopping the others", proc.args, status)
                self.fail(status)
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            self.kill()
            self.kill_at = None


class _ExitWaiter:
    """Sleeps until a worker exits (a pidfd turns readable), without polling where Linux has
    pidfds: a trial's end is seen as it happens, not up to a poll interval later."""

    def __init__(self, procs: Sequence[subprocess.Popen[bytes] | _process.Forked]) -> None:
        self._poller: select.poll | None = select.poll()
        self._fds: dict[int, subprocess.Popen[bytes] | _process.Forked] = {}
        try:
            for proc in procs:
                fd = os.pidfd_open(proc.pid)
                self._fds[fd] = proc
                self._poller.register(fd, select.POLLIN)
        except (AttributeError, OSError):  # no pidfds here: poll
            self.close()
            self._poller = None

    def __enter__(self) -> _ExitWaiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()

    def wait(self, kill_at: float | None) -> None:
        if self._poller is None:
            time.sleep(_POLL_SECONDS)
            return
        timeout = _WAKE_SECONDS
        if kill_at is not None:
            timeout = min(timeout, max(0.0, kill_at - time.monotonic()))
        for fd, _ in self._poller.poll(timeout * 1000):
            # Exited: wait no more on it (its returncode is read by the caller's poll()).
            self._poller.unregister(fd)


def supervise(workers: Sequence[Worker], *, grace_seconds: float = GRACE_SECONDS) -> int:
    """Start every worker and wait for all of them.

    Returns 0 when every worker exits 0; otherwise the exit status of the first worker that
    failed (128+N for death by signal N, 127/126 for a command that could not start), after
    the others were sent SIGTERM and, ``grace_seconds`` later, SIGKILL. SIGTERM and SIGINT
    received meanwhile are passed on to every worker's process group.
    """
    run = _Run(grace_seconds)
    with _process.forward_signals(run.on_signal):
        for worker in workers:
            try:
                proc: subprocess.Popen[bytes] | _process.Forked
                if worker.child is not None:
                    proc = _process.fork_call(worker.child, worker.argv)
                else:
                    proc = _process.spawn(
                        worker.argv, env=worker.env, cwd=worker.cwd, new_session=True
                    )
            except OSError as e:
                name = worker.argv[0] if worker.argv else "(empty command)"
                print(f"cannot run {name}: {e.strerror or e}", file=sys.stderr, flush=True)
                run.fail(_process.start_failure_status(e))
                break
            run.procs.append(proc)
            if run.signals_received:
                _process.signal_group(proc, signal.SIGTERM)
        with _ExitWaiter(run.procs) as waiter:
            run.poll()
            while run.running():
                waiter.wait(run.kill_at)
                run.poll()
        if run.first_failure is not None:
            # Leaders are gone; whatever they left behind in their groups goes too.
            run.kill()
    return run.first_failure or 0
