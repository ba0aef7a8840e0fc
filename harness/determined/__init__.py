"""The harness: what training code imports inside a pydet (Determined-compatible) task."""

from __future__ import annotations

from determined._info import ClusterInfo, TrialInfo, get_cluster_info

__version__ = "0.1.0"

# Determined's log format, so tasks' lines carry a level the master can parse.
LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"


class InvalidHP(Exception):
    """Raised by user code when a trial's hyperparameters cannot work: the trial ends as
    invalid (not failed), and the searcher may replace it."""


__all__ = ["LOG_FORMAT", "ClusterInfo", "InvalidHP", "TrialInfo", "__version__", "get_cluster_info"]
