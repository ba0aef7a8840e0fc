"""The TensorBoard task's entry (``python3 -m determined.exec.tensorboard``): serve the
named trials' TensorBoard files with the ``tensorboard`` package and tell the master where.

The master hands it, in ``DET_TENSORBOARD_SOURCES``, each trial's storage and the path
under it where the trial uploads its files (``core.TrainContext.upload_tensorboard_files``).
TensorBoard reads those directories in place (shared_fs or directory storage), through one
link per trial in its working directory, and reloads them as trials write more. It listens
on a free port of its agent's address, under the master's proxy path; once it answers, the
address is reported (``PostAllocationProxyAddress``) so that the master's
``/proxy/<task id>/`` reaches it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from types import FrameType
from typing import Any

log = logging.getLogger("determined.exec.tensorboard")

# How long TensorBoard may take to answer its first request.
READY_TIMEOUT = 120.0
RELOAD_SECONDS = 5


def link_runs(sources: list[dict[str, Any]], root: pathlib.Path) -> pathlib.Path:
    """TensorBoard's logdir: ``root`` with one link ``trial_<id>`` per trial to its directory
    in the storage (created, so TensorBoard watches it before the first upload). TensorBoard
    names the runs after the links: ``trial_<id>``, ``trial_<id>/<subdirectory>``."""
    from determined.core import _storage

    root.mkdir(parents=True, exist_ok=True)
    for source in sources:
        storage = _storage.from_config(source["storage"], what="tensorboard_storage")
        if not isinstance(storage, _storage.Storage):
            raise ValueError("tensorboard_storage: only shared_fs and directory storage")
        path = storage.base / source["path"]
        with contextlib.suppress(OSError):
            path.mkdir(parents=True, exist_ok=True)
        link = root / f"trial_{int(source['trial_id'])}"
        if not link.is_symlink():
            link.symlink_to(path, target_is_directory=True)
    return root


def _free_port(host: str) -> tuple[str, int]:
    """A free port on ``host`` (the agent's address), or on loopback if that is not ours."""
    for candidate in (host, "127.0.0.1"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((candidate, 0))
                return candidate, int(s.getsockname()[1])
        except OSError:
            continue
    raise OSError(f"no free port on {host} or 127.0.0.1")


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status < 500:
                    return True
        except urllib.error.HTTPError as e:
            if e.code < 500:
                return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    return False


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if importlib.util.find_spec("tensorboard") is None:
        print(
            f"pydet: the tensorboard package is not installed in this task's Python "
            f"({sys.executable}); install it where the agent runs tasks "
            "(pip install 'pydet[tensorboard]' or pip install tensorboard)",
            file=sys.stderr,
        )
        return 1
    env = os.environ
    sources = json.loads(env["DET_TENSORBOARD_SOURCES"])
    prefix = env["DET_PROXY_PATH"].rstrip("/")
    addrs = json.loads(env.get("DET_CONTAINER_ADDRS", "[]"))
    rank = int(env.get("DET_CONTAINER_RANK", "0"))
    host, port = _free_port(addrs[rank] if rank < len(addrs) else "127.0.0.1")
    argv = [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(link_runs(sources, pathlib.Path("logs").absolute())),
        "--host",
        host,
        "--port",
        str(port),
        "--path_prefix",
        prefix,
        "--reload_interval",
        str(RELOAD_SECONDS),
    ]
    log.info("starting TensorBoard for trials %s", [s["trial_id"] for s in sources])
    proc = subprocess.Popen(argv)

    def stop(signum: int, frame: FrameType | None) -> None:
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if not _wait_ready(f"http://{host}:{port}{prefix}/", proc):
        if proc.poll() is None:
            print(f"pydet: TensorBoard did not answer within {READY_TIMEOUT:.0f}s", file=sys.stderr)
            proc.kill()
        return proc.wait() or 1
    from determined.core import _rpc, _session

    session = _session.Session(env["DET_MASTER"], env["DET_SESSION_TOKEN"], name="tensorboard")
    client = _rpc.MasterClient(session, allocation_id=env["DET_ALLOCATION_ID"], owns_session=True)
    try:
        client.post_proxy_address(f"{host}:{port}")
    finally:
        client.close()
    log.info("TensorBoard is ready at %s/ through the master", prefix)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
