"""The RPCs the Core API makes, in one place: protos at the wire, plain values inside.

Everything here needs a master, so this module is loaded only on-cluster. Its messages are
``determined.api.lite``'s (the generated ``v1`` messages' light twins, which a task imports in
milliseconds instead of a few hundred).

Metric reports are the one hot path: a batch goes out as one ``ReportTrialMetricsRequest``;
bench/core_api.py measures the whole path.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from determined.api import lite as v1
from determined.common import errors
from determined.core._session import Session
from determined.core._storage import CheckpointRecord
from determined.core._train import MetricRecord

log = logging.getLogger(__name__)

# The master answers a long poll after at most timeout_seconds; allow it this much more.
LONG_POLL_GRACE = 30.0


# A MetricRecord holds a MetricReport's first fields in the report's order, so a record is
# the report's positional arguments (half the cost of keywords, on the hot path). Checked
# here: a reordered proto fails at import, not silently on the wire.
_REPORT_FIELDS = tuple(f.name for f in v1.MetricReport._fields)
if _REPORT_FIELDS[: len(MetricRecord._fields)] != MetricRecord._fields:
    raise ImportError(
        f"MetricRecord's fields {MetricRecord._fields} are no longer the first fields of "
        f"v1.MetricReport {_REPORT_FIELDS}: reorder determined/core/_train.py's MetricRecord"
    )


def metrics_request(trial_id: int, run_id: int, records: Sequence[MetricRecord]) -> v1.Message:
    """The request that carries ``records`` for one run of a trial."""
    report = v1.MetricReport
    return v1.ReportTrialMetricsRequest(
        trial_id=trial_id, run_id=run_id, reports=[report(*r) for r in records]
    )


@dataclasses.dataclass(frozen=True)
class NextOp:
    """The searcher's next op for a trial: its length, or None when it has no more work."""

    length: int | None


def _op_length(resp: Any) -> int | None:
    """A GetCurrentSearcherOperationResponse's op length (None: the searcher is done)."""
    if resp.completed or resp.op is None:
        return None
    return int(resp.op.length)


class MasterClient:
    """The master, as the Core API of one allocation sees it."""

    def __init__(self, session: Session, *, allocation_id: str, owns_session: bool) -> None:
        self.session = session
        self.allocation_id = allocation_id
        self._owns_session = owns_session

    def close(self) -> None:
        if self._owns_session:
            self.session.close()

    # Collectives and preemption.

    def all_gather(
        self, *, group: str, seq: int, rank: int, size: int, data: bytes, timeout: float
    ) -> list[bytes]:
        request = v1.AllGatherRequest(
            allocation_id=self.allocation_id,
            group=group,
            seq=seq,
            rank=rank,
            size=size,
            data=data,
            timeout_seconds=timeout,
            request_id=os.urandom(16).hex(),  # not uuid: its import is ~7 ms of a start
        )

        async def call() -> list[bytes]:
            resp = await self.session.call(
                f"all-gather {group}#{seq}",
                lambda: self.session.stub.allocation_all_gather(
                    request, timeout=timeout + LONG_POLL_GRACE
                ),
            )
            return list(resp.data)

        return self.session.run(call())

    async def poll_preemption(self, timeout_seconds: float) -> bool:
        """One long poll: True once the allocation is asked to stop (on the session loop)."""
        request = v1.PreemptionSignalRequest(
            allocation_id=self.allocation_id, timeout_seconds=timeout_seconds
        )
        resp = await self.session.call(
            "preemption signal",
            lambda: self.session.stub.allocation_preemption_signal(
                request, timeout=timeout_seconds + LONG_POLL_GRACE
            ),
        )
        return bool(resp.preempt)

    def ack_preemption(self) -> None:
        request = v1.AckPreemptionSignalRequest(allocation_id=self.allocation_id)
        self._run(
            "acknowledge preemption",
            lambda: self.session.blocking_stub.ack_allocation_preemption_signal(request),
        )

    # Trials.

    async def report_metrics(
        self, trial_id: int, run_id: int, records: Sequence[MetricRecord]
    ) -> None:
        """Ship one batch (on the session loop)."""
        request = metrics_request(trial_id, run_id, records)

        async def send() -> None:
            await self.session.stub.report_trial_metrics(request, timeout=120.0)

        await self.session.call(f"report {len(records)} metric reports", send)

    async def report_progress(self, trial_id: int, progress: float) -> None:
        request = v1.ReportTrialProgressRequest(trial_id=trial_id, progress=progress)
        await self.session.call(
            "report progress", lambda: self.session.stub.report_trial_progress(request)
        )

    def report_early_exit(self, trial_id: int, reason: str) -> None:
        request = v1.ReportTrialEarlyExitRequest(trial_id=trial_id, reason=reason)
        self._run(
            "report early exit", lambda: self.session.blocking_stub.report_trial_early_exit(request)
        )

    def set_trial_metadata(self, trial_id: int, metadata: dict[str, Any]) -> dict[str, Any]:
        request = v1.PostRunMetadataRequest(run_id=trial_id, metadata=json.dumps(metadata))
        resp = self._run(
            "set the trial's metadata",
            lambda: self.session.blocking_stub.post_run_metadata(request),
        )
        return _json_object(resp.metadata)

    def get_trial_metadata(self, trial_id: int) -> dict[str, Any]:
        request = v1.GetRunMetadataRequest(run_id=trial_id)
        resp = self._run(
            "get the trial's metadata", lambda: self.session.blocking_stub.get_run_metadata(request)
        )
        return _json_object(resp.metadata)

    def get_best_validation(self, experiment_id: int) -> float | None:
        request = v1.GetBestValidationRequest(experiment_id=experiment_id)
        try:
            resp = self._run(
                "get best validation",
                lambda: self.session.blocking_stub.get_best_validation(request),
            )
        except errors.NotFound:
            return None
        return None if resp.metric is None else float(resp.metric)

    def get_searcher_op(self, trial_id: int) -> int | None:
        """The current op's length, or None once the searcher has no more work for the trial."""
        request = v1.GetCurrentSearcherOperationRequest(trial_id=trial_id)
        resp = self._run(
            "get searcher operation",
            lambda: self.session.blocking_stub.get_current_searcher_operation(request),
        )
        return _op_length(resp)

    def complete_searcher_op(self, trial_id: int, length: int, metric: float) -> NextOp | None:
        """Complete the op; returns the master's answer for the next one (None from a master
        that does not give it: ask with get_searcher_op)."""
        request = v1.CompleteSearcherOperationRequest(
            trial_id=trial_id, length=length, searcher_metric=metric
        )
        resp = self._run(
            "complete searcher operation",
            lambda: self.session.blocking_stub.complete_searcher_operation(request),
        )
        return None if resp.next is None else NextOp(_op_length(resp.next))

    # Checkpoints.

    def report_checkpoint(self, record: CheckpointRecord) -> None:
        ckpt = v1.Checkpoint(
            uuid=record.uuid,
            training=v1.CheckpointTrainingMetadata(
                trial_id=record.trial_id, experiment_id=record.experiment_id
            ),
            allocation_id=record.allocation_id,
            task_id=record.task_id,
            steps_completed=record.steps_completed,
            metadata=v1.struct_of(json.loads(record.metadata_json or "{}")),
            resources=dict(record.resources),
            size=sum(record.resources.values()),
            state=v1.enum_value("CheckpointState", record.state),
            report_time=v1.timestamp(record.report_time),
            storage=v1.struct_of(record.storage),
        )
        request = v1.ReportCheckpointRequest(checkpoint=ckpt)
        self._run(
            f"report checkpoint {record.uuid}",
            lambda: self.session.blocking_stub.report_checkpoint(request),
        )

    def get_checkpoint(self, uuid: str) -> CheckpointRecord | None:
        """The master's record of checkpoint ``uuid``, or None if it does not know it."""
        request = v1.GetCheckpointRequest(uuid=uuid)
        try:
            resp = self._run(
                f"get checkpoint {uuid}", lambda: self.session.blocking_stub.get_checkpoint(request)
            )
        except errors.NotFound:
            return None
        ckpt = resp.checkpoint
        if ckpt is None:
            return None
        training = ckpt.training
        return CheckpointRecord(
            uuid=ckpt.uuid,
            trial_id=(training.trial_id or 0) if training is not None else 0,
            experiment_id=(training.experiment_id or 0) if training is not None else 0,
            allocation_id=ckpt.allocation_id or "",
            task_id=ckpt.task_id,
            steps_completed=ckpt.steps_completed,
            metadata_json=json.dumps(v1.plain(ckpt.metadata)),
            resources=dict(ckpt.resources),
            state=v1.enum_name("CheckpointState", ckpt.state),
            report_time=v1.seconds(ckpt.report_time),
            storage=v1.plain(ckpt.storage),
        )

    def delete_checkpoints(self, uuids: list[str]) -> None:
        request = v1.DeleteCheckpointsRequest(uuids=uuids)
        self._run(
            "delete checkpoints", lambda: self.session.blocking_stub.delete_checkpoints(request)
        )

    def report_trial_source_info(
        self,
        trial_id: int,
        uuid: str,
        kind: int,
        *,
        model_id: int | None = None,
        model_version: int | None = None,
    ) -> None:
        info = v1.TrialSourceInfo(
            trial_id=trial_id,
            checkpoint_uuid=uuid,
            trial_source_info_type=kind,
            model_id=model_id,
            model_version=model_version,
        )
        request = v1.ReportTrialSourceInfoRequest(trial_source_info=info)
        self._run(
            f"report the use of checkpoint {uuid}",
            lambda: self.session.blocking_stub.report_trial_source_info(request),
        )

    def post_alert(self, trial_id: int, *, title: str, description: str, level: str) -> None:
        request = v1.PostWebhookEventDataRequest(
            trial_id=trial_id,
            data=v1.CustomWebhookEventData(title=title, description=description, level=level),
        )
        self._run(
            "send an alert", lambda: self.session.blocking_stub.post_webhook_event_data(request)
        )

    def post_proxy_address(self, address: str, *, user: str = "") -> None:
        """Tell the master where this task serves (``host:port``), and as which user."""
        request = v1.PostAllocationProxyAddressRequest(
            allocation_id=self.allocation_id, proxy_address=address, user=user
        )
        self._run(
            "report the proxy address",
            lambda: self.session.blocking_stub.post_allocation_proxy_address(request),
        )

    def _run(self, what: str, rpc: Any) -> Any:
        return self.session.call_blocking(what, rpc)


def _json_object(text: str) -> dict[str, Any]:
    if not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}
