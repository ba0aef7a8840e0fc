"""What a ``PyTorchTrial`` checkpoint holds, and random-number state in a loadable form.

A checkpoint is one file, ``state_dict.pth`` (``torch.save``), next to the Core API's
``metadata.json``:

- ``models_state_dict``, ``optimizers_state_dict``, ``lr_schedulers_state_dict``: lists in
  the order the objects were wrapped (models without their ``DistributedDataParallel``
  wrapper, so a checkpoint loads into a plain model);
- ``rng_states``: each worker's torch, CUDA, numpy and ``random`` states, in rank order;
- ``trial_state``: batches trained, the last validation (batch and metrics) and the LR
  schedulers' optimizer-step counts.

Everything in it is tensors, numbers, strings, lists and dicts, so it loads with
``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

STATE_FILE = "state_dict.pth"
FORMAT = "pydet.pytorch/1"


def rng_state() -> dict[str, Any]:
    """This process's random-number states (torch, CUDA, numpy, ``random``)."""
    np_state: Any = np.random.get_state(legacy=True)
    py_version, py_internal, py_gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": str(np_state[0]),
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "random": {"version": py_version, "internal": list(py_internal), "gauss": py_gauss},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state()`` returned."""
    torch.set_rng_state(state["torch"].cpu())
    np_state = state["numpy"]
    np.random.set_state(
        (
            np_state["kind"],
            np_state["keys"].cpu().numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gaussian"],
        )
    )
    py = state["random"]
    random.setstate((py["version"], tuple(py["internal"]), py["gauss"]))
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        devices = torch.cuda.device_count()
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda[:devices]])


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), numpy and ``random`` with ``seed``."""
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    torch.manual_seed(seed)
