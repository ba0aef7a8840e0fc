"""``python3 -m determined.launch.wrap_rank RANK [--] CMD...``: tag a worker's output with its rank.

Runs CMD and writes each line it prints as ``[rank=N] line``: its stdout lines to our
stdout, its stderr lines to our stderr, each line as soon as it is complete, so the master
can store the rank with every log line. Bytes that are not UTF-8 are replaced, never fatal;
a lone carriage return (a progress bar redrawing itself) ends a line too.

RANK is an integer, or the name of an environment variable that holds it (``RANK`` behind
``torch.distributed.run``), or several names separated by commas, the first one set wins
(``HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK``). SIGTERM and SIGINT are passed on to CMD's
process group; the exit status is CMD's (128+N if a signal N ended it). If the launcher
that started wrap_rank dies without ending it, CMD is killed rather than left running.
"""

from __future__ import annotations

import errno
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from determined.launch import _process

USAGE = "usage: python3 -m determined.launch.wrap_rank RANK [--] CMD..."
MAX_LINE_BYTES = 64 * 1024
# After CMD exits, how long to keep reading pipes that something it started still holds.
DRAIN_SECONDS = 2.0

_LINE_END = re.compile(rb"\r\n|\r|\n")


class RankError(ValueError):
    """RANK is neither an integer nor the name of a set environment variable."""


def resolve_rank(spec: str, env: Mapping[str, str]) -> int:
    """The rank that ``spec`` (an integer or comma-separated variable names) stands for."""
    if spec.isdigit():
        return int(spec)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    for name in names:
        if name in env:
            value = env[name].strip()
            if not value.isdigit():
                raise RankError(f"environment variable {name}={value!r} is not a rank")
            return int(value)
    raise RankError(f"RANK {spec!r} is not an integer, and no environment variable {spec} is set")


def parse(argv: Sequence[str]) -> tuple[str, list[str]]:
    """``(rank spec, command)``; a ``--`` between them is optional."""
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        raise RankError("RANK and CMD are required")
    rank, cmd = args[0], args[1:]
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if not cmd:
        raise RankError("CMD is required")
    return rank, cmd


class LinePrefixer:
    """Turns a byte stream into complete lines that start with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix.encode()
        self._pending = b""

    def _line(self, raw: bytes) -> bytes:
        text = raw.decode("utf-8", errors="replace")
        return self._prefix + text.encode("utf-8") + b"\n"

    def feed(self, data: bytes) -> list[bytes]:
        """The lines that ``data`` completes, each prefixed and ending in ``\\n``."""
        buf = self._pending + data
        lines: list[bytes] = []
        start = 0
        for m in _LINE_END.finditer(buf):
            if m.group() == b"\r" and m.end() == len(buf):
                break  # maybe the first half of \r\n: wait for the next chunk
            lines.append(self._line(buf[start : m.start()]))
            start = m.end()
        rest = buf[start:]
        while len(rest) > MAX_LINE_BYTES:
            lines.append(self._line(rest[:MAX_LINE_BYTES]))
            rest = rest[MAX_LINE_BYTES:]
        self._pending = rest
        return lines

    def flush(self) -> list[bytes]:
        """The last, unterminated line, if any."""
        rest, self._pending = self._pending, b""
        if rest.endswith(b"\r"):
            rest = rest[:-1]
        return [self._line(rest)] if rest else []


def _write(fd: int, lines: list[bytes]) -> None:
    # One write per line: lines up to PIPE_BUF never interleave with other ranks' lines.
    for line in lines:
        view = memoryview(line)
        while view:
            try:
                n = os.write(fd, view)
            except BrokenPipeError:
                return  # nobody reads any more; keep draining CMD so it never blocks
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                raise
            view = view[n:]


def pump(
    proc: subprocess.Popen[bytes],
    prefix: str,
    *,
    out_fd: int = 1,
    err_fd: int = 2,
    parent: int | None = None,
) -> None:
    """Copy ``proc``'s stdout and stderr to ``out_fd``/``err_fd`` line by line, prefixed.

    If ``parent`` (our parent's pid) stops being our parent, the launcher that started us
    died without ending us: ``proc``'s process group is killed so no worker outlives it.
    """
    assert proc.stdout is not None and proc.stderr is not None
    orphaned = False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout.fileno(), selectors.EVENT_READ, (out_fd, LinePrefixer(prefix)))
        sel.register(proc.stderr.fileno(), selectors.EVENT_READ, (err_fd, LinePrefixer(prefix)))
        exited_at: float | None = None
        while sel.get_map():
            for key, _ in sel.select(timeout=0.1):
                dest, lines = key.data
                data = os.read(key.fd, 65536)
                if data:
                    _write(dest, lines.feed(data))
                else:
                    _write(dest, lines.flush())
                    sel.unregister(key.fd)
            if parent is not None and not orphaned and os.getppid() != parent:
                orphaned = True
                _process.signal_group(proc, signal.SIGKILL)
            if proc.poll() is not None:
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at > DRAIN_SECONDS:
                    break
        for key in list(sel.get_map().values()):
            dest, lines = key.data
            _write(dest, lines.flush())


def run(rank: int, cmd: Sequence[str]) -> int:
    """Run ``cmd`` with its output prefixed by ``[rank=RANK] ``; its exit status."""
    parent = os.getppid()
    try:
        # A session of its own: a signal sent to our process group (torchrun ends workers
        # that way) reaches CMD once, through us, and still reaches all that CMD started.
        proc = _process.spawn(cmd, new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        print(f"wrap_rank: cannot run {cmd[0]}: {e.strerror or e}", file=sys.stderr, flush=True)
        return _process.start_failure_status(e)
    with proc, _process.forward_signals(lambda signum: _process.signal_group(proc, signum)):
        pump(proc, f"[rank={rank}] ", parent=parent)
        return _process.exit_status(proc.wait())


def main(argv: Sequence[str] | None = None) -> int:
    try:
        spec, cmd = parse(sys.argv[1:] if argv is None else argv)
        rank = resolve_rank(spec, os.environ)
    except RankError as e:
        print(f"{USAGE}\nerror: {e}", file=sys.stderr, flush=True)
        return 2
    return run(rank, cmd)


if __name__ == "__main__":
    sys.exit(main())
