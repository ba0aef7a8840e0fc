"""A real S3 server for tests: moto's standalone server as a subprocess on loopback.

Any access key is accepted; ``bucket()`` makes a fresh bucket so tests do not see each
other's objects. The process is stopped when the fixture that started it ends.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tests.cluster import free_port

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

ACCESS_KEY = "AKIATESTPYDET0000001"
SECRET_KEY = "pydet-test-secret-key-do-not-print"


class S3Server:
    def __init__(self, log_dir: pathlib.Path) -> None:
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.log_file = log_dir / "moto.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._client: S3Client | None = None

    def start(self) -> None:
        script = shutil.which("moto_server", path=os.path.dirname(sys.executable))
        argv = [script] if script else [sys.executable, "-m", "moto.server"]
        with self.log_file.open("wb") as out:
            self.proc = subprocess.Popen(
                [*argv, "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
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

    @property
    def client(self) -> S3Client:
        if self._client is None:
            import boto3

            self._client = boto3.session.Session().client(
                "s3",
                endpoint_url=self.endpoint_url,
                aws_access_key_id=ACCESS_KEY,
                aws_secret_access_key=SECRET_KEY,
                region_name="us-east-1",
            )
        return self._client

    def bucket(self) -> str:
        name = f"ckpt-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def storage(self, bucket: str, prefix: str = "runs/a", **extra: Any) -> dict[str, Any]:
        """A ``checkpoint_storage`` section for ``bucket`` on this server."""
        return {
            "type": "s3",
            "bucket": bucket,
            "prefix": prefix,
            "endpoint_url": self.endpoint_url,
            "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY,
            **extra,
        }

    def objects(self, bucket: str, prefix: str = "") -> dict[str, int]:
        """Every object's key under ``prefix``, with its size."""
        out: dict[str, int] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix
        ):
            for obj in page.get("Contents", []):
                out[obj["Key"]] = int(obj.get("Size", 0))
        return out


def s3_server(tmp_path_factory: Any) -> Iterator[S3Server]:
    """A fixture's body: a started server, stopped at teardown."""
    server = S3Server(tmp_path_factory.mktemp("moto"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
