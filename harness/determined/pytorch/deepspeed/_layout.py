"""Determined's checkpoint layout for a ``DeepSpeedTrial``: the files' names, and
``trial_state.pkl`` (where training is), read without unpickling anything but plain values."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

TRIAL_TYPE = "DeepSpeedTrial"
STATE_FILE = "trial_state.pkl"
LOAD_DATA_FILE = "load_data.json"


def rank_file(rank: int) -> str:
    """The name of worker ``rank``'s own file in a checkpoint."""
    return f"det_state_dict_rank{rank}.pth"


@dataclass
class _TrialState:
    """What ``trial_state.pkl`` holds: where training is."""

    trial_id: int = 0
    last_ckpt: int = 0
    step_id: int = 0
    last_val: int = 0
    batches_trained: int = 0
    epochs_trained: int = 0


class _PlainUnpickler(pickle.Unpickler):
    """Reads ``trial_state.pkl``, which holds only a dict of numbers: nothing else loads."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"{STATE_FILE} may hold only plain values, not {module}.{name}"
        )
