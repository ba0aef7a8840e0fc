"""Splitting a container's output bytes into log lines.

A line is text up to a newline, without the newline (or a CRLF). Lines longer than
``max_bytes`` are cut into several lines, never dropped, at a UTF-8 character boundary
when there is one nearby; bytes that are not UTF-8 become U+FFFD.
"""

from __future__ import annotations

MAX_LINE_BYTES = 64 * 1024


class LineSplitter:
    def __init__(self, *, max_bytes: int = MAX_LINE_BYTES) -> None:
        if max_bytes < 4:
            raise ValueError(f"max_bytes must be >= 4, got {max_bytes}")
        self._max = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[str]:
        """The complete lines that ``data`` finishes; the rest waits for more bytes."""
        self._buf += data
        lines: list[str] = []
        start = 0
        buf = self._buf
        while True:
            newline = buf.find(b"\n", start, start + self._max + 1)
            if newline != -1:
                end = newline - 1 if newline > start and buf[newline - 1] == 0x0D else newline
                lines.append(_decode(buf[start:end]))
                start = newline + 1
            elif len(buf) - start > self._max:
                cut = self._cut(start)
                lines.append(_decode(buf[start:cut]))
                start = cut
            else:
                break
        del buf[:start]
        return lines

    def flush(self) -> list[str]:
        """What is left at end of stream, as lines (output that did not end in a newline)."""
        if not self._buf:
            return []
        rest = bytes(self._buf) + b"\n"
        self._buf.clear()
        return self.feed(rest)

    def _cut(self, start: int) -> int:
        """Where to end a piece of ``max`` bytes so the next does not start mid-character."""
        cut = start + self._max
        for back in range(4):
            if self._buf[cut - back] & 0xC0 != 0x80:
                return cut - back
        return cut


def _decode(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")
