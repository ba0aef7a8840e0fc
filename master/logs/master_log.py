"""The master's own log, kept in memory for `det master logs` (Determined's MasterLogs).

A ``logging.Handler`` on the root logger keeps the last ``capacity`` records as entries with
increasing ids; readers page through them by offset (negative: from the end) and followers
wait for new ones. Records come from any thread (the store's, a provider's), so the buffer
has a lock, and followers are woken on their own event loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

CAPACITY = 10_000

# logging's level names as Determined's LogLevel names them.
_LEVELS = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}
# Determined's names to logging's; TRACE is below DEBUG.
LEVEL_NUMBERS = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


@dataclass(frozen=True)
class Entry:
    id: int
    time: float
    level: str
    message: str


def level_name(levelno: int) -> str:
    if levelno in _LEVELS:
        return _LEVELS[levelno]
    return "TRACE" if levelno < logging.DEBUG else logging.getLevelName(levelno)


class MasterLog(logging.Handler):
    def __init__(self, capacity: int = CAPACITY) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        self._entries: collections.deque[Entry] = collections.deque(maxlen=capacity)
        self._next_id = 0
        self._guard = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._guard:
            self._entries.append(
                Entry(self._next_id, record.created, level_name(record.levelno), message)
            )
            self._next_id += 1
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:
                pass  # its loop has closed: nobody is waiting any more

    def __len__(self) -> int:
        with self._guard:
            return len(self._entries)

    def entries(self, offset: int, limit: int = 0) -> list[Entry]:
        """Entries from ``offset`` (negative: counted back from the end), at most ``limit``
        (0: all)."""
        with self._guard:
            kept = list(self._entries)
        start = max(0, len(kept) + offset) if offset < 0 else offset
        chosen = kept[start:]
        return chosen[:limit] if limit > 0 else chosen

    def since(self, entry_id: int) -> list[Entry]:
        """Entries logged after the one with ``entry_id`` (-1: all kept)."""
        with self._guard:
            return [e for e in self._entries if e.id > entry_id]

    async def follow(self, offset: int) -> AsyncIterator[list[Entry]]:
        """The entries from ``offset``, then each batch as it is logged, until cancelled."""
        batch = self.entries(offset)
        last = batch[-1].id if batch else self._last_before(offset)
        while True:
            if batch:
                yield batch
                last = batch[-1].id
            event = asyncio.Event()
            with self._guard:
                pending = [e for e in self._entries if e.id > last]
                if not pending:
                    self._waiters.append((asyncio.get_running_loop(), event))
            if not pending:
                await event.wait()
                pending = self.since(last)
            batch = pending

    def _last_before(self, offset: int) -> int:
        """The id of the entry just before where ``offset`` starts (-1 when none)."""
        with self._guard:
            kept = list(self._entries)
        start = max(0, len(kept) + offset) if offset < 0 else min(offset, len(kept))
        return kept[start - 1].id if start > 0 else (kept[0].id - 1 if kept else self._next_id - 1)
