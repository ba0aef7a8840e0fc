"""moto's standalone server as a subprocess on loopback: one process serves every AWS API.

tests/s3server.py and tests/ec2server.py build on it. Any access key is accepted; these
fixed fake ones are what clients here (and processes given ``env()``) sign with.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any, TypeVar

from tests.cluster import free_port

ACCESS_KEY = "AKIATESTPYDET0000001"
SECRET_KEY = "pydet-test-secret-key-do-not-print"
REGION = "us-east-1"


class MotoServer:
    def __init__(self, log_dir: pathlib.Path) -> None:
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.log_file = log_dir / "moto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        """Starts the server and returns once it answers (or raises with its log's tail)."""
        script = shutil.which("moto_server", path=os.path.dirname(sys.executable))
        argv = [script] if script else [sys.executable, "-m", "moto.server"]
        with self.log_file.open("wb") as out:
            self.proc = subprocess.Popen(
                [*argv, "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=2):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        "moto_server did not start:\n" + self.log_file.read_text()[-3000:]
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def make_client(self, service: str) -> Any:
        """A boto3 client for ``service`` on this server."""
        import boto3

        session: Any = boto3.session.Session()  # its stubs know clients by literal names
        return session.client(
            service,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def env(self) -> dict[str, str]:
        """What another process (a master, say) needs for its boto3 to use this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
        }


Server = TypeVar("Server", bound=MotoServer)


def serve(server: Server) -> Iterator[Server]:
    """A fixture's body: ``server`` started, stopped at teardown."""
    server.start()
    try:
        yield server
    finally:
        server.stop()
