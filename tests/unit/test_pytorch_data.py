"""Data loading for PyTorchTrial: seeded epoch order, sharding, exact mid-epoch resume."""

from __future__ import annotations

import itertools
from collections import namedtuple
from typing import Any

import pytest
import torch

from determined import pytorch
from determined.pytorch import _data


def dataset(n: int) -> torch.utils.data.TensorDataset:
    return torch.utils.data.TensorDataset(torch.arange(n))


def ids(batch: Any) -> list[int]:
    return [int(i) for i in batch[0]]


def take(stream: _data.TrainingStream, n: int) -> list[list[int]]:
    return [ids(b) for b in itertools.islice(iter(stream), n)]


def test_shuffled_order_depends_only_on_seed_and_epoch() -> None:
    loader = pytorch.DataLoader(dataset(20), batch_size=4, shuffle=True)
    plan = _data.BatchPlan(loader, seed=5)
    assert plan.epoch(0) == _data.BatchPlan(loader, seed=5).epoch(0)
    assert plan.epoch(0) != plan.epoch(1)
    assert plan.epoch(0) != _data.BatchPlan(loader, seed=6).epoch(0)
    assert sorted(i for b in plan.epoch(1) for i in b) == list(range(20))


def test_resuming_mid_epoch_continues_with_the_same_batches() -> None:
    loader = pytorch.DataLoader(dataset(22), batch_size=4, shuffle=True, drop_last=True)
    whole = take(_data.TrainingStream(loader, seed=1, rank=0, size=1, start=0), 17)
    resumed = take(_data.TrainingStream(loader, seed=1, rank=0, size=1, start=7), 10)
    assert resumed == whole[7:]
    assert all(len(b) == 4 for b in whole)


def test_workers_share_each_global_batch_like_one_worker_would_take_it() -> None:
    one = pytorch.DataLoader(dataset(40), batch_size=8, shuffle=True)
    two = pytorch.DataLoader(dataset(40), batch_size=4, shuffle=True)
    single = take(_data.TrainingStream(one, seed=3, rank=0, size=1, start=0), 10)
    rank0 = take(_data.TrainingStream(two, seed=3, rank=0, size=2, start=0), 10)
    rank1 = take(_data.TrainingStream(two, seed=3, rank=1, size=2, start=0), 10)
    assert [a + b for a, b in zip(rank0, rank1, strict=True)] == single


def test_an_uneven_tail_is_dropped_so_every_worker_takes_the_same_steps() -> None:
    loader = pytorch.DataLoader(dataset(10), batch_size=2)  # 5 per-slot batches, 2 workers
    streams = [_data.TrainingStream(loader, seed=0, rank=r, size=2, start=0) for r in (0, 1)]
    assert [s.batches_per_epoch for s in streams] == [2, 2]
    assert take(streams[0], 3) == [[0, 1], [4, 5], [0, 1]]
    assert take(streams[1], 3) == [[2, 3], [6, 7], [2, 3]]


def test_too_little_data_for_the_workers_is_an_error() -> None:
    loader = pytorch.DataLoader(dataset(3), batch_size=4)
    with pytest.raises(ValueError, match="fewer than the 2 worker"):
        _data.TrainingStream(loader, seed=0, rank=0, size=2, start=0)


def test_validation_covers_every_record_once_across_workers() -> None:
    loader = pytorch.DataLoader(dataset(11), batch_size=2)
    seen = [
        ids(b)
        for rank in (0, 1, 2)
        for b in _data.validation_loader(loader, seed=0, rank=rank, size=3)
    ]
    assert sorted(i for b in seen for i in b) == list(range(11))


def test_a_plain_torch_loader_is_converted_and_resumable() -> None:
    torch_loader = torch.utils.data.DataLoader(dataset(12), batch_size=3, shuffle=True)
    converted = _data.from_torch(torch_loader)
    assert converted is not None and converted.shuffle and converted.batch_size == 3
    whole = take(_data.TrainingStream(torch_loader, seed=2, rank=0, size=1, start=0), 9)
    assert take(_data.TrainingStream(torch_loader, seed=2, rank=0, size=1, start=5), 4) == whole[5:]


def test_a_custom_sampler_is_reread_each_epoch_with_set_epoch() -> None:
    class Reversing(torch.utils.data.Sampler[int]):
        def __init__(self) -> None:
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self) -> Any:
            order = list(range(6))
            return iter(order[::-1] if self.epoch % 2 else order)

        def __len__(self) -> int:
            return 6

    loader = pytorch.DataLoader(dataset(6), batch_size=3, sampler=Reversing())
    stream = _data.TrainingStream(loader, seed=0, rank=0, size=1, start=1)
    assert take(stream, 3) == [[3, 4, 5], [5, 4, 3], [2, 1, 0]]


def test_an_iterable_dataset_loader_is_iterated_as_is() -> None:
    class Counting(torch.utils.data.IterableDataset[torch.Tensor]):
        def __iter__(self) -> Any:
            return iter(torch.arange(6).reshape(3, 2))

    loader = torch.utils.data.DataLoader(Counting(), batch_size=None)
    assert _data.from_torch(loader) is None
    stream = _data.TrainingStream(loader, seed=0, rank=0, size=1, start=1)
    got = [[int(i) for i in b] for b in itertools.islice(iter(stream), 4)]
    assert got == [[2, 3], [4, 5], [0, 1], [2, 3]]


def test_dataloader_arguments_are_checked_like_torchs() -> None:
    with pytest.raises(ValueError, match="mutually exclusive"):
        pytorch.DataLoader(dataset(4), batch_size=2, batch_sampler=[[0, 1]])
    with pytest.raises(ValueError, match="shuffle"):
        pytorch.DataLoader(dataset(4), sampler=range(4), shuffle=True)

    class Stream(torch.utils.data.IterableDataset[int]):
        def __iter__(self) -> Any:
            return iter(range(3))

    with pytest.raises(TypeError, match="IterableDataset"):
        pytorch.DataLoader(Stream())
    assert len(pytorch.DataLoader(dataset(10), batch_size=4)) == 3
    assert len(pytorch.DataLoader(dataset(10), batch_size=4, drop_last=True)) == 2


def test_building_loaders_leaves_the_global_random_state_alone() -> None:
    loader = pytorch.DataLoader(dataset(8), batch_size=2, shuffle=True)
    torch.manual_seed(0)
    before = torch.get_rng_state()
    next(iter(_data.TrainingStream(loader, seed=0, rank=0, size=1, start=3)))
    list(_data.validation_loader(loader, seed=0, rank=0, size=1))
    assert torch.equal(before, torch.get_rng_state())


def test_to_device_moves_nested_tensors_and_keeps_the_rest() -> None:
    Pair = namedtuple("Pair", "x y")
    data = {"a": [torch.ones(1), (torch.zeros(2), "label")], "p": Pair(torch.ones(1), 3)}
    moved = pytorch.to_device(data, torch.device("cpu"))
    assert isinstance(moved["p"], Pair) and moved["p"].y == 3
    assert moved["a"][1][1] == "label"
    assert torch.equal(moved["a"][0], torch.ones(1))
