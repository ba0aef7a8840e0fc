"""Live updates inside the master: domain code publishes small events, the gateway's
server-sent-event streams subscribe. Publishing never blocks; a subscriber too slow to keep
up loses its oldest events and is told so (it should refetch).

A package of its own because every layer between the store and the transports publishes
or subscribes: it uses nothing of the master."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

_QUEUE_LIMIT = 10_000


@dataclass(frozen=True)
class Event:
    # "experiment", "trial", "metrics", "logs", "agent", "job", or "overflow".
    kind: str
    data: dict[str, Any]
    time: float = field(default_factory=time.time)


class EventBus:
    def __init__(self) -> None:
        # Each subscriber's queue, and the kinds it wants (None: all of them).
        self._subscribers: dict[asyncio.Queue[Event], frozenset[str] | None] = {}

    def publish(self, kind: str, **data: Any) -> None:
        event: Event | None = None
        for queue, kinds in self._subscribers.items():
            if kinds is not None and kind not in kinds:
                continue
            if event is None:
                event = Event(kind, data)
            if queue.full():
                queue.get_nowait()
                queue.put_nowait(Event("overflow", {}))
            queue.put_nowait(event)

    async def subscribe(self, kinds: Iterable[str] | None = None) -> AsyncIterator[Event]:
        """Every event published from now on, or only those of ``kinds``."""
        queue: asyncio.Queue[Event] = asyncio.Queue(_QUEUE_LIMIT)
        self._subscribers[queue] = None if kinds is None else frozenset(kinds)
        try:
            while True:
                yield await queue.get()
        finally:
            self._subscribers.pop(queue, None)
