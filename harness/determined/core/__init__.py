"""The Core API: plug any training loop into pydet (Determined's ``determined.core``).

.. code:: python

    import determined as det

    with det.core.init() as core_context:
        for op in core_context.searcher.operations():
            ...
            core_context.train.report_training_metrics(steps_completed=n, metrics={...})
            with core_context.checkpoint.store_path({"steps_completed": n}) as (path, uuid):
                save(model, path)
            if core_context.preempt.should_preempt():
                return
"""

from __future__ import annotations

from determined.core._checkpoint import CheckpointContext, DownloadMode, DummyCheckpointContext
from determined.core._context import Context, init
from determined.core._distributed import (
    CollectiveError,
    DistributedContext,
    DummyDistributedContext,
)
from determined.core._experimental import DummyExperimentalCoreContext, ExperimentalCoreContext
from determined.core._preempt import DummyPreemptContext, PreemptContext, PreemptMode
from determined.core._searcher import (
    DummySearcherContext,
    SearcherContext,
    SearcherMode,
    SearcherOperation,
    Unit,
)
from determined.core._tensorboard import TensorboardMode
from determined.core._train import DummyTrainContext, EarlyExitReason, ReportError, TrainContext

__all__ = [
    "CheckpointContext",
    "CollectiveError",
    "Context",
    "DistributedContext",
    "DownloadMode",
    "DummyCheckpointContext",
    "DummyDistributedContext",
    "DummyExperimentalCoreContext",
    "DummyPreemptContext",
    "DummySearcherContext",
    "DummyTrainContext",
    "EarlyExitReason",
    "ExperimentalCoreContext",
    "PreemptContext",
    "PreemptMode",
    "ReportError",
    "SearcherContext",
    "SearcherMode",
    "SearcherOperation",
    "TensorboardMode",
    "TrainContext",
    "Unit",
    "init",
]
