"""pydet's counterparts of Determined's e2e fixtures, and what the tests that use them share."""

from __future__ import annotations

import pathlib

from tests.cluster import Cluster

NO_OP = pathlib.Path(__file__).parent / "no_op"
SINGLE = NO_OP / "single-medium-train-step.yaml"
TERMINAL = ("COMPLETED", "CANCELED", "ERROR")


def only_trial(cluster: Cluster, exp_id: int) -> dict[str, object]:
    """The trial of a single-trial experiment, as ``det e list-trials --json`` shows it."""
    (trial,) = cluster.trials(exp_id)
    return trial
