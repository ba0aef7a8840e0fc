"""What the tasks that serve through the master's proxy share (a TensorBoard, a notebook, a
shell): where to listen, waiting until the server answers, and telling the master.

The master declares a port for such a task when it places it (``DET_PROXY_PORT``) on its
agent's address (``DET_CONTAINER_ADDRS``); it forwards ``/proxy/<task id>/`` to that
address and that port only, once the task reports it (``PostAllocationProxyAddress``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping


class NotServing(Exception):
    """The server did not come up; ``str()`` says why, for the task's log."""


def address(env: Mapping[str, str] = os.environ) -> tuple[str, int]:
    """The agent's address and the port the master declared for this task.

    Raises:
        NotServing: the master declared no port, or something else holds it.
    """
    addrs = json.loads(env.get("DET_CONTAINER_ADDRS", "[]") or "[]")
    rank = int(env.get("DET_CONTAINER_RANK", "0") or 0)
    host = str(addrs[rank]) if rank < len(addrs) else "127.0.0.1"
    port = env.get("DET_PROXY_PORT", "")
    if not port.isdigit():
        raise NotServing("the master declared no port for this task (DET_PROXY_PORT is unset)")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
        except OSError as e:
            raise NotServing(
                f"cannot listen on {host}:{port}, the port the master declared for this task: "
                f"{e.strerror or e}"
            ) from None
    return host, int(port)


def wait_until(
    ready: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float, what: str
) -> None:
    """Poll ``ready`` until it holds.

    Raises:
        NotServing: ``proc`` exited first, or ``timeout`` seconds passed.
    """
    deadline = time.monotonic() + timeout
    while not ready():
        code = proc.poll()
        if code is not None:
            raise NotServing(f"{what} exited with code {code} before it answered")
        if time.monotonic() > deadline:
            raise NotServing(f"{what} did not answer within {timeout:.0f}s")
        time.sleep(0.1)


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def report(host: str, port: int, *, user: str = "", env: Mapping[str, str] = os.environ) -> None:
    """Tell the master where this task serves (its allocation's own call)."""
    from determined.core import _rpc, _session

    session = _session.Session(env["DET_MASTER"], env["DET_SESSION_TOKEN"], name="proxied")
    client = _rpc.MasterClient(session, allocation_id=env["DET_ALLOCATION_ID"], owns_session=True)
    try:
        client.post_proxy_address(f"{host}:{port}", user=user)
    finally:
        client.close()


def fail(message: str) -> int:
    print(f"pydet: {message}", file=sys.stderr, flush=True)
    return 1
