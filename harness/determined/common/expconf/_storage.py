"""Where checkpoints go and how many of them are kept."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, TypedDict

from determined.common.expconf._errors import InvalidConfig
from determined.common.expconf._mounts import PROPAGATIONS, Propagation, as_abs_path
from determined.common.expconf._reader import Problems, Section

STORAGE_TYPES = ("shared_fs", "directory", "s3", "gcs", "azure")


@dataclass(frozen=True, kw_only=True)
class _StorageBase:
    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1

    def _common_dict(self, kind: str) -> dict[str, Any]:
        return {
            "type": kind,
            "save_experiment_best": self.save_experiment_best,
            "save_trial_best": self.save_trial_best,
            "save_trial_latest": self.save_trial_latest,
        }


@dataclass(frozen=True, kw_only=True)
class SharedFSStorage(_StorageBase):
    """A host directory mounted into every task; ``storage_path`` is a subdirectory of it."""

    type: ClassVar[Literal["shared_fs"]] = "shared_fs"
    host_path: str
    storage_path: str | None = None
    propagation: Propagation = "rprivate"
    # Determined's older fields, kept as written: where the mount appears in the container.
    container_path: str | None = None
    checkpoint_path: str | None = None
    tensorboard_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            **self._common_dict(self.type),
            "host_path": self.host_path,
            "storage_path": self.storage_path,
            "propagation": self.propagation,
        }
        for key in ("container_path", "checkpoint_path", "tensorboard_path"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True, kw_only=True)
class DirectoryStorage(_StorageBase):
    """A path that is already present inside the container (e.g. from a bind mount)."""

    type: ClassVar[Literal["directory"]] = "directory"
    container_path: str

    def to_dict(self) -> dict[str, Any]:
        return {**self._common_dict(self.type), "container_path": self.container_path}


@dataclass(frozen=True, kw_only=True)
class S3Storage(_StorageBase):
    """An S3 (or S3-compatible, via ``endpoint_url``) bucket."""

    type: ClassVar[Literal["s3"]] = "s3"
    bucket: str
    prefix: str | None = None
    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._common_dict(self.type),
            "bucket": self.bucket,
            "prefix": self.prefix,
            "endpoint_url": self.endpoint_url,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
        }


@dataclass(frozen=True, kw_only=True)
class GCSStorage(_StorageBase):
    type: ClassVar[Literal["gcs"]] = "gcs"
    bucket: str
    prefix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self._common_dict(self.type), "bucket": self.bucket, "prefix": self.prefix}


@dataclass(frozen=True, kw_only=True)
class AzureStorage(_StorageBase):
    """An Azure Blob container, reached by connection string or by account URL."""

    type: ClassVar[Literal["azure"]] = "azure"
    container: str
    connection_string: str | None = None
    account_url: str | None = None
    credential: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._common_dict(self.type),
            "container": self.container,
            "connection_string": self.connection_string,
            "account_url": self.account_url,
            "credential": self.credential,
        }


CheckpointStorageConfig: TypeAlias = (
    SharedFSStorage | DirectoryStorage | S3Storage | GCSStorage | AzureStorage
)


class _Common(TypedDict):
    save_experiment_best: int
    save_trial_best: int
    save_trial_latest: int


def parse_checkpoint_storage(
    problems: Problems, path: str, value: Any
) -> CheckpointStorageConfig | None:
    """Reads the storage section; ``None`` when absent, for the master's default to fill."""
    if value is None:
        return None
    sec = Section(problems, path, value)
    kind = sec.required_choice("type", STORAGE_TYPES)
    if kind is None:
        sec.skip_rest()
        return None
    common = _Common(
        save_experiment_best=sec.integer("save_experiment_best", 0, minimum=0),
        save_trial_best=sec.integer("save_trial_best", 1, minimum=0),
        save_trial_latest=sec.integer("save_trial_latest", 1, minimum=0),
    )
    storage: CheckpointStorageConfig | None = None
    if kind == "shared_fs":
        storage = _shared_fs(sec, common)
    elif kind == "directory":
        container_path = sec.need("container_path", lambda p, v: as_abs_path(problems, p, v))
        if container_path is not None:
            storage = DirectoryStorage(container_path=container_path, **common)
    elif kind == "s3":
        bucket = sec.required_string("bucket")
        prefix = _prefix(sec)
        endpoint_url = sec.string("endpoint_url", None, non_empty=True)
        access_key = sec.string("access_key", None)
        secret_key = sec.string("secret_key", None)
        if bucket is not None:
            storage = S3Storage(
                bucket=bucket,
                prefix=prefix,
                endpoint_url=endpoint_url,
                access_key=access_key,
                secret_key=secret_key,
                **common,
            )
    elif kind == "gcs":
        bucket = sec.required_string("bucket")
        prefix = _prefix(sec)
        if bucket is not None:
            storage = GCSStorage(bucket=bucket, prefix=prefix, **common)
    else:
        storage = _azure(sec, common)
    sec.finish()
    return storage


def _prefix(sec: Section) -> str | None:
    """An object-store prefix; ``..`` would let checkpoints land beside it, so it is refused."""
    prefix = sec.string("prefix", None)
    if prefix is not None and ".." in prefix.split("/"):
        sec.problems.add(sec.at("prefix"), f"must not contain '..' as a path part, got {prefix!r}")
        return None
    return prefix


def _shared_fs(sec: Section, common: _Common) -> SharedFSStorage | None:
    host_path = sec.need("host_path", lambda p, v: as_abs_path(sec.problems, p, v))
    storage_path = sec.string("storage_path", None, non_empty=True)
    propagation = sec.choice("propagation", "rprivate", PROPAGATIONS)
    legacy = {
        key: sec.get(key, None, lambda p, v: as_abs_path(sec.problems, p, v))
        for key in ("container_path", "checkpoint_path", "tensorboard_path")
    }
    if host_path is None:
        return None
    if storage_path is not None:
        # A relative storage_path is taken under host_path; either way it must stay inside.
        target = posixpath.normpath(posixpath.join(host_path, storage_path))
        inside = posixpath.relpath(target, posixpath.normpath(host_path))
        if inside == ".." or inside.startswith("../"):
            sec.problems.add(
                sec.at("storage_path"),
                f"must be a relative directory or a subdirectory of host_path ({host_path}), "
                f"got {storage_path!r}",
            )
            return None
    return SharedFSStorage(
        host_path=host_path,
        storage_path=storage_path,
        propagation=propagation,
        container_path=legacy["container_path"],
        checkpoint_path=legacy["checkpoint_path"],
        tensorboard_path=legacy["tensorboard_path"],
        **common,
    )


def _azure(sec: Section, common: _Common) -> AzureStorage | None:
    container = sec.required_string("container")
    connection_string = sec.string("connection_string", None, non_empty=True)
    account_url = sec.string("account_url", None, non_empty=True)
    credential = sec.string("credential", None)
    if sec.has("connection_string") and sec.has("account_url"):
        sec.problems.add(sec.path, "azure takes either connection_string or account_url, not both")
        return None
    if not sec.has("connection_string") and not sec.has("account_url"):
        sec.problems.add(sec.path, "azure needs either connection_string or account_url")
        return None
    if sec.has("connection_string") and sec.has("credential"):
        sec.problems.add(
            sec.at("credential"),
            "must not be set with connection_string (the connection string carries its own)",
        )
        return None
    if container is None:
        return None
    return AzureStorage(
        container=container,
        connection_string=connection_string,
        account_url=account_url,
        credential=credential,
        **common,
    )


def check_checkpoint_storage(value: Any, path: str = "checkpoint_storage") -> None:
    """Raises ``InvalidConfig`` listing every problem of a storage section given on its own
    (a workspace's checkpoint storage); its paths start with ``path``."""
    problems = Problems()
    parse_checkpoint_storage(problems, path, value)
    if problems:
        raise InvalidConfig(problems.errors)
