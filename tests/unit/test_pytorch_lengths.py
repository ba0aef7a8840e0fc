"""Lengths for PyTorchTrial: searcher ops and periods, from config units to batches."""

from __future__ import annotations

from typing import Any

import pytest

from determined import pytorch
from determined.common.expconf import Length
from determined.pytorch._schedule import Schedule


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (Length.batches(7), 7),
        (Length.records(64), 2),
        (Length.records(65), 3),  # rounded up: a length is never cut short
        (Length.epochs(2), 19),  # 2 x 300 records / 32 = 18.75
    ],
)
def test_to_batches_with_records_per_epoch(length: Length, expected: int) -> None:
    assert pytorch.to_batches(length, global_batch_size=32, records_per_epoch=300) == expected


def test_without_records_per_epoch_an_epoch_is_the_loaders_batches() -> None:
    assert pytorch.to_batches(Length.epochs(2), global_batch_size=32, batches_per_epoch=10) == 20


def test_epochs_need_records_per_epoch_or_a_loader_length() -> None:
    with pytest.raises(pytorch.TrialEnvError, match="records_per_epoch"):
        pytorch.to_batches(Length.epochs(1), global_batch_size=32)


def test_records_need_a_global_batch_size() -> None:
    with pytest.raises(pytorch.TrialEnvError, match="global_batch_size"):
        pytorch.to_batches(Length.records(10), global_batch_size=0)


def test_schedule_reads_the_config_and_ops_take_the_max_length_unit() -> None:
    schedule = Schedule.from_config(
        {
            "searcher": {"metric": "acc", "max_length": {"epochs": 3}},
            "min_validation_period": {"records": 500},
            "min_checkpoint_period": 40,
            "records_per_epoch": 1000,
            "scheduling_unit": 5,
            "perform_initial_validation": True,
        }
    )
    assert schedule.searcher_metric == "acc"
    assert schedule.op_length(2) == Length.epochs(2)
    assert schedule.min_validation_period == Length.records(500)
    assert schedule.min_checkpoint_period == Length.batches(40)
    assert schedule.scheduling_unit == 5 and schedule.perform_initial_validation
    assert (
        schedule.to_batches(Length.epochs(2), global_batch_size=100, batches_per_epoch=None) == 20
    )


def test_a_bare_max_length_counts_batches() -> None:
    schedule = Schedule.from_config({"searcher": {"metric": "m", "max_length": 50}})
    assert schedule.op_length(50) == Length.batches(50)
    assert Schedule.from_config({}).op_length(3) == Length.batches(3)


def test_a_pbt_searcher_trains_in_its_round_lengths_unit() -> None:
    pbt = {"name": "pbt", "metric": "m", "length_per_round": {"epochs": 2}, "num_rounds": 3}
    schedule = Schedule.from_config({"searcher": pbt})
    assert schedule.max_length == Length.epochs(6)
    assert schedule.op_length(4) == Length.epochs(4)


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"searcher": {"max_length": {"steps": 3}}}, "searcher.max_length"),
        ({"searcher": {"max_length": {"batches": -1}}}, "searcher.max_length.batches"),
        ({"min_validation_period": "10"}, "min_validation_period"),
        ({"scheduling_unit": 0}, "scheduling_unit"),
        ({"searcher": {"metric": 3}}, "searcher.metric"),
        ({"searcher": {"length_per_round": {"epochs": 1}}}, "searcher.num_rounds"),
    ],
)
def test_bad_config_fields_are_named(config: dict[str, Any], path: str) -> None:
    with pytest.raises(pytorch.TrialEnvError, match=path.replace(".", r"\.")):
        Schedule.from_config(config)
