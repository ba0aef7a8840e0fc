"""A tiny HTTP server on loopback that records the POSTs it gets (webhook tests).

``fail_first`` answers that many POSTs with 500 before it accepts any, so that a test sees
the master retry."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Received:
    path: str
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""


@dataclass
class Receiver:
    port: int = 0
    fail_first: int = 0
    posts: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def accepted(self, path: str | None = None) -> list[Any]:
        with self.lock:
            return [
                p.body for p in self.posts if p.status == 200 and (path is None or p.path == path)
            ]

    def all(self, path: str | None = None) -> list[Received]:
        with self.lock:
            return [p for p in self.posts if path is None or p.path == path]

    def wait(self, path: str, count: int, timeout: float = 60) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.accepted(path)
            if len(found) >= count:
                return found
            time.sleep(0.1)
        raise AssertionError(
            f"{path}: {len(self.accepted(path))} of {count} POSTs; got {self.all()}"
        )


@contextmanager
def receiver(fail_first: int = 0) -> Iterator[Receiver]:
    state = Receiver(fail_first=fail_first)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(min(length, 1 << 20))
            with state.lock:
                status = 500 if state.fail_first > 0 else 200
                state.fail_first -= 1
                state.posts.append(
                    Received(self.path, status, json.loads(raw or b"null"), dict(self.headers), raw)
                )
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
