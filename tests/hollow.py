"""What runs on hollow agents (``det-agent --runtime hollow``): shared by the hollow-agent
tests and bench/scale.py."""

from __future__ import annotations

from typing import Any


def random_search(name: str, *, trials: int, concurrency: int, length: int) -> dict[str, Any]:
    """An experiment config: a random search over one hyperparameter ``x`` in [0, 1] whose
    trials each train ``length`` batches and report ``val_loss``. Its entrypoint fails if
    it is ever run: on hollow agents nothing runs it."""
    return {
        "name": name,
        "entrypoint": "python3 -c 'raise SystemExit(1)'",
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "searcher": {
            "name": "random",
            "metric": "val_loss",
            "max_length": {"batches": length},
            "max_trials": trials,
            "max_concurrent_trials": concurrency,
        },
        "max_restarts": 0,
    }
