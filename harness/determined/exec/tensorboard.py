"""The TensorBoard task's entry (``python3 -m determined.exec.tensorboard``): serve the
named trials' TensorBoard files with the ``tensorboard`` package and tell the master where.

The master hands it, in ``DET_TENSORBOARD_SOURCES``, each trial's storage and the path
under it where the trial uploads its files (``core.TrainContext.upload_tensorboard_files``).
TensorBoard reads those directories in place (shared_fs or directory storage), through one
link per trial in its working directory, or local copies of a trial's objects (S3) that are
fetched again every few seconds; it reloads them as trials write more. It listens
on the port the master declared for it on its agent's address, under the master's proxy path;
once it answers, the address is reported (``PostAllocationProxyAddress``) so that the master's
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
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from types import FrameType
from typing import Any

from determined.exec import _proxied

log = logging.getLogger("determined.exec.tensorboard")

# How long TensorBoard may take to answer its first request.
READY_TIMEOUT = 120.0
RELOAD_SECONDS = 5


class S3Mirror:
    """Keeps local copies of the objects under some key prefixes (trials whose TensorBoard
    storage is S3), fetching new and changed ones every few seconds on its own thread."""

    def __init__(self) -> None:
        self._prefixes: list[tuple[Any, str, pathlib.Path]] = []
        self._seen: dict[tuple[str, str], str] = {}
        self._stop = threading.Event()

    def add(self, storage: Any, key: str, local: pathlib.Path) -> None:
        self._prefixes.append((storage, key.strip("/") + "/", local))

    def sync(self) -> None:
        for storage, prefix, local in self._prefixes:
            client = storage.client()
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket=storage.bucket, Prefix=prefix
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    rel = obj["Key"][len(prefix) :]
                    parts = pathlib.PurePosixPath(rel).parts
                    if not rel or ".." in parts or rel.startswith("/"):
                        continue
                    tag = str(obj.get("ETag", "")) + str(obj.get("Size", ""))
                    if self._seen.get((obj["Key"], storage.bucket)) == tag:
                        continue
                    target = local / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_name(f".{target.name}.fetching")
                    client.download_file(storage.bucket, obj["Key"], str(tmp))
                    os.replace(tmp, target)
                    self._seen[(obj["Key"], storage.bucket)] = tag

    def run(self) -> None:
        while not self._stop.wait(RELOAD_SECONDS):
            try:
                self.sync()
            except Exception as e:  # a flaky store: say so and try again next round
                log.warning("fetching TensorBoard files from S3 failed: %s", e)

    def start(self) -> None:
        if self._prefixes:
            threading.Thread(target=self.run, name="s3-mirror", daemon=True).start()


def link_runs(sources: list[dict[str, Any]], root: pathlib.Path, mirror: S3Mirror) -> pathlib.Path:
    """TensorBoard's logdir: ``root`` with one entry ``trial_<id>`` per trial: a link to its
    directory in a filesystem storage (created, so TensorBoard watches it before the first
    upload), or a local copy of its objects in S3 that ``mirror`` keeps up to date.
    TensorBoard names the runs after them: ``trial_<id>``, ``trial_<id>/<subdirectory>``."""
    from determined.core import _storage

    root.mkdir(parents=True, exist_ok=True)
    for source in sources:
        storage = _storage.from_config(source["storage"], what="tensorboard_storage")
        entry = root / f"trial_{int(source['trial_id'])}"
        if not isinstance(storage, _storage.Storage):
            entry.mkdir(exist_ok=True)
            key = f"{storage.prefix}/{source['path']}" if storage.prefix else source["path"]
            mirror.add(storage, key, entry)
            continue
        path = storage.base / source["path"]
        with contextlib.suppress(OSError):
            path.mkdir(parents=True, exist_ok=True)
        if not entry.is_symlink():
            entry.symlink_to(path, target_is_directory=True)
    return root


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


def _unpack_context() -> bool:
    """The files it was launched with (-c/--context, -i/--include), in its working
    directory; False, having said why, when they cannot be."""
    import determined as det
    from determined.common import errors
    from determined.common.context_archive import unpack_context
    from determined.launch import rpc

    info = det.get_cluster_info()
    if info is None:
        print("pydet: no task's context to download outside a task", file=sys.stderr)
        return False
    try:
        data = rpc.fetch_task_context(info)
        unpack_context(data, os.getcwd())
    except (errors.DetError, OSError) as e:
        print(f"pydet: cannot download the TensorBoard's context: {e}", file=sys.stderr)
        return False
    log.info("unpacked the context (%d bytes packed) into %s", len(data), os.getcwd())
    return True


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
    if env.get("DET_TASK_CONTEXT") == "1" and not _unpack_context():
        return 1
    sources = json.loads(env["DET_TENSORBOARD_SOURCES"])
    prefix = env["DET_PROXY_PATH"].rstrip("/")
    try:
        host, port = _proxied.address(env)
    except _proxied.NotServing as e:
        return _proxied.fail(str(e))
    mirror = S3Mirror()
    argv = [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(link_runs(sources, pathlib.Path("logs").absolute(), mirror)),
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
    mirror.sync()  # what is there already, before TensorBoard first looks
    mirror.start()
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
    _proxied.report(host, port, env=env)
    log.info("TensorBoard is ready at %s/ through the master", prefix)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
