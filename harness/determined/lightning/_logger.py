"""``DetLogger``: a Lightning logger that reports to pydet through ``core_v2``."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import utilities as ptl_utilities
from lightning.pytorch.loggers import logger as ptl_logger

from determined import experimental
from determined.experimental import core_v2


class DetLogger(ptl_logger.Logger):  # type: ignore[misc, unused-ignore]  # untyped without Lightning
    """Lightning's ``Logger`` for pydet: ``Trainer(logger=DetLogger())``.

    On the first use it calls ``core_v2.init()`` with its arguments: inside a trial that
    is the trial's Core API context; elsewhere ``unmanaged`` (or a ``config``) makes an
    unmanaged experiment on the master ``client`` talks to. Logged metrics are reported as
    training metrics at the trainer's step; ``finalize`` closes the context, so every
    report reaches the master. Only rank 0 logs.
    """

    def __init__(
        self,
        *,
        defaults: core_v2.DefaultConfig | None = None,
        unmanaged: core_v2.UnmanagedConfig | None = None,
        config: core_v2.Config | None = None,
        client: experimental.Determined | None = None,
    ) -> None:
        super().__init__()
        self._kwargs: dict[str, Any] = {
            "defaults": defaults,
            "client": client,
            "unmanaged": unmanaged,
            "config": config,
        }
        self._initialized = False

    @property
    @ptl_logger.rank_zero_experiment  # type: ignore[attr-defined, untyped-decorator, unused-ignore]  # not re-exported
    def experiment(self) -> None:
        """Sets up ``core_v2`` once (rank 0 only)."""
        if not self._initialized:
            core_v2.init(**self._kwargs)
            self._initialized = True

    @property
    def name(self) -> str:
        return "DetLogger"

    @property
    def version(self) -> str:
        return "0.1"

    @ptl_utilities.rank_zero_only  # type: ignore[untyped-decorator, unused-ignore]  # typed only with Lightning
    def log_hyperparams(self, params: Any) -> None:
        """The hyperparameters are the trial's own: nothing to log."""

    @ptl_utilities.rank_zero_only  # type: ignore[untyped-decorator, unused-ignore]  # typed only with Lightning
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Report ``metrics`` as training metrics at ``step`` (batches trained)."""
        self.experiment  # noqa: B018  # sets core_v2 up on first use
        assert core_v2.train is not None
        core_v2.train.report_training_metrics(
            steps_completed=int(step or 0), metrics={k: float(v) for k, v in metrics.items()}
        )

    @ptl_utilities.rank_zero_only  # type: ignore[untyped-decorator, unused-ignore]  # typed only with Lightning
    def save(self) -> None:
        """Nothing to save: reports are shipped as they are made."""

    @ptl_utilities.rank_zero_only  # type: ignore[untyped-decorator, unused-ignore]  # typed only with Lightning
    def finalize(self, status: str) -> None:
        """Close ``core_v2``: what was reported reaches the master."""
        core_v2.close()
