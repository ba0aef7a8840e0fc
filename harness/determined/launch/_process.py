"""Starting child processes and passing termination signals on to them.

Every launch layer starts its children the same way: in a new session when it must be able
to end a whole tree at once (the child is then the leader of its own process group), and with
Linux's parent-death signal set so that a child never outlives a launcher that was killed
with SIGKILL and had no chance to clean up.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType
from typing import IO, Any

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # this process's symbols include libc's
    except OSError:
        return None
    prctl: Callable[[int, int], int] | None = getattr(libc, "prctl", None)
    return prctl


# Resolved once in the parent: the pre-exec hook must do as little as possible after fork.
_PRCTL = _load_prctl()


def _die_with(parent: int) -> Callable[[], None]:
    def hook() -> None:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
            if os.getppid() != parent:  # the parent died before the line above
                os._exit(137)

    return hook


def exit_status(returncode: int) -> int:
    """A ``Popen.returncode`` as a shell would report it: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    new_session: bool = False,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv``; it receives SIGKILL if this process dies first (Linux).

    Raises:
        OSError: the command cannot be started (not found, not executable, bad cwd).
    """
    # The parent-death signal is tied to the thread that forks; only set it from the main
    # thread, whose end is the end of this process.
    main = threading.current_thread() is threading.main_thread()
    hook = _die_with(os.getpid()) if main else None
    return subprocess.Popen(
        list(argv),
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=new_session,
        stdout=stdout,
        stderr=stderr,
        preexec_fn=hook,
    )


class Forked:
    """A child made by ``fork_call``, with the part of ``Popen``'s interface supervisors use."""

    def __init__(self, pid: int, args: Sequence[str]) -> None:
        self.pid = pid
        self.args = list(args)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def fork_call(child: Callable[[], None], args: Sequence[str]) -> Forked:
    """Run ``child()`` in a forked copy of this process, the leader of a new session, which
    receives SIGKILL if this process dies first (Linux), with the default handlers for the
    signals this process forwards. ``args`` only describes it (in logs).

    ``child`` must end the copy itself (``os._exit``, or raising ``SystemExit`` so that the
    interpreter shuts down as any Python program does); the caller must hold no other
    threads, which a fork would not copy.
    """
    parent = os.getpid()
    # What exists now is this process's own, loaded before the child's code runs: the
    # collector leaves it out, in the child's collections and the final one at its exit
    # (a tenth of a second for the Core API's modules), and its pages stay shared.
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            _die_with(parent)()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            child()
        except SystemExit:
            raise
        except BaseException:  # never back into the parent's code in the copy
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        raise SystemExit(0)
    return Forked(pid, args)


def start_failure_status(err: OSError) -> int:
    """The shell's exit status for a command that could not be started (127 or 126)."""
    return 127 if isinstance(err, FileNotFoundError) else 126


def signal_group(proc: subprocess.Popen[bytes] | Forked, signum: int) -> None:
    """Send ``signum`` to the process group led by ``proc`` (started with a new session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)


@contextlib.contextmanager
def forward_signals(on_signal: Callable[[int], None]) -> Iterator[None]:
    """Call ``on_signal(signum)`` for SIGTERM and SIGINT while the block runs.

    The previous handlers come back afterwards. Outside the main thread, where Python cannot
    install handlers, this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        on_signal(signum)

    previous = {s: signal.signal(s, handler) for s in FORWARDED_SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
