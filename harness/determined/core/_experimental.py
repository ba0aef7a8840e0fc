"""``core_context.experimental``: Determined's experimental Core API calls.

``report_task_using_checkpoint`` tells the master that this trial uses a checkpoint (for
inference, say): the metrics it reports are then also that checkpoint's, which the SDK's
``Checkpoint.get_metrics()`` reads.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined.core._rpc import MasterClient

log = logging.getLogger("determined.core")

# Determined's TrialSourceInfoType.INFERENCE.
INFERENCE = 1


class ExperimentalCoreContext:
    """Experimental calls of a trial on the cluster."""

    def __init__(self, client: MasterClient, trial_id: int) -> None:
        self._client = client
        self._trial_id = trial_id

    def report_task_using_checkpoint(self, checkpoint: Any) -> None:
        """Say that this trial uses ``checkpoint`` (an SDK ``Checkpoint``): the metrics it
        reports are then also the checkpoint's (``Checkpoint.get_metrics()``)."""
        self._client.report_trial_source_info(self._trial_id, str(checkpoint.uuid), INFERENCE)

    def report_task_using_model_version(self, model_version: Any) -> None:
        """Say that this trial uses a model version (its checkpoint, its model and its
        version number)."""
        self._client.report_trial_source_info(
            self._trial_id,
            str(model_version.checkpoint.uuid),
            INFERENCE,
            model_id=model_version.model_id,
            model_version=model_version.model_version,
        )


class DummyExperimentalCoreContext:
    """Off the cluster (or in a task that is not a trial): nothing to tell a master."""

    def report_task_using_checkpoint(self, checkpoint: Any) -> None:
        log.info("not a trial on a cluster: not reporting the use of checkpoint %s", checkpoint)

    def report_task_using_model_version(self, model_version: Any) -> None:
        log.info("not a trial on a cluster: not reporting the use of %s", model_version)
