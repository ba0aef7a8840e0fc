"""The harness: what training code imports inside a pydet (Determined-compatible) task."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from determined import _invalid_hp
from determined._info import ClusterInfo, TrialInfo, get_cluster_info

if TYPE_CHECKING:
    from determined import core, errors

__version__ = "0.1.0"

# Determined's log format, so tasks' lines carry a level the master can parse.
LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"


class InvalidHP(Exception):
    """Raised by user code when a trial's hyperparameters cannot work: the trial ends as
    invalid (not failed), and the searcher may replace it."""


_invalid_hp.install(InvalidHP)

# Submodules loaded on first use (``det.core``), so that ``import determined`` stays fast.
_LAZY_SUBMODULES = ("core", "errors", "pytorch")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"determined.{name}")
    raise AttributeError(f"module 'determined' has no attribute {name!r}")


__all__ = [
    "LOG_FORMAT",
    "ClusterInfo",
    "InvalidHP",
    "TrialInfo",
    "__version__",
    "core",
    "errors",
    "get_cluster_info",
]
