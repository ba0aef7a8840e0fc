"""pytorch.Batch / Epoch: the lengths and periods Determined's trainers take."""

from __future__ import annotations

import sys

import pytest

from determined.core import Unit
from determined.pytorch import Batch, Epoch, TrainUnit


def test_an_integer_is_a_period_and_below_one_means_every_step() -> None:
    assert [n for n in range(1, 11) if Batch(3).should_stop(n)] == [3, 6, 9]
    assert not Batch(3).should_stop(0)
    assert all(Epoch(0).should_stop(n) for n in range(5))


def test_a_container_is_a_schedule_of_steps() -> None:
    assert [n for n in range(1, 50) if Batch([5, 30, 45]).should_stop(n)] == [5, 30, 45]


def test_config_lengths_become_units_and_zero_means_never() -> None:
    assert TrainUnit._from_values(batches=0) == Batch(sys.maxsize)
    assert TrainUnit._from_values(epochs=2) == Epoch(2)
    # Records are whole global batches, at least one.
    assert TrainUnit._from_values(records=100, global_batch_size=32) == Batch(3)
    assert TrainUnit._from_values(records=10, global_batch_size=32) == Batch(1)
    with pytest.raises(ValueError, match="global_batch_size"):
        TrainUnit._from_values(records=100)
    with pytest.raises(ValueError, match="exactly one of batches, records and epochs"):
        TrainUnit._from_values(batches=1, epochs=1)


def test_searcher_units_map_to_lengths() -> None:
    assert TrainUnit._from_searcher_unit(4, Unit.EPOCHS) == Epoch(4)
    assert TrainUnit._from_searcher_unit(64, Unit.RECORDS, 32) == Batch(2)
    assert TrainUnit._from_searcher_unit(7, None) == Batch(7)
    assert Epoch(1)._to_searcher_unit() == Unit.EPOCHS
    assert Batch(1) != Epoch(1)
    assert repr(Batch(200)) == "Batch(200)"


def test_a_unit_takes_only_ints_or_containers() -> None:
    with pytest.raises(TypeError, match=r"Batch\(\) takes an int or a container"):
        Batch(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Epoch(True)
