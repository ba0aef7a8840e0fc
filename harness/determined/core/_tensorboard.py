"""``core.TensorboardMode``: accepted for compatibility; pydet does not manage TensorBoard."""

from __future__ import annotations

import enum


class TensorboardMode(enum.Enum):
    """How TensorBoard files would be handled (``core.init(tensorboard_mode=...)``).

    ``AUTO``: Determined writes and uploads metrics for TensorBoard itself; ``MANUAL``: the
    user does. pydet accepts both and does neither: metrics live in the master's store.
    """

    AUTO = "AUTO"
    MANUAL = "MANUAL"
