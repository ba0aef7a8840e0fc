"""Hugging Face ``transformers`` on the cluster (Determined's ``determined.transformers``).

``DetCallback`` is a ``transformers.TrainerCallback``: it reports the Trainer's logs as
metrics, stores each save as a checkpoint, resumes from the latest one, and stops training
when the master asks (pause, preemption, the searcher's stop). It needs ``transformers``
(``scripts/frameworks/install.sh``), imported when ``DetCallback`` is first used, so that
the package's pure parts load without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined.transformers._hf_callback import DetCallback


def __getattr__(name: str) -> Any:
    if name == "DetCallback":
        from determined.transformers._hf_callback import DetCallback

        return DetCallback
    raise AttributeError(f"module 'determined.transformers' has no attribute {name!r}")


__all__ = ["DetCallback"]
