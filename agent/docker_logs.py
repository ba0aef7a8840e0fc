"""A container's output, read from the engine's log stream, as timestamped lines.

The agent follows ``GET /containers/{id}/logs?follow&stdout&stderr&timestamps`` instead of
attaching: the engine keeps the log, so a line printed before the agent was listening (or
while it was restarting) is not lost, and a restarted agent resumes after the last line it
handed on. The stream is multiplexed: frames of an 8-byte header (stream type, length) and
a payload that starts with the engine's RFC 3339 timestamp. stdout and stderr keep their
own line splitting, as the process runtime's pipes do.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import aiodocker
import aiohttp

from pydet.agent.lines import LineSplitter

_HEADER = 8
_STREAMS = {1: "stdout", 2: "stderr"}
_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


@dataclass(frozen=True)
class Line:
    stdtype: str
    timestamp_ns: int
    text: str


def parse_timestamp(text: str) -> int | None:
    """Nanoseconds since the epoch of an engine timestamp (RFC 3339, up to 9 digits)."""
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        return None
    whole, frac, zone = m.groups()
    seconds = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    return int(seconds) * 1_000_000_000 + int((frac or "").ljust(9, "0"))


def since_param(timestamp_ns: int) -> str:
    """The ``since`` query value for a position: the engine takes seconds with a fraction."""
    return f"{timestamp_ns // 1_000_000_000}.{timestamp_ns % 1_000_000_000:09d}"


class FrameParser:
    """Turns the bytes of a multiplexed, timestamped log stream into lines.

    Frames at or before ``after_ns`` were handed on by an earlier agent process: skipped.
    """

    def __init__(self, *, after_ns: int = 0) -> None:
        self._buf = bytearray()
        self._after = after_ns
        self._splitters = {name: LineSplitter() for name in _STREAMS.values()}
        # The timestamp of each stream's pending (unfinished) line.
        self._pending_ts = dict.fromkeys(_STREAMS.values(), 0)

    def feed(self, data: bytes) -> list[Line]:
        self._buf += data
        lines: list[Line] = []
        buf = self._buf
        start = 0
        while len(buf) - start >= _HEADER:
            kind = buf[start]
            size = int.from_bytes(buf[start + 4 : start + 8], "big")
            if len(buf) - start - _HEADER < size:
                break
            payload = bytes(buf[start + _HEADER : start + _HEADER + size])
            start += _HEADER + size
            stdtype = _STREAMS.get(kind)
            if stdtype is not None:
                lines += self._frame(stdtype, payload)
        del buf[:start]
        return lines

    def flush(self) -> list[Line]:
        """The unfinished lines at the end of the stream."""
        lines = []
        for stdtype, splitter in self._splitters.items():
            ts = self._pending_ts[stdtype] or time.time_ns()
            lines += [Line(stdtype, ts, text) for text in splitter.flush()]
        return lines

    def _frame(self, stdtype: str, payload: bytes) -> list[Line]:
        stamp, sep, rest = payload.partition(b" ")
        ts = parse_timestamp(stamp.decode("ascii", "replace")) if sep else None
        if ts is None:
            ts, rest = time.time_ns(), payload
        elif ts <= self._after:
            return []
        if not self._pending_ts[stdtype]:
            self._pending_ts[stdtype] = ts
        texts = self._splitters[stdtype].feed(rest)
        if not texts:
            return []
        # A line that spanned frames carries the time it was finished.
        self._pending_ts[stdtype] = 0
        return [Line(stdtype, ts, text) for text in texts]


async def follow(
    docker: aiodocker.Docker,
    docker_id: str,
    *,
    after_ns: int,
    emit: Callable[[list[Line]], None],
) -> None:
    """Hand every line of the container's output after ``after_ns`` to ``emit``, in order,
    until the container has exited and its log is read to the end."""
    params = {"follow": "1", "stdout": "1", "stderr": "1", "timestamps": "1"}
    if after_ns:
        params["since"] = since_param(after_ns)
    parser = FrameParser(after_ns=after_ns)
    # No read deadline: a quiet container is not a broken one.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None)
    # aiodocker's own `log()` drops the stream type of each frame, which we need.
    async with docker._query(
        f"containers/{docker_id}/logs", params=params, timeout=timeout
    ) as resp:
        while True:
            data = await resp.content.readany()
            lines = parser.feed(data) if data else parser.flush()
            if lines:
                emit(lines)
            if not data:
                return
