"""Checkpoints in an S3 bucket (AWS or any S3-compatible store, through ``endpoint_url``).

A checkpoint is the set of objects ``s3://<bucket>/<prefix>/<uuid>/<relative path>``.
Tasks write a checkpoint into a local directory and upload it; readers download it into a
local directory; the master deletes the objects when a checkpoint is deleted. Both sides
use this module, through boto3.

Credentials come from ``access_key``/``secret_key`` when the config has them, else from
boto3's usual chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile, an
instance role). Nothing here logs them or puts them in an error message.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from determined.common import errors

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("determined.core")

# What the master shows instead of a secret (master/auth/redaction.py's REDACTED): a storage
# config read back from the master carries it where the credentials were.
SHOWN_SECRET = "********"
_CREDENTIALS = ("access_key", "secret_key")
# One DeleteObjects request takes at most this many keys.
_DELETE_BATCH = 1000


class S3Storage:
    """The checkpoints under ``s3://bucket/prefix/``; ``config`` is what gets recorded."""

    def __init__(self, config: Mapping[str, Any], *, what: str = "checkpoint_storage") -> None:
        bucket = config.get("bucket")
        if not isinstance(bucket, str) or not bucket:
            raise ValueError(f"{what}: an s3 checkpoint storage needs bucket (a bucket name)")
        for key in ("prefix", "endpoint_url", *_CREDENTIALS):
            value = config.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{what}.{key}: expected a string, got {type(value).__name__}")
        self.config = dict(config)
        self.bucket = bucket
        self.prefix = str(config.get("prefix") or "").strip("/")
        self.endpoint_url: str | None = config.get("endpoint_url") or None
        # A credential shown as SHOWN_SECRET is one this caller may not see: use the chain.
        self._keys = {
            k: config[k] for k in _CREDENTIALS if config.get(k) not in (None, "", SHOWN_SECRET)
        }

    def __repr__(self) -> str:
        # Never the config: it may hold the secret key.
        return f"S3Storage({self.where!r}, endpoint_url={self.endpoint_url!r})"

    @property
    def where(self) -> str:
        """The place, for messages: ``s3://bucket/prefix``."""
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def location(self, storage_id: str) -> str:
        """Where checkpoint ``storage_id`` is, for messages."""
        return f"s3://{self.bucket}/{self._dir(storage_id)}"

    def same_place(self, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` names this bucket, prefix and endpoint (credentials aside)."""
        return (
            config.get("type") == "s3"
            and config.get("bucket") == self.bucket
            and str(config.get("prefix") or "").strip("/") == self.prefix
            and (config.get("endpoint_url") or None) == self.endpoint_url
        )

    # The operations of a checkpoint storage (determined.core._storage.Backend).

    def stage(self, storage_id: str, *, rank: int | None = None) -> pathlib.Path:
        """A fresh local directory to write checkpoint ``storage_id`` (or a rank's part) into."""
        self._dir(storage_id)
        part = "" if rank is None else f"-rank{rank}"
        return pathlib.Path(tempfile.mkdtemp(prefix=f"det-ckpt-{storage_id}{part}-"))

    def release(self, storage_id: str, staged: pathlib.Path) -> None:
        """Remove a directory from ``stage`` (or a download) once it is no longer needed."""
        shutil.rmtree(staged, ignore_errors=True)

    def put(
        self,
        storage_id: str,
        src: pathlib.Path | None,
        files: Iterable[str],
        extras: Mapping[str, bytes],
        *,
        move: bool = False,
    ) -> None:
        """Upload ``files`` (relative paths under ``src``) and ``extras`` (name → content)."""
        client = self.client()
        try:
            for rel in sorted(files):
                assert src is not None
                client.upload_file(str(src / rel), self.bucket, self._key(storage_id, rel))
            for rel, data in extras.items():
                client.put_object(Bucket=self.bucket, Key=self._key(storage_id, rel), Body=data)
        except Exception as e:
            raise failure(f"uploading checkpoint {storage_id} to {self.where}", e) from e

    def local_dir(self, storage_id: str) -> pathlib.Path | None:
        """None: objects are read by downloading them (``fetch``)."""
        return None

    def fetch(
        self,
        storage_id: str,
        dst: pathlib.Path,
        *,
        selector: Callable[[str], bool] | None = None,
    ) -> None:
        """Download checkpoint ``storage_id`` into ``dst`` (created); ``selector`` picks files."""
        objects = self.files(storage_id)
        if not objects:
            raise errors.NotFound(f"checkpoint {storage_id} has no files at {self.where}")
        client = self.client()
        dst.mkdir(parents=True, exist_ok=True)
        root = dst.resolve()
        try:
            for rel in sorted(objects):
                if selector is not None and not selector(rel):
                    continue
                target = dst / rel
                if not target.resolve().is_relative_to(root):
                    raise errors.FailedPrecondition(
                        f"checkpoint {storage_id} has an object outside its directory: {rel!r}"
                    )
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(self.bucket, self._key(storage_id, rel), str(target))
        except errors.DetError:
            raise
        except Exception as e:
            raise failure(f"downloading checkpoint {storage_id} from {self.where}", e) from e

    def read(self, storage_id: str, rel: str) -> bytes | None:
        """The content of one file of checkpoint ``storage_id``; None if it has none."""
        client = self.client()
        try:
            return client.get_object(Bucket=self.bucket, Key=self._key(storage_id, rel))[
                "Body"
            ].read()
        except Exception as e:
            if _code(e) in ("NoSuchKey", "404"):
                return None
            raise failure(f"reading {rel} of checkpoint {storage_id} from {self.where}", e) from e

    def exists(self, storage_id: str) -> bool:
        """Whether checkpoint ``storage_id`` has any object."""
        return any(True for _ in self._objects(storage_id, limit=1))

    def files(self, storage_id: str) -> dict[str, int]:
        """Every object of checkpoint ``storage_id``: its relative path and its size."""
        return dict(self._objects(storage_id))

    def remove(self, storage_id: str) -> int:
        """Delete every object of checkpoint ``storage_id``; how many there were."""
        keys = [self._key(storage_id, rel) for rel in self.files(storage_id)]
        return self._delete(keys, f"checkpoint {storage_id}")

    def remove_files(self, storage_id: str, rels: Iterable[str]) -> int:
        """Delete these files (relative paths) of checkpoint ``storage_id``; how many."""
        keys = [self._key(storage_id, rel) for rel in rels]
        return self._delete(keys, f"files of checkpoint {storage_id}")

    def remove_tree(self, key_prefix: str) -> int:
        """Delete every object whose key starts with ``key_prefix/`` (under this storage's
        prefix), e.g. an experiment's TensorBoard files; how many there were."""
        start = "/".join(p for p in (self.prefix, key_prefix.strip("/")) if p) + "/"
        client = self.client()
        try:
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start
            )
            keys = [obj["Key"] for page in pages for obj in page.get("Contents", [])]
        except Exception as e:
            raise failure(f"listing {start} in s3://{self.bucket}", e) from e
        return self._delete(keys, start)

    def _delete(self, keys: list[str], what: str) -> int:
        client = self.client()
        try:
            for i in range(0, len(keys), _DELETE_BATCH):
                batch = keys[i : i + _DELETE_BATCH]
                out = client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
                refused = out.get("Errors") or []
                if refused:
                    first = refused[0]
                    raise errors.FailedPrecondition(
                        f"deleting {what} from {self.where}: {len(refused)} "
                        f"object(s) were not deleted ({first.get('Key')}: "
                        f"{first.get('Code')} {first.get('Message')})"
                    )
        except errors.DetError:
            raise
        except Exception as e:
            raise failure(f"deleting {what} from {self.where}", e) from e
        return len(keys)

    # The client and the keys.

    def client(self) -> S3Client:
        """A boto3 S3 client for this storage (shared; boto3 clients are thread-safe)."""
        return _make_client(self.endpoint_url, self._keys)

    def _dir(self, storage_id: str) -> str:
        if (
            not isinstance(storage_id, str)
            or not storage_id
            or storage_id in (".", "..")
            or "/" in storage_id
            or "\\" in storage_id
        ):
            raise ValueError(f"{storage_id!r} is not a checkpoint id (a UUID string)")
        return f"{self.prefix}/{storage_id}" if self.prefix else storage_id

    def _key(self, storage_id: str, rel: str) -> str:
        return f"{self._dir(storage_id)}/{rel}"

    def _objects(self, storage_id: str, limit: int | None = None) -> Iterator[tuple[str, int]]:
        start = self._dir(storage_id) + "/"
        client = self.client()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": start}
        if limit is not None:
            kwargs["PaginationConfig"] = {"MaxItems": limit}
        try:
            for page in client.get_paginator("list_objects_v2").paginate(**kwargs):
                for obj in page.get("Contents", []):
                    yield obj["Key"][len(start) :], int(obj.get("Size", 0))
        except Exception as e:
            raise failure(f"listing checkpoint {storage_id} in {self.where}", e) from e


# Building a client takes most of a second: one per endpoint and set of credentials (and,
# where the credentials come from the environment, per environment).
_clients: dict[tuple[str | None, ...], S3Client] = {}
_clients_lock = threading.Lock()
_ENVIRONMENT = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def _make_client(endpoint_url: str | None, keys: Mapping[str, str]) -> S3Client:
    key = (
        endpoint_url,
        *(keys.get(k) for k in _CREDENTIALS),
        *(os.environ.get(name) for name in _ENVIRONMENT),
    )
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = _new_client(endpoint_url, keys)
        return client


def _new_client(endpoint_url: str | None, keys: Mapping[str, str]) -> S3Client:
    # boto3 takes a second to import and to build a client: only storage users pay for it.
    import boto3
    import botocore.config

    config = botocore.config.Config(
        connect_timeout=10,
        read_timeout=60,
        retries={"max_attempts": 5, "mode": "standard"},
        # S3-compatible stores (MinIO, Ceph, moto) are addressed by path, not by host name.
        s3={"addressing_style": "path"} if endpoint_url else {},
    )
    session = boto3.session.Session()
    return session.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=keys.get("access_key"),
        aws_secret_access_key=keys.get("secret_key"),
        config=config,
    )


def _code(e: BaseException) -> str:
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def failure(action: str, e: BaseException) -> errors.DetError:
    """A boto3 failure as one of our errors, with a message that says what to check."""
    name = type(e).__name__
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return errors.FailedPrecondition(
            f"{action}: no S3 credentials; set checkpoint_storage.access_key and secret_key, "
            "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
        )
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError"):
        return errors.Unavailable(f"{action}: the S3 endpoint cannot be reached ({e})")
    code = _code(e)
    if code in ("NoSuchBucket",):
        return errors.NotFound(f"{action}: the bucket does not exist")
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
        return errors.PermissionDenied(f"{action}: the S3 credentials were refused ({code})")
    return errors.FailedPrecondition(f"{action}: {name}: {e}")
