"""Slows down repeated login failures for one user name or one client address.

The first few failures cost nothing extra; after that each attempt for the same key waits
twice as long as the one before, up to ``max_delay``. A success clears the user's count. The
table is bounded: when full, the oldest entries are dropped, so a flood of made-up names
cannot make the master allocate without bound. Which keys an attempt is checked under is
the authenticator's choice (a user's count does not slow an address that never failed).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable


class LoginThrottle:
    def __init__(
        self,
        *,
        free_failures: int = 3,
        base_delay: float = 0.25,
        max_delay: float = 8.0,
        forget_after: float = 900.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._free = free_failures
        self._base = base_delay
        self._max = max_delay
        self._forget = forget_after
        self._max_entries = max_entries
        self._clock = clock
        # key -> (failures, time of the last failure)
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def failures(self, key: str) -> int:
        """The failures counted under ``key`` and not yet forgotten."""
        entry = self._failures.get(key)
        if entry is None or self._clock() - entry[1] > self._forget:
            return 0
        return entry[0]

    def delay(self, keys: Iterable[str]) -> float:
        """Seconds the next attempt under any of ``keys`` must wait before it is checked."""
        now = self._clock()
        worst = 0
        for key in keys:
            entry = self._failures.get(key)
            if entry is None:
                continue
            count, last = entry
            if now - last > self._forget:
                del self._failures[key]
                continue
            worst = max(worst, count)
        if worst < self._free:
            return 0.0
        return float(min(self._max, self._base * 2 ** (worst - self._free)))

    def failed(self, keys: Iterable[str]) -> None:
        now = self._clock()
        for key in keys:
            count, _ = self._failures.pop(key, (0, now))
            self._failures[key] = (count + 1, now)
        while len(self._failures) > self._max_entries:
            self._failures.popitem(last=False)

    def forgive(self, keys: Iterable[str]) -> None:
        """Take back one failure per key: an attempt counted before it was checked (so that
        attempts made at once slow each other down) turned out right."""
        for key in keys:
            entry = self._failures.get(key)
            if entry is None:
                continue
            count, last = entry
            if count <= 1:
                del self._failures[key]
            else:
                self._failures[key] = (count - 1, last)

    def succeeded(self, key: str) -> None:
        self._failures.pop(key, None)
