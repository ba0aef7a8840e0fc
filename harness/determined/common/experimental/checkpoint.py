"""``Checkpoint``: a checkpoint the master recorded, how to get its files, and its metadata.

``download()`` reads the checkpoint straight from the cluster's checkpoint storage, as the
master recorded it (a shared directory this machine can see, or S3 with this machine's AWS
credentials), or through the master when this machine cannot (``DownloadMode``), and
writes ``metadata.json`` beside the files, as Determined does.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
import pathlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from determined.common import errors
from determined.common.experimental import _util
from determined.common.experimental._util import DeprecatedEnum, InvalidValue
from determined.common.experimental.metrics import TrialMetrics

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession

_log = logging.getLogger("determined.client")


class DownloadMode(enum.Enum):
    """How ``Checkpoint.download`` reaches the files: ``DIRECT`` from the checkpoint
    storage, ``MASTER`` through the master, ``AUTO`` directly and, if that cannot be done
    from this machine, through the master."""

    DIRECT = "direct"
    MASTER = "master"
    AUTO = "auto"

    def __str__(self) -> str:
        return self.value


class ModelFramework(enum.Enum):
    PYTORCH = 1
    TENSORFLOW = 2


class CheckpointState(enum.Enum):
    """Where a checkpoint is in its life (Determined's names and values)."""

    ACTIVE = "STATE_ACTIVE"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    PARTIALLY_DELETED = "STATE_PARTIALLY_DELETED"


class CheckpointOrderBy(DeprecatedEnum):
    """Deprecated: ``OrderBy``."""

    ASC = "ORDER_BY_ASC"
    DESC = "ORDER_BY_DESC"


class CheckpointSortBy(enum.Enum):
    """Fields ``list_checkpoints`` sorts by; a metric name (a string) sorts by that
    validation metric."""

    UUID = "SORT_BY_UUID"
    TRIAL_ID = "SORT_BY_TRIAL_ID"
    BATCH_NUMBER = "SORT_BY_BATCH_NUMBER"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    SEARCHER_METRIC = "SORT_BY_SEARCHER_METRIC"


@dataclasses.dataclass
class CheckpointTrainingMetadata:
    """What training made the checkpoint: its experiment (and config), trial and
    hyperparameters, and the validation reported at the checkpoint's step
    (``{"avgMetrics": {...}}``; empty without one). ``searcher_metric`` is that
    validation's value of the searcher's metric (pydet's)."""

    experiment_config: dict[str, Any]
    experiment_id: int
    trial_id: int
    hparams: dict[str, Any]
    validation_metrics: dict[str, Any]
    searcher_metric: float | None = None


class Checkpoint:
    """A checkpoint: ``uuid``, ``task_id``, ``allocation_id``, ``report_time`` (RFC 3339),
    ``resources`` (file to size), ``metadata`` (its user metadata), ``state`` and
    ``training``; also ``steps_completed`` and ``storage`` (where its files are).

    Get one from ``client.get_checkpoint`` or the ``list_checkpoints`` of an experiment
    or trial. The attributes are as last read; ``reload()`` reads them again.
    """

    def __init__(self, session: MasterSession, uuid: str) -> None:
        self._session = session
        self.uuid = uuid
        self.task_id: str | None = None
        self.allocation_id: str | None = None
        self.report_time: str | None = None
        self.resources: dict[str, Any] | None = None
        self.metadata: dict[str, Any] | None = None
        self.state: CheckpointState | None = None
        self.training: CheckpointTrainingMetadata | None = None
        self.steps_completed = 0
        self.storage: dict[str, Any] = {}

    def __repr__(self) -> str:
        if self.training is not None:
            return (
                f"Checkpoint(uuid={self.uuid}, task_id={self.task_id},"
                f" trial_id={self.training.trial_id})"
            )
        return f"Checkpoint(uuid={self.uuid}, task_id={self.task_id})"

    def reload(self) -> None:
        """Read the checkpoint's record again.

        Raises:
            errors.NotFoundException: there is no checkpoint with this UUID.
        """
        from determined.common.experimental import _ranking

        found = _ranking.one(self._session, self.uuid)
        self._hydrate(found, _ranking.training_of(self._session, found))

    def _hydrate(self, c: v1.Checkpoint, training: CheckpointTrainingMetadata | None) -> None:
        from determined.common import checkpoint_info, structs

        self.task_id = c.task_id
        self.allocation_id = c.allocation_id
        self.report_time = _util.rfc3339(c.report_time)
        self.resources = dict(c.resources)
        self.metadata = structs.python(c.metadata)
        self.state = CheckpointState.__members__.get(checkpoint_info.state(c))
        self.steps_completed = int(c.steps_completed)
        self.storage = structs.python(c.storage)
        self.training = training

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

    # Files.

    def download(
        self, path: str | os.PathLike[str] | None = None, mode: DownloadMode = DownloadMode.AUTO
    ) -> str:
        """Copy the checkpoint's files into ``path`` (default ``checkpoints/UUID``) and write
        its ``metadata.json`` there; returns the directory. A directory that already holds a
        ``metadata.json`` is taken to hold the checkpoint and is left as it is.

        Raises:
            determined.errors.CheckpointStateException: the checkpoint is not COMPLETED or
                PARTIALLY_DELETED.
            errors.FailedPrecondition: (DIRECT) its storage cannot be read from this machine.
            determined.errors.ProxiedDownloadFailed: (MASTER) the master could not send it.
            determined.errors.MultipleDownloadsFailed: (AUTO) neither way worked.
        """
        from determined import errors as det_errors

        if self.state not in (CheckpointState.COMPLETED, CheckpointState.PARTIALLY_DELETED):
            if self.state is None:
                raise ValueError(
                    "Checkpoint state is unknown. Please call Checkpoint.reload to refresh."
                )
            raise det_errors.CheckpointStateException(
                "Only COMPLETED or PARTIALLY_DELETED checkpoints can be downloaded. "
                f"Checkpoint state: {self.state.value}"
            )
        mode = DownloadMode(mode)
        target = pathlib.Path(path) if path is not None else pathlib.Path("checkpoints", self.uuid)
        if not any((target / name).exists() for name in ("metadata.json", "MLmodel")):
            if mode is DownloadMode.DIRECT:
                self._download_direct(target)
            elif mode is DownloadMode.MASTER:
                self._download_via_master(target)
            else:
                self._download_auto(target)
        if not (target / "metadata.json").exists():
            self.write_metadata_file(target / "metadata.json")
        return str(target)

    def _download_direct(self, target: pathlib.Path) -> None:
        from determined.common import checkpoint_files

        # Shared with `det checkpoint download`: the same files and errors.
        checkpoint_files.download(self.uuid, self.storage, target, metadata=self.metadata)

    def _download_auto(self, target: pathlib.Path) -> None:
        from determined import errors as det_errors

        try:
            self._download_direct(target)
            return
        except errors.DetError as direct:
            if self.storage.get("type") == "azure":
                raise
            _log.info(f"Unable to download directly ({direct}), proxying download through master")
        try:
            self._download_via_master(target)
        except Exception as e:
            raise det_errors.MultipleDownloadsFailed(
                "Auto checkpoint download mode was enabled. Attempted direct download and "
                f"proxied download through master but they both failed: {e}"
            ) from e

    def _download_via_master(self, target: pathlib.Path) -> None:
        """The files as the master reads them from storage (a gzip'd tar)."""
        import tarfile

        from determined import errors as det_errors

        path = f"/checkpoints/{self.uuid}"
        try:
            with self._session.http_get(path, accept="application/gzip") as resp:
                target.mkdir(parents=True, exist_ok=True)
                with tarfile.open(fileobj=resp, mode="r|gz") as archive:
                    archive.extractall(target, filter="data")
        except errors.DetError as e:
            raise det_errors.ProxiedDownloadFailed(
                f"unable to download checkpoint {self.uuid} from the master: {e}"
            ) from e

    def write_metadata_file(self, path: str | os.PathLike[str]) -> None:
        """Write the checkpoint's metadata as JSON to ``path`` (``download()`` does)."""
        with open(path, "w") as f:
            json.dump(self.metadata, f, indent=2)

    def remove_files(self, globs: list[str]) -> None:
        """Remove the checkpoint's files that match any of ``globs`` from its storage
        (``*`` within a directory, ``**`` across them; a glob naming a directory takes its
        files). The checkpoint is then PARTIALLY_DELETED, or DELETED if no file is left;
        with no globs, its record of files is read again from storage."""
        from determined.api.gen import v1

        if isinstance(globs, str) or not isinstance(globs, Iterable):
            raise InvalidValue(f"globs is a list of glob strings, not {globs!r}")
        request = v1.CheckpointsRemoveFilesRequest(
            checkpoint_uuids=[self.uuid], checkpoint_globs=list(globs)
        )
        self._session.call(lambda stub: stub.checkpoints_remove_files(request))
        what = "Partial deletion" if globs else "Refresh"
        _log.info(f"{what} of checkpoint {self.uuid} is in progress.")

    def delete(self) -> None:
        """Delete the checkpoint's files from storage; its record stays, DELETED."""
        from determined.api.gen import v1

        request = v1.DeleteCheckpointsRequest(uuids=[self.uuid])
        self._session.call(lambda stub: stub.delete_checkpoints(request))
        _log.info(f"Deletion of checkpoint {self.uuid} is in progress.")

    # Metadata.

    def get_metadata(self) -> dict[str, Any]:
        """The checkpoint's user metadata, as the master holds it now (pydet's)."""
        self.metadata = self._current_metadata()
        return dict(self.metadata)

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the checkpoint's user metadata, key by key (nested dicts
        are replaced whole), on the master and in ``self.metadata``. The files' own
        ``metadata.json`` is not changed."""
        if not isinstance(metadata, dict):
            raise InvalidValue(f"metadata is a dict, not {type(metadata).__name__}")
        current = self._current_metadata()
        self._post_metadata({**current, **metadata})

    def remove_metadata(self, keys: list[str]) -> None:
        """Remove these top-level keys from the checkpoint's user metadata."""
        current = self._current_metadata()
        self._post_metadata({k: v for k, v in current.items() if k not in set(keys)})

    def _current_metadata(self) -> dict[str, Any]:
        from determined.api.gen import v1
        from determined.common import structs

        # Read now, so that keys set elsewhere since this object was made are kept.
        request = v1.GetCheckpointRequest(uuid=self.uuid)
        found = self._session.call(lambda stub: stub.get_checkpoint(request)).checkpoint
        return structs.python(found.metadata) if found is not None else {}

    def _post_metadata(self, metadata: dict[str, Any]) -> None:
        from determined.api.gen import v1
        from determined.common import structs

        request = v1.PostCheckpointMetadataRequest(
            checkpoint=v1.Checkpoint(uuid=self.uuid, metadata=structs.struct(metadata))
        )
        resp = self._session.call(lambda stub: stub.post_checkpoint_metadata(request))
        if resp.checkpoint is not None:
            self._hydrate(resp.checkpoint, self.training)

    # Metrics and integrations.

    def get_metrics(self, group: str | None = None) -> Iterator[TrialMetrics]:
        """The metrics reported by the trials that used this checkpoint (they called
        ``core_context.experimental.report_task_using_checkpoint``), of ``group`` or of
        every group, trial by trial in step order."""
        from determined.api.gen import v1

        request = v1.GetTrialMetricsByCheckpointRequest(
            checkpoint_uuid=self.uuid,
            trial_source_info_type=v1.TrialSourceInfoType.INFERENCE,
            metric_group=group or "",
        )
        resp = self._session.call(lambda stub: stub.get_trial_metrics_by_checkpoint(request))
        for report in resp.metrics:
            yield TrialMetrics._from_proto(report)

    def get_pachyderm_commit(self) -> str:
        """The Pachyderm commit of the experiment's ``integrations.pachyderm`` config.

        Raises:
            ValueError: the experiment has no such config.
        """
        if self.training is None:
            self.reload()
        training = self.training
        try:
            assert training is not None
            return str(training.experiment_config["integrations"]["pachyderm"]["dataset"]["commit"])
        except (AssertionError, KeyError, TypeError):
            experiment = training.experiment_id if training is not None else None
            raise ValueError(
                f"Pachyderm configuration not found for checkpoint {self.uuid}, "
                f"experiment {experiment}"
            ) from None
