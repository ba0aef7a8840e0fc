"""Determined's experimental APIs: ``client`` (the Python SDK) and ``core_v2``.

``from determined.experimental import client`` is the usual import; the SDK's classes are
also here by name (``from determined.experimental import Determined``), as in Determined.
They load on first use, so ``import determined`` stays light for code inside tasks.
"""

from __future__ import annotations

import importlib
from typing import Any

# Names Determined's determined.experimental offers, and the module that holds each.
_LAZY = {
    "Determined": "determined.experimental.client",
    "Checkpoint": "determined.experimental.client",
    "Experiment": "determined.experimental.client",
    "ExperimentReference": "determined.experimental.client",
    "Trial": "determined.experimental.client",
    "TrialReference": "determined.experimental.client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'determined.experimental' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
