"""``Checkpoint``: a checkpoint the master recorded, and how to get its files.

``download()`` reads the checkpoint straight from the cluster's checkpoint storage, as the
master recorded it (a shared directory this machine can see, or S3 with this machine's AWS
credentials), and writes ``metadata.json`` beside the files, as Determined does.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import os
import pathlib
from typing import TYPE_CHECKING, Any

from determined.common import errors

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession


class CheckpointState(enum.Enum):
    """Where a checkpoint is in its life (Determined's names and numbers)."""

    UNSPECIFIED = 0
    ACTIVE = 1
    COMPLETED = 2
    ERROR = 3
    DELETED = 4
    PARTIALLY_DELETED = 5


class DownloadMode(enum.Enum):
    """How ``Checkpoint.download`` reaches the files: ``DIRECT`` from the checkpoint storage;
    ``AUTO`` is ``DIRECT`` on pydet (the master does not proxy checkpoint files)."""

    AUTO = "auto"
    DIRECT = "direct"
    MASTER = "master"


class CheckpointSortBy(enum.Enum):
    """Fields ``list_checkpoints`` sorts by; a metric name (a string) sorts by that
    validation metric."""

    UUID = 1
    TRIAL_ID = 2
    BATCH_NUMBER = 3
    END_TIME = 4
    STATE = 5
    SEARCHER_METRIC = 6


@dataclasses.dataclass
class CheckpointTrainingMetadata:
    """What training produced the checkpoint: its experiment, trial, hyperparameters, and
    the validation at the checkpoint's step (``{"avgMetrics": {...}}``; empty without one)."""

    experiment_config: dict[str, Any]
    experiment_id: int
    trial_id: int
    hparams: dict[str, Any]
    validation_metrics: dict[str, Any]
    searcher_metric: float | None = None


class Checkpoint:
    """A checkpoint: ``uuid``, ``metadata``, ``resources`` (file to size), ``state``,
    ``report_time``, ``training``; ``download()`` its files."""

    def __init__(self, session: MasterSession, uuid: str) -> None:
        self._session = session
        self.uuid = uuid
        self.task_id: str | None = None
        self.allocation_id: str | None = None
        self.report_time: datetime.datetime | None = None
        self.resources: dict[str, int] = {}
        self.metadata: dict[str, Any] = {}
        self.state: CheckpointState = CheckpointState.UNSPECIFIED
        self.steps_completed = 0
        self.storage: dict[str, Any] = {}
        self.training: CheckpointTrainingMetadata | None = None

    def __repr__(self) -> str:
        return f"Checkpoint(uuid={self.uuid})"

    def reload(self) -> None:
        """Fetch the checkpoint's record again."""
        from determined.api.gen import v1

        resp = self._session.call(
            lambda stub: stub.get_checkpoint(v1.GetCheckpointRequest(uuid=self.uuid))
        )
        if resp.checkpoint is None:
            raise errors.NotFound(f"checkpoint {self.uuid} not found")
        self._hydrate(resp.checkpoint)

    def _hydrate(
        self, c: v1.Checkpoint, training: CheckpointTrainingMetadata | None = None
    ) -> None:
        from determined.common import checkpoint_info, structs

        self.task_id = c.task_id
        self.allocation_id = c.allocation_id or ""
        self.report_time = c.report_time
        self.resources = dict(c.resources)
        self.metadata = structs.python(c.metadata)
        name = checkpoint_info.state(c)
        self.state = (
            CheckpointState[name]
            if name in CheckpointState.__members__
            else (CheckpointState.UNSPECIFIED)
        )
        self.steps_completed = int(c.steps_completed)
        self.storage = structs.python(c.storage)
        trial_id = checkpoint_info.trial_id(c)
        if training is not None:
            self.training = training
        elif self.training is None or self.training.trial_id != trial_id:
            self.training = CheckpointTrainingMetadata(
                experiment_config={},
                experiment_id=checkpoint_info.experiment_id(c),
                trial_id=trial_id,
                hparams={},
                validation_metrics={},
                searcher_metric=checkpoint_info.searcher_metric(c),
            )

    @classmethod
    def _from_proto(
        cls,
        session: MasterSession,
        c: v1.Checkpoint,
        training: CheckpointTrainingMetadata | None = None,
    ) -> Checkpoint:
        ckpt = cls(session, c.uuid)
        ckpt._hydrate(c, training)
        return ckpt

    def get_metadata(self) -> dict[str, Any]:
        """The checkpoint's user metadata, as the master holds it now."""
        self.reload()
        return dict(self.metadata)

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the checkpoint's user metadata, key by key (nested dicts
        are replaced whole), on the master and in ``self.metadata``."""
        if not isinstance(metadata, dict):
            raise errors.InvalidArgument(f"metadata is a dict, not {type(metadata).__name__}")
        self.reload()
        self._post_metadata({**self.metadata, **metadata})

    def remove_metadata(self, keys: list[str]) -> None:
        """Remove these top-level keys from the checkpoint's user metadata."""
        self.reload()
        self._post_metadata({k: v for k, v in self.metadata.items() if k not in set(keys)})

    def _post_metadata(self, metadata: dict[str, Any]) -> None:
        from determined.api.gen import v1
        from determined.common import structs

        request = v1.PostCheckpointMetadataRequest(
            checkpoint=v1.Checkpoint(uuid=self.uuid, metadata=structs.struct(metadata))
        )
        resp = self._session.call(lambda stub: stub.post_checkpoint_metadata(request))
        if resp.checkpoint is not None:
            self._hydrate(resp.checkpoint)

    def download(
        self, path: str | os.PathLike[str] | None = None, mode: DownloadMode = DownloadMode.AUTO
    ) -> str:
        """Copy the checkpoint's files into ``path`` (default ``checkpoints/UUID``, created
        if needed) and write its ``metadata.json`` there; returns the directory.

        Raises:
            errors.FailedPrecondition: the checkpoint was deleted, or its storage cannot be
                read from this machine.
        """
        from determined.common import checkpoint_files

        if DownloadMode(mode) is DownloadMode.MASTER:
            raise errors.InvalidArgument(
                "DownloadMode.MASTER is not supported by pydet: the master does not serve "
                "checkpoint files; use DownloadMode.DIRECT or AUTO"
            )
        self.reload()
        if self.state is CheckpointState.DELETED:
            raise errors.FailedPrecondition(f"checkpoint {self.uuid} was deleted")
        # Shared with `det checkpoint download`: the same files, metadata.json and errors.
        return str(checkpoint_files.download(self.uuid, self.storage, path, metadata=self.metadata))

    def write_metadata_file(self, path: str | os.PathLike[str]) -> None:
        """Write the checkpoint's metadata as JSON to ``path``."""
        pathlib.Path(path).write_text(json.dumps(self.metadata, indent=2, sort_keys=True))

    def delete(self) -> None:
        """Delete the checkpoint's files and its record."""
        from determined.api.gen import v1

        self._session.call(
            lambda stub: stub.delete_checkpoints(v1.DeleteCheckpointsRequest(uuids=[self.uuid]))
        )


def _json_object(text: str) -> dict[str, Any]:
    if not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def _datetime(seconds: float | None) -> datetime.datetime | None:
    if not seconds:
        return None
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
