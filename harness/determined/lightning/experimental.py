"""``determined.lightning.experimental.DetLogger``: the same logger, under Determined's other
name for it."""

from __future__ import annotations

from determined.lightning._logger import DetLogger

__all__ = ["DetLogger"]
