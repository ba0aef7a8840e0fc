"""Determined 0.38's Lightning integration: ``DetLogger`` (also as
``determined.lightning.experimental.DetLogger``), a ``lightning.pytorch`` logger that reports
the metrics Lightning logs to pydet through ``determined.experimental.core_v2``.

.. code:: python

    from determined.lightning import DetLogger
    trainer = lightning.pytorch.Trainer(logger=DetLogger(), max_epochs=3)

Determined 0.38 ships nothing else for Lightning (its PyTorch Lightning adapter,
``determined.pytorch.lightning``, was removed before 0.38). Importing this package imports
Lightning.
"""

from __future__ import annotations

from determined.lightning._logger import DetLogger

__all__ = ["DetLogger"]
