"""``LRScheduler``: a torch learning-rate scheduler and when the trainer steps it."""

from __future__ import annotations

import enum
from typing import Any


class LRScheduler:
    """Wraps a ``torch.optim.lr_scheduler`` scheduler with the rule for stepping it.

    Create it through ``PyTorchTrialContext.wrap_lr_scheduler(scheduler, step_mode)``; the
    scheduler's state is saved in every checkpoint and restored on resume.
    """

    class StepMode(enum.Enum):
        """When the trainer calls ``scheduler.step()``.

        ``STEP_EVERY_EPOCH``: after the last batch of every ``frequency``-th epoch.
        ``STEP_EVERY_BATCH``: after every ``frequency``-th training batch.
        ``STEP_EVERY_OPTIMIZER_STEP``: after every ``frequency``-th
        ``context.step_optimizer()`` of the scheduler's optimizer.
        ``MANUAL_STEP``: never; call ``scheduler.step()`` yourself.
        """

        STEP_EVERY_EPOCH = 1
        STEP_EVERY_BATCH = 2
        MANUAL_STEP = 3
        STEP_EVERY_OPTIMIZER_STEP = 4

    def __init__(self, scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1):
        """``scheduler``: a torch LR scheduler; ``frequency``: step every N units (>= 1)."""
        if not isinstance(step_mode, LRScheduler.StepMode):
            raise TypeError(
                "step_mode must be a pytorch.LRScheduler.StepMode (e.g. "
                f"LRScheduler.StepMode.STEP_EVERY_EPOCH), not {step_mode!r}"
            )
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 1:
            raise ValueError(f"frequency must be an integer >= 1, not {frequency!r}")
        if not callable(getattr(scheduler, "step", None)):
            raise TypeError(
                f"wrap_lr_scheduler() needs a torch LR scheduler, not {type(scheduler).__name__}"
            )
        self._scheduler = scheduler
        self._step_mode = step_mode
        self._frequency = frequency
        # step_optimizer() calls seen, for STEP_EVERY_OPTIMIZER_STEP; the trainer checkpoints
        # it with the trial's state.
        self._optimizer_steps = 0

    @property
    def scheduler(self) -> Any:
        """The wrapped torch scheduler."""
        return self._scheduler

    @property
    def step_mode(self) -> LRScheduler.StepMode:
        """When the trainer steps it."""
        return self._step_mode

    @property
    def frequency(self) -> int:
        """Step every ``frequency`` units of ``step_mode``."""
        return self._frequency

    def get_last_lr(self) -> list[float]:
        """The learning rates of the last step (per parameter group)."""
        return list(self._scheduler.get_last_lr())

    def step(self, *args: Any, **kwargs: Any) -> None:
        """Step the scheduler now."""
        self._scheduler.step(*args, **kwargs)

    def state_dict(self) -> Any:
        """The wrapped scheduler's ``state_dict()``."""
        return self._scheduler.state_dict()

    def load_state_dict(self, state: Any) -> None:
        """Restore the wrapped scheduler from ``state_dict()``'s value."""
        self._scheduler.load_state_dict(state)

    def _after_batch(self, batch_idx: int, *, epoch_end: bool, epoch_idx: int) -> None:
        """Called by the trainer after training batch ``batch_idx`` (0-based, global)."""
        mode = self._step_mode
        if mode is LRScheduler.StepMode.STEP_EVERY_BATCH:
            if (batch_idx + 1) % self._frequency == 0:
                self._scheduler.step()
        elif mode is LRScheduler.StepMode.STEP_EVERY_EPOCH:
            if epoch_end and (epoch_idx + 1) % self._frequency == 0:
                self._scheduler.step()

    def _after_optimizer_step(self, optimizer: Any) -> None:
        if self._step_mode is not LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP:
            return
        if getattr(self._scheduler, "optimizer", None) is not optimizer:
            return
        self._optimizer_steps += 1
        if self._optimizer_steps % self._frequency == 0:
            self._scheduler.step()
