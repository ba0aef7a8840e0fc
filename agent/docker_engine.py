"""Reaching the Docker engine: its address, the client's timeouts, the error for an engine
that does not answer, and one blocking request for when no event loop is left.

The runtime (``docker_runtime``) connects with ``API_TIMEOUT`` for ordinary calls and uses
``LONG_TIMEOUT`` for the calls that last as long as a container or a pull does. ``post_sync``
is for a signal handler, just before the process exits: plain ``http.client`` over the
engine's Unix socket or TCP address.
"""

from __future__ import annotations

import http.client
import os
import socket
from collections.abc import Mapping

import aiohttp

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
# Ordinary engine calls; pulls, waits and log streams have no overall deadline.
API_TIMEOUT = aiohttp.ClientTimeout(total=120, sock_connect=10)
LONG_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None)


class DockerUnavailable(Exception):
    """No Docker engine answers; the message says where it looked and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def docker_host(environ: Mapping[str, str] | None = None) -> str:
    """The engine's address: ``$DOCKER_HOST``, else the standard local socket."""
    env = os.environ if environ is None else environ
    return env.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def post_sync(url: str, path: str, timeout: float = 3.0) -> None:
    """One blocking POST to the engine, for when there is no event loop left to use."""
    conn: http.client.HTTPConnection
    if url.startswith("unix://"):
        conn = _UnixConnection(url.removeprefix("unix://"), timeout)
    else:
        host = url.split("://", 1)[-1].rstrip("/")
        conn = http.client.HTTPConnection(host, timeout=timeout)
    try:
        conn.request("POST", path)
        conn.getresponse().read()
    finally:
        conn.close()
