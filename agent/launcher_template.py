"""The agent's side of the launcher template (``determined.exec._zygote``): one process
with the trial launcher's modules loaded, which forks a launcher per trial.

``LauncherTemplate.start`` runs ``python3 -m determined.exec.launch`` with the control
socket's other end as a file descriptor and waits for it to say it is ready; ``fork`` sends
an order (the task's environment, directory, and the write ends of its stdout and stderr
pipes) and returns a ``ForkedLauncher`` (its pid, output streams and exit). Exits are read
from the socket; a launcher whose template died before telling is seen gone through its
pidfd and reported with ``status`` None.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

ZYGOTE_ENV = "PYDET_LAUNCH_ZYGOTE"  # determined.exec.launch.ZYGOTE_ENV
_HEADER = struct.Struct(">Q")
_READ_SIZE = 64 * 1024
READY_SECONDS = 60.0


class TemplateGone(Exception):
    """The template is not running (it never started, or it died)."""


class ForkedLauncher:
    """A launcher the template forked: ``status`` is its exit status (128+N for signal N)
    once ``exited`` is set, or None if the template died before telling it."""

    def __init__(self, pid: int, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader):
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.exited = asyncio.Event()
        self.status: int | None = None
        self.transports: list[asyncio.BaseTransport] = []

    def close(self) -> None:
        for transport in self.transports:
            transport.close()


class LauncherTemplate:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> None:
        self.argv = tuple(argv)
        self.env = dict(env)
        self._cwd = cwd
        self._sock: socket.socket | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._starts: list[asyncio.Future[int]] = []
        self._children: dict[int, ForkedLauncher] = {}
        self._send_lock = asyncio.Lock()
        self._gone = False

    @property
    def running(self) -> bool:
        return self._sock is not None and not self._gone

    async def start(self) -> None:
        """Start the template and wait until its imports are done.

        Raises:
            TemplateGone: it could not start, or died or stayed silent while loading.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.setblocking(False)
        env = {**self.env, ZYGOTE_ENV: str(theirs.fileno())}
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                env=env,
                cwd=self._cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except OSError as e:
            ours.close()
            raise TemplateGone(f"cannot start the launcher template: {e}") from e
        finally:
            theirs.close()
        self._sock = ours
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._reader = asyncio.create_task(self._read(), name="launcher-template")
        try:
            async with asyncio.timeout(READY_SECONDS):
                await self._ready
        except TimeoutError:
            await self.close()
            raise TemplateGone("the launcher template did not get ready") from None

    async def fork(self, env: Mapping[str, str], cwd: Path) -> ForkedLauncher:
        """A launcher for one task.

        Raises:
            TemplateGone: the template is not running or could not fork.
        """
        sock = self._sock
        if sock is None or self._gone:
            raise TemplateGone("the launcher template is not running")
        loop = asyncio.get_running_loop()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        body = json.dumps({"env": dict(env), "cwd": str(cwd)}).encode()
        started: asyncio.Future[int] = loop.create_future()
        try:
            async with self._send_lock:
                self._starts.append(started)
                await _send_with_fds(sock, _HEADER.pack(len(body)), [out_w, err_w])
                await loop.sock_sendall(sock, body)
        except OSError as e:
            for fd in (out_r, err_r):
                os.close(fd)
            self._fail(f"the launcher template's socket failed: {e}")
            raise TemplateGone(f"the launcher template's socket failed: {e}") from e
        finally:
            os.close(out_w)
            os.close(err_w)
        try:
            pid = await started
        except TemplateGone:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        stdout, out_transport = await _reader(out_r)
        stderr, err_transport = await _reader(err_r)
        child = ForkedLauncher(pid, stdout, stderr)
        child.transports += (out_transport, err_transport)
        self._children[pid] = child
        self._watch_pidfd(child)
        return child

    async def close(self) -> None:
        """End the template (its launchers run on)."""
        self._gone = True
        if self._sock is not None:
            self._sock.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                async with asyncio.timeout(5.0):
                    await proc.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self._fail("the launcher template was closed")

    async def _read(self) -> None:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        buffer = b""
        try:
            while True:
                data = await loop.sock_recv(self._sock, _READ_SIZE)
                if not data:
                    break
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self._on_message(json.loads(line))
        except (OSError, ValueError) as e:
            log.warning("the launcher template's socket failed: %s", e)
        self._fail("the launcher template ended")

    def _on_message(self, message: dict[str, object]) -> None:
        if "ready" in message:
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(None)
        elif "started" in message or "failed" in message:
            if not self._starts:
                log.warning("the launcher template answered an order it was not given")
                return
            started = self._starts.pop(0)
            if "started" in message and isinstance(message["started"], int):
                started.set_result(message["started"])
            else:
                started.set_exception(TemplateGone(f"the template failed: {message['failed']}"))
        elif "exited" in message:
            pid, status = message["exited"], message.get("status")
            child = self._children.pop(pid, None) if isinstance(pid, int) else None
            if child is not None and isinstance(status, int):
                child.status = status
                child.exited.set()

    def _fail(self, why: str) -> None:
        """The template is gone: orders waiting fail; launchers are watched by pidfd."""
        self._gone = True
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(TemplateGone(why))
        for started in self._starts:
            if not started.done():
                started.set_exception(TemplateGone(why))
        self._starts.clear()

    def _watch_pidfd(self, child: ForkedLauncher) -> None:
        """Set ``exited`` (status unknown) when the process is gone without the template's
        word: the template died first."""
        loop = asyncio.get_running_loop()
        try:
            fd = os.pidfd_open(child.pid)
        except (AttributeError, OSError):
            return

        def gone() -> None:
            loop.remove_reader(fd)
            os.close(fd)
            # The template's word comes on the socket; give it a moment before giving up.
            loop.call_later(1.0, settle)

        def settle() -> None:
            if not child.exited.is_set():
                self._children.pop(child.pid, None)
                child.exited.set()

        loop.add_reader(fd, gone)


async def _send_with_fds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    """``data`` with ``fds`` attached to its first byte, on a non-blocking socket."""
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
    while True:
        try:
            sent = sock.sendmsg([data], rights)
            break
        except BlockingIOError:
            await asyncio.sleep(0.001)
    if sent < len(data):
        await asyncio.get_running_loop().sock_sendall(sock, data[sent:])


async def _reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_SIZE, loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", 0)
    )
    return reader, transport
