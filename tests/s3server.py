"""A real S3 server for tests: moto's standalone server as a subprocess on loopback.

Any access key is accepted; ``bucket()`` makes a fresh bucket so tests do not see each
other's objects. The process is stopped when the fixture that started it ends.
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tests.motoserver import ACCESS_KEY, SECRET_KEY, MotoServer, serve

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["ACCESS_KEY", "SECRET_KEY", "S3Server", "s3_server"]


class S3Server(MotoServer):
    def __init__(self, log_dir: pathlib.Path) -> None:
        super().__init__(log_dir)
        self._client: S3Client | None = None

    @property
    def client(self) -> S3Client:
        if self._client is None:
            self._client = self.make_client("s3")
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
    yield from serve(S3Server(tmp_path_factory.mktemp("moto")))
