"""Live updates inside the master: domain code publishes small events, the gateway's
server-sent-event streams subscribe. Publishing never blocks; a subscriber too slow to keep
up loses its oldest events and is told so (it should refetch)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
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
        self._subscribers: set[asyncio.Queue[Event]] = set()

    def publish(self, kind: str, **data: Any) -> None:
        event = Event(kind, data)
        for queue in self._subscribers:
            if queue.full():
                queue.get_nowait()
                queue.put_nowait(Event("overflow", {}))
            queue.put_nowait(event)

    async def subscribe(self) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue(_QUEUE_LIMIT)
        self._subscribers.add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._subscribers.discard(queue)
