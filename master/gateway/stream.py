"""Server-sent events: the domain's live updates (experiment and trial states, new metrics,
new log lines) for the WebUI, one ``event: <kind>`` / ``data: <json>`` pair per update.

A comment goes out every ``HEARTBEAT_SECONDS`` so that proxies keep the connection open and
a dead client is noticed. Events only say *what* changed; the page refetches what it shows.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from determined.common import protojson
from pydet.master.events import Event, EventBus
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec

HEARTBEAT_SECONDS = 15.0

# Ask the browser to reconnect quickly after the master restarts.
_PREAMBLE = "retry: 2000\n: connected\n\n"


@dataclass(frozen=True)
class StreamFilter:
    experiment_id: int = 0
    trial_id: int = 0

    def matches(self, event: Event) -> bool:
        if event.kind == "overflow":
            return True
        data = event.data
        if self.experiment_id:
            exp = data.get("experiment_id", data.get("id") if event.kind == "experiment" else None)
            if exp != self.experiment_id:
                return False
        if self.trial_id:
            trial = data.get("trial_id", data.get("id") if event.kind == "trial" else None)
            if trial != self.trial_id:
                return False
        return True


def encode(event: Event) -> str:
    """One event, its fields keyed in lowerCamelCase as the API's JSON is."""
    fields = {protojson.json_name(k): v for k, v in event.data.items()}
    data = json.dumps(fields, separators=(",", ":"), default=str)
    return f"event: {event.kind}\ndata: {data}\n\n"


async def event_stream(
    bus: EventBus,
    only: StreamFilter,
    heartbeat: float = HEARTBEAT_SECONDS,
    signed_in: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[str]:
    """The events ``only`` lets through; ends once ``signed_in`` (checked at most once per
    heartbeat) says the session that opened the stream has ended."""
    subscription = bus.subscribe()
    # The pending read is owned here: cancelled and awaited when the client goes away.
    pending: asyncio.Task[Event] | None = asyncio.ensure_future(anext(subscription))
    try:
        # Let the subscription register before the client is told it is connected.
        await asyncio.sleep(0)
        yield _PREAMBLE
        checked = time.monotonic()
        while True:
            assert pending is not None
            done, _ = await asyncio.wait({pending}, timeout=heartbeat)
            if signed_in is not None and time.monotonic() - checked >= heartbeat:
                if not await signed_in():
                    return  # logged out or expired: the page reconnects and is sent to log in
                checked = time.monotonic()
            if not done:
                yield ": heartbeat\n\n"
                continue
            event = pending.result()
            pending = asyncio.ensure_future(anext(subscription))
            if only.matches(event):
                yield encode(event)
    finally:
        if pending is not None:
            pending.cancel()
            # asyncio.wait never raises, so a cancellation of this stream is not swallowed.
            await asyncio.wait({pending})
            if not pending.cancelled():
                pending.exception()
        if isinstance(subscription, AsyncGenerator):
            await subscription.aclose()


def routes(bus: EventBus) -> list[Route]:
    async def stream(request: Request) -> Response:
        only = StreamFilter(
            experiment_id=codec.integer(request, "experiment_id"),
            trial_id=codec.integer(request, "trial_id"),
        )
        return StreamingResponse(
            event_stream(bus, only, signed_in=gateway_auth.session_check(request)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return [Route("/api/v1/stream", stream, methods=["GET"])]
