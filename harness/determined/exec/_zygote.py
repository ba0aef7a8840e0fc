"""The agent's launcher template: one process that loads the launcher's and the Core API's
modules once, then forks a trial launcher per task.

A trial's launcher (``python3 -m determined.exec.launch``) costs an interpreter start and a
few hundred milliseconds of imports, CPU that a machine running many short trials spends
again and again. The process runtime instead keeps this template running (started as the
launcher, with ``launch.ZYGOTE_ENV`` naming the control socket's file descriptor) and asks
it for each trial. Each launcher is a process of its own, forked before any task's code ran
in the template, in a new session, with the task's environment, directory, stdout and
stderr; it then runs exactly as a launcher started from scratch.

The control socket (a Unix stream socket) carries:

- agent -> template: an order, ``<8-byte big-endian length><JSON {"env": {...}, "cwd": ...}>``,
  with the write ends of the task's stdout and stderr pipes attached (SCM_RIGHTS) to its
  first byte;
- template -> agent, JSON lines: ``{"ready": pid}`` once its imports are done;
  ``{"started": pid}`` or ``{"failed": "why"}`` per order, in order; ``{"exited": pid,
  "status": N}`` when a launcher ends (128+N for death by signal N).

End of file on the socket ends the template; launchers it started run on.
"""

from __future__ import annotations

import array
import contextlib
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import traceback
from collections.abc import Callable

_HEADER = struct.Struct(">Q")
_MAX_ORDER = 64 * 1024 * 1024  # an order is an environment and a path: far below this
_RECV = 64 * 1024


class _Orders:
    """Frames and file descriptors read from the control socket, paired in order."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.fds: list[int] = []

    def feed(self, data: bytes, fds: list[int]) -> None:
        self.data += data
        self.fds += fds

    def next(self) -> tuple[dict[str, object], list[int]] | None:
        if len(self.data) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self.data)
        if size > _MAX_ORDER:
            raise ValueError(f"an order of {size} bytes")
        if len(self.data) < _HEADER.size + size:
            return None
        body = bytes(self.data[_HEADER.size : _HEADER.size + size])
        del self.data[: _HEADER.size + size]
        fds, self.fds = self.fds[:2], self.fds[2:]
        order: dict[str, object] = json.loads(body)
        return order, fds


def _receive(sock: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(_RECV, socket.CMSG_SPACE(16 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return data, list(fds)


def _send(sock: socket.socket, message: dict[str, object]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def serve(control_fd: int, preload: Callable[[], None], launcher: Callable[[], int]) -> int:
    """Run the template on the socket ``control_fd``; returns in the template at the
    socket's end (0), and never returns in a launcher it forked (``launcher()``'s status
    ends that process)."""
    sock = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    preload()
    # The template's objects stay out of every launcher's collections (and their pages
    # shared): a launcher's own garbage is all its collector looks at.
    gc.freeze()
    _send(sock, {"ready": os.getpid()})
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    orders = _Orders()
    while True:
        for fd, _ in poller.poll():
            if fd == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
                _reap(sock)
                continue
            data, fds = _receive(sock)
            if not data:
                return 0
            orders.feed(data, fds)
            while (item := orders.next()) is not None:
                order, task_fds = item
                pid = _fork(order, task_fds, sock, (wake_r, wake_w), launcher)
                if pid > 0:
                    _send(sock, {"started": pid})


def _fork(
    order: dict[str, object],
    fds: list[int],
    sock: socket.socket,
    wake: tuple[int, int],
    launcher: Callable[[], int],
) -> int:
    if len(fds) != 2:
        for fd in fds:
            os.close(fd)
        _send(sock, {"failed": f"an order came with {len(fds)} file descriptors, not 2"})
        return 0
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        pid = os.fork()
    except OSError as e:
        _send(sock, {"failed": f"fork: {e.strerror or e}"})
        pid = 0
    if pid != 0:
        for fd in fds:
            os.close(fd)
        return pid
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wake:
            os.close(fd)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        for source, target in ((devnull, 0), (fds[0], 1), (fds[1], 2)):
            os.dup2(source, target)
            os.close(source)
        env = order["env"]
        cwd = order["cwd"]
        assert isinstance(env, dict) and isinstance(cwd, str)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.path[0] = cwd  # as `python3 -m` started there would have it
        code = launcher()
    except SystemExit:  # a script the launcher forked in turn, ending
        raise
    except BaseException:
        traceback.print_exc()
    _exit(code)
    return 0  # not reached


def _exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        _send(sock, {"exited": pid, "status": 128 - code if code < 0 else code})
