"""``TrainUnit``, ``Batch`` and ``Epoch``: lengths and periods given to Determined's trainers.

``Trainer.fit(max_length=pytorch.Batch(200), validation_period=pytorch.Epoch(1))``: an
integer value is a period (every N batches or epochs; a value below 1 means every one), any
other container is a schedule (``Batch([5, 30, 45])``: after batches 5, 30 and 45). As
in Determined, a length in records becomes ``records // global_batch_size`` batches (at
least one), and a config's ``{batches: 0}`` period becomes "never".
"""

from __future__ import annotations

import sys
from collections.abc import Container
from typing import Any

from determined.core import Unit


class TrainUnit:
    """A number of batches or epochs (``Batch`` or ``Epoch``), or a schedule of them."""

    def __init__(self, value: int | Container[int]) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, Container)):
            raise TypeError(
                f"{type(self).__name__}() takes an int or a container of ints (a list of the "
                f"steps), not {value!r}"
            )
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TrainUnit) and type(other) is type(self) and other.value == self.value
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self.value)))

    def should_stop(self, step_num: int) -> bool:
        """Whether step ``step_num`` (1-based: batches or epochs done) ends a period."""
        if isinstance(self.value, int):
            if self.value < 1:
                return True
            return step_num != 0 and step_num % self.value == 0
        return step_num in self.value

    @staticmethod
    def _from_values(
        batches: int | None = None,
        records: int | None = None,
        epochs: int | None = None,
        global_batch_size: int | None = None,
    ) -> TrainUnit:
        """A config length (``{batches: N}`` and the like) as a period; 0 means never."""
        given = [v for v in (batches, records, epochs) if v is not None]
        if len(given) != 1:
            raise ValueError(
                f"a length needs exactly one of batches, records and epochs, not "
                f"batches={batches} records={records} epochs={epochs}"
            )
        if batches is not None:
            return Batch(batches if batches >= 1 else sys.maxsize)
        if records is not None:
            if not global_batch_size:
                raise ValueError("a length in records needs the hyperparameter global_batch_size")
            return Batch._from_records(records if records >= 1 else sys.maxsize, global_batch_size)
        assert epochs is not None
        return Epoch(epochs if epochs >= 1 else sys.maxsize)

    @staticmethod
    def _from_searcher_unit(
        length: int, unit: Unit | None, global_batch_size: int | None = None
    ) -> TrainUnit:
        """``searcher.max_length`` (its value and unit) as a length."""
        if unit == Unit.EPOCHS:
            return Epoch(length)
        if unit == Unit.RECORDS:
            if not global_batch_size:
                raise ValueError(
                    "searcher.max_length in records needs the hyperparameter global_batch_size"
                )
            return Batch._from_records(length, global_batch_size)
        return Batch(length)

    def _to_searcher_unit(self) -> Unit:
        return Unit.BATCHES if isinstance(self, Batch) else Unit.EPOCHS


class Batch(TrainUnit):
    """A number of training batches (one step of every worker), or a schedule of them."""

    @staticmethod
    def _from_records(records: int, global_batch_size: int) -> Batch:
        return Batch(max(records // global_batch_size, 1))


class Epoch(TrainUnit):
    """A number of epochs of the training data loader, or a schedule of them."""


def length_of(unit: Any, what: str) -> TrainUnit:
    """``unit`` checked to be a ``Batch(int)`` or ``Epoch(int)``, as a training length."""
    if not isinstance(unit, (Batch, Epoch)) or not isinstance(unit.value, int):
        raise TypeError(f"{what} must be a det.pytorch.Batch(int) or det.pytorch.Epoch(int)")
    return unit
