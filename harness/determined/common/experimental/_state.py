"""The lifecycle state of experiments and trials, as the SDK returns it."""

from __future__ import annotations

import enum


class ExperimentState(enum.Enum):
    """An experiment's or a trial's state (Determined's names and numbers, those of the
    master's ``v1.State``)."""

    UNSPECIFIED = 0
    ACTIVE = 1
    PAUSED = 2
    STOPPING_COMPLETED = 3
    STOPPING_CANCELED = 4
    STOPPING_ERROR = 5
    COMPLETED = 6
    CANCELED = 7
    ERROR = 8
    DELETED = 9
    DELETING = 10
    DELETE_FAILED = 11
    STOPPING_KILLED = 12
    QUEUED = 13
    PULLING = 14
    STARTING = 15
    RUNNING = 16
