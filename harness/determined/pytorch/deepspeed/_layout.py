"""Determined's checkpoint layout for a ``DeepSpeedTrial``: the files' names, and
``trial_state.pkl`` (where training is), read without unpickling anything but plain values."""

from __future__ import annotations

import pickle
from typing import Any

TRIAL_TYPE = "DeepSpeedTrial"
STATE_FILE = "trial_state.pkl"
LOAD_DATA_FILE = "load_data.json"


def rank_file(rank: int) -> str:
    """The name of worker ``rank``'s own file in a checkpoint."""
    return f"det_state_dict_rank{rank}.pth"


class _TrialState:
    """What ``trial_state.pkl`` holds: where training is."""

    def __init__(
        self,
        trial_id: int = 0,
        last_ckpt: int = 0,
        step_id: int = 0,
        last_val: int = 0,
        batches_trained: int = 0,
        epochs_trained: int = 0,
    ) -> None:
        self.trial_id = trial_id
        self.last_ckpt = last_ckpt
        self.step_id = step_id
        self.last_val = last_val
        self.batches_trained = batches_trained
        self.epochs_trained = epochs_trained


class _PlainUnpickler(pickle.Unpickler):
    """Reads ``trial_state.pkl``, which holds only a dict of numbers: nothing else loads."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"{STATE_FILE} may hold only plain values, not {module}.{name}"
        )
