"""Delivers webhook events: HTTP POSTs of JSON, off the master's critical path.

Events wait in one bounded queue; a few workers POST them, each with a time limit, and
retry a failed delivery (no answer, or a status other than 2xx) a few times with growing
pauses. Nothing the master does waits for a receiver. At most ``PER_HOST`` deliveries to one
host run at once, so a receiver that never answers holds two workers, not all of them.
When receivers are so slow or dead that the queue is full, new events are dropped and the
log says so: memory stays bounded.

HTTP/1.1 is written over asyncio streams (TLS for https://): the master has no HTTP client
library among its dependencies, and streams keep every delivery on the event loop, where
closing the sender cancels it.

Every POST is signed as Determined signs it: ``X-Determined-AI-Signature-Timestamp`` is the
Unix time of the attempt and ``X-Determined-AI-Signature`` the hex HMAC-SHA256, keyed with
the master's ``webhooks.signing_key``, of ``"<timestamp>,<body>"``; a receiver recomputes it
to know the POST came from this master and was not changed on the way.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

QUEUE_LIMIT = 1000
WORKERS = 8
PER_HOST = 2
_RECHECK = 0.05  # seconds a worker waits after putting back an event for a busy host
ATTEMPTS = 4
FIRST_BACKOFF = 0.5  # seconds; doubled after each failed attempt
ATTEMPT_TIMEOUT = 10.0
MAX_RESPONSE_LINE = 8192


@dataclass(frozen=True)
class Delivery:
    url: str
    body: dict[str, Any]
    what: str  # for the log: "webhook 3 (EXPERIMENT_STATE_CHANGE)"


class DeliveryFailed(Exception):
    pass


def signature(key: bytes, timestamp: int, payload: bytes) -> str:
    """Determined's webhook signature of ``payload`` sent at ``timestamp``."""
    return hmac.new(key, b"%d,%s" % (timestamp, payload), hashlib.sha256).hexdigest()


async def post(
    url: str,
    payload: bytes,
    *,
    timeout: float = ATTEMPT_TIMEOUT,
    signing_key: bytes | None = None,
) -> int:
    """POST ``payload`` as JSON to ``url`` (signed with ``signing_key`` when given); returns
    the response's status code."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    host_header = host if parts.port is None else f"{host}:{port}"
    if ":" in host and not host.startswith("["):
        host_header = f"[{host}]" if parts.port is None else f"[{host}]:{port}"
    signed = ""
    if signing_key is not None:
        now = int(time.time())
        signed = (
            f"X-Determined-AI-Signature-Timestamp: {now}\r\n"
            f"X-Determined-AI-Signature: {signature(signing_key, now, payload)}\r\n"
        )
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host_header}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nUser-Agent: pydet-webhooks\r\n{signed}"
        "Connection: close\r\n\r\n"
    ).encode()
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(
            host, port, ssl=ssl.create_default_context() if tls else None, limit=MAX_RESPONSE_LINE
        )
        try:
            writer.write(head + payload)
            await writer.drain()
            status_line = await reader.readline()
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass
    fields = status_line.decode("latin-1").split()
    if len(fields) < 2 or not fields[0].startswith("HTTP/") or not fields[1].isdigit():
        raise DeliveryFailed(f"not an HTTP answer: {status_line[:80]!r}")
    return int(fields[1])


class Sender:
    def __init__(
        self,
        *,
        queue_limit: int = QUEUE_LIMIT,
        attempts: int = ATTEMPTS,
        first_backoff: float = FIRST_BACKOFF,
        attempt_timeout: float = ATTEMPT_TIMEOUT,
        signing_key: bytes | None = None,
    ) -> None:
        self._signing_key = signing_key
        self._queue: asyncio.Queue[Delivery] = asyncio.Queue(queue_limit)
        self._attempts = attempts
        self._first_backoff = first_backoff
        self._attempt_timeout = attempt_timeout
        self._busy: dict[str, int] = {}
        self._dropped = 0
        self.delivered = 0
        self.failed = 0

    def send(self, delivery: Delivery) -> bool:
        """Queue a delivery; False (and a log line) when the queue is full."""
        try:
            self._queue.put_nowait(delivery)
        except asyncio.QueueFull:
            self._dropped += 1
            if self._dropped == 1 or self._dropped % 100 == 0:
                log.warning(
                    "webhook queue full (%d events waiting for slow or dead receivers): dropped"
                    " %s; %d dropped so far",
                    self._queue.maxsize,
                    delivery.what,
                    self._dropped,
                )
            return False
        return True

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for _ in range(WORKERS):
                tg.create_task(self._work())

    async def _work(self) -> None:
        while True:
            delivery = await self._queue.get()
            host = urllib.parse.urlsplit(delivery.url).netloc
            if self._busy.get(host, 0) >= PER_HOST:
                # Back of the line (there is room: it was just taken out); others go first.
                self._queue.put_nowait(delivery)
                self._queue.task_done()
                await asyncio.sleep(_RECHECK)
                continue
            self._busy[host] = self._busy.get(host, 0) + 1
            try:
                await self._deliver(delivery)
            finally:
                self._busy[host] -= 1
                if not self._busy[host]:
                    del self._busy[host]
                self._queue.task_done()

    async def _deliver(self, d: Delivery) -> None:
        payload = json.dumps(d.body, separators=(",", ":")).encode()
        pause = self._first_backoff
        problem = ""
        for attempt in range(1, self._attempts + 1):
            try:
                status = await post(
                    d.url, payload, timeout=self._attempt_timeout, signing_key=self._signing_key
                )
            except (OSError, TimeoutError, ssl.SSLError, DeliveryFailed, ValueError) as e:
                problem = str(e) or type(e).__name__
            else:
                if 200 <= status < 300:
                    self.delivered += 1
                    return
                problem = f"HTTP {status}"
            if attempt < self._attempts:
                log.info("%s to %s: %s; retrying in %.1fs", d.what, d.url, problem, pause)
                await asyncio.sleep(pause)
                pause *= 2
        self.failed += 1
        log.warning(
            "%s to %s failed %d times (%s); giving up", d.what, d.url, self._attempts, problem
        )
