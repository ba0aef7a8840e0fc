"""Determined's experimental APIs: ``client`` (the Python SDK) and ``core_v2``.

``from determined.experimental import client`` is the usual import; the SDK's classes are
also here by name (``from determined.experimental import Determined``), and so are its
modules ``checkpoint``, ``metrics`` and ``model``, as in Determined. They load on first
use, so ``import determined`` stays light for code inside tasks.
"""

from __future__ import annotations

import importlib
from typing import Any

_CLIENT = "determined.experimental.client"

# Names Determined's determined.experimental offers, and the module that holds each.
_LAZY = {
    **{
        name: _CLIENT
        for name in (
            "Checkpoint",
            "Determined",
            "Experiment",
            "ExperimentReference",
            "Model",
            "ModelOrderBy",
            "ModelSortBy",
            "ModelVersion",
            "OrderBy",
            "Project",
            "Trial",
            "TrialOrderBy",
            "TrialReference",
            "TrialSortBy",
            "Workspace",
        )
    },
    "checkpoint": "determined.common.experimental.checkpoint",
    "metrics": "determined.common.experimental.metrics",
    "model": "determined.common.experimental.model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'determined.experimental' has no attribute {name!r}")
    if module == _CLIENT or name not in ("checkpoint", "metrics", "model"):
        return getattr(importlib.import_module(module), name)
    return importlib.import_module(module)
