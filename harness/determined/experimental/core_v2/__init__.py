"""Determined's ``core_v2``: ``init()`` once, then report through module-level objects.

.. code:: python

    from determined.experimental import core_v2

    core_v2.init(config=core_v2.Config(name="my-run"))
    core_v2.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
    core_v2.close()
"""

from __future__ import annotations

import determined as det
from determined import core
from determined.core import DistributedContext, PreemptMode, TensorboardMode
from determined.experimental.core_v2._core_v2 import (
    Config,
    DefaultConfig,
    UnmanagedConfig,
    close,
    init,
    init_context,
    url_reverse_webui_exp_view,
)

# Published by init(), cleared by close().
train: core.TrainContext | None = None
checkpoint: core.CheckpointContext | None = None
distributed: core.DistributedContext | None = None
preempt: core.PreemptContext | None = None
searcher: core.SearcherContext | None = None
info: det.ClusterInfo | None = None

__all__ = [
    "Config",
    "DefaultConfig",
    "DistributedContext",
    "PreemptMode",
    "TensorboardMode",
    "UnmanagedConfig",
    "checkpoint",
    "close",
    "distributed",
    "info",
    "init",
    "init_context",
    "preempt",
    "searcher",
    "train",
    "url_reverse_webui_exp_view",
]
