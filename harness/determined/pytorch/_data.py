"""Data loading for ``PyTorchTrial``: ``DataLoader`` and the plans that make it resumable.

A trial returns a ``determined.pytorch.DataLoader`` (torch's signature) or a plain
``torch.utils.data.DataLoader``. The trainer does not iterate it as given: it works out which
dataset indices form each per-slot batch of an epoch (a ``BatchPlan``) and builds the torch
loader that feeds this worker from that plan.

- The order of an epoch is a function of ``(trial_seed, epoch)`` only, so a trial resumed
  from a checkpoint taken after global batch ``n`` starts exactly at batch ``n`` (by slicing
  the epoch's plan, not by replaying it).
- With ``size`` workers, global batch ``k`` is the per-slot batches ``k*size .. k*size+size-1``
  of the plan, worker ``r`` taking batch ``k*size + r``; a tail that cannot give every worker
  a batch is dropped for training, so all workers take the same number of steps. Global
  batch ``k`` is thus the same samples whatever the number of workers.
- Validation gives worker ``r`` the batches ``r, r+size, ...``: every sample once.

A plain torch loader is converted when it uses a standard sampler (sequential or random
without replacement) or a custom sampler or batch sampler that the plan re-reads every
epoch (calling ``set_epoch(epoch)`` first where it has one). A loader over an
``IterableDataset``, or without automatic batching, is iterated as is: it is not sharded
between workers and a resume skips batches by iterating past them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
import torch.utils.data

log = logging.getLogger("determined.pytorch")

TorchData = Any
"""A batch: a tensor, or a (nested) dict, list or tuple of tensors."""


def to_device(data: TorchData, device: Any) -> TorchData:
    """``data`` with every tensor in it moved to ``device`` (other values are kept)."""
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if isinstance(data, Mapping):
        moved = {k: to_device(v, device) for k, v in data.items()}
        try:
            return type(data)(moved)  # type: ignore[call-arg]  # dict-like types take a dict
        except TypeError:
            # e.g. a defaultdict, whose constructor wants its factory first.
            return moved
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(to_device(v, device) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(to_device(v, device) for v in data)
    to = getattr(data, "to", None)
    if callable(to):
        return to(device)
    return data


class DataLoader:
    """Determined's data loader; takes the arguments of ``torch.utils.data.DataLoader``.

    ``batch_size`` is the per-slot batch size (``context.get_per_slot_batch_size()``). The
    trainer shards the batches between workers, repeats the data for as many epochs as
    training needs, shuffles (with ``shuffle=True``) in an order set by the trial seed and
    the epoch, and resumes mid-epoch exactly. ``generator`` is replaced by one seeded from the
    trial seed, so that building loaders never draws from torch's global random state.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
    ) -> None:
        if isinstance(dataset, torch.utils.data.IterableDataset):
            raise TypeError(
                "pytorch.DataLoader needs a map-style dataset (with __len__ and __getitem__) so "
                "that it can shard, shuffle and resume it; for an IterableDataset return a "
                "torch.utils.data.DataLoader, which is iterated as is"
            )
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler is mutually exclusive with batch_size, shuffle, sampler and "
                    "drop_last"
                )
            batch_size = None
        elif batch_size is None:
            raise ValueError(
                "pytorch.DataLoader needs a batch_size (usually "
                "context.get_per_slot_batch_size()) or a batch_sampler"
            )
        elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError("sampler is mutually exclusive with shuffle")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.drop_last = drop_last
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory_device = pin_memory_device

    def __len__(self) -> int:
        """The number of per-slot batches in one pass over the data (all workers together)."""
        return len(BatchPlan(self, seed=0).epoch(0))

    def _torch_loader(self, batch_sampler: Any, generator: Any) -> Any:
        kwargs: dict[str, Any] = {
            "batch_sampler": batch_sampler,
            "num_workers": self.num_workers,
            "collate_fn": self.collate_fn,
            "pin_memory": self.pin_memory,
            "timeout": self.timeout,
            "worker_init_fn": self.worker_init_fn,
            "multiprocessing_context": self.multiprocessing_context,
            "generator": generator,
            "persistent_workers": self.persistent_workers,
        }
        if self.num_workers > 0 and self.prefetch_factor is not None:
            kwargs["prefetch_factor"] = self.prefetch_factor
        if self.pin_memory_device:
            kwargs["pin_memory_device"] = self.pin_memory_device
        return torch.utils.data.DataLoader(self.dataset, **kwargs)


def from_torch(loader: Any) -> DataLoader | None:
    """A ``DataLoader`` equivalent to a torch one, or None if it must be iterated as is."""
    if isinstance(loader.dataset, torch.utils.data.IterableDataset):
        return None
    common: dict[str, Any] = {
        "num_workers": loader.num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "prefetch_factor": loader.prefetch_factor if loader.num_workers > 0 else None,
        "persistent_workers": loader.persistent_workers,
        "pin_memory_device": getattr(loader, "pin_memory_device", ""),
    }
    batch_sampler = loader.batch_sampler
    if batch_sampler is None:
        # batch_size=None: no automatic batching, one sample at a time.
        return None
    if type(batch_sampler) is not torch.utils.data.BatchSampler:
        return DataLoader(loader.dataset, batch_sampler=batch_sampler, **common)
    given: Any = batch_sampler.sampler
    sampler, shuffle = given, False
    if type(given) is torch.utils.data.SequentialSampler:
        sampler = None
    elif (
        type(given) is torch.utils.data.RandomSampler
        and not given.replacement
        and given.num_samples == len(loader.dataset)
    ):
        sampler, shuffle = None, True
    return DataLoader(
        loader.dataset,
        batch_size=batch_sampler.batch_size,
        shuffle=shuffle,
        sampler=sampler,
        drop_last=batch_sampler.drop_last,
        **common,
    )


def mix_seed(*parts: int) -> int:
    """A 63-bit seed derived from integers (``(trial_seed, epoch)`` and the like)."""
    seq = np.random.SeedSequence([int(p) & 0xFFFFFFFFFFFFFFFF for p in parts])
    return int(seq.generate_state(1, np.uint64)[0]) & 0x7FFFFFFFFFFFFFFF


def seeded_generator(*parts: int) -> Any:
    """A ``torch.Generator`` seeded from ``parts``."""
    gen = torch.Generator()
    gen.manual_seed(mix_seed(*parts))
    return gen


class BatchPlan:
    """The per-slot batches (lists of dataset indices) of every epoch of a ``DataLoader``."""

    def __init__(self, loader: DataLoader, *, seed: int) -> None:
        self._loader = loader
        self._seed = seed

    def epoch(self, epoch: int) -> list[list[int]]:
        """Every per-slot batch of epoch ``epoch``, for all workers together, in order."""
        loader = self._loader
        if loader.batch_sampler is not None:
            _set_epoch(loader.batch_sampler, epoch)
            return [list(batch) for batch in loader.batch_sampler]
        if loader.sampler is not None:
            _set_epoch(loader.sampler, epoch)
            order = list(loader.sampler)
        elif loader.shuffle:
            rng = np.random.default_rng(np.random.SeedSequence([self._seed & 0xFFFFFFFF, epoch]))
            order = rng.permutation(len(loader.dataset)).tolist()
        else:
            order = list(range(len(loader.dataset)))
        size = loader.batch_size
        assert size is not None
        batches = [order[i : i + size] for i in range(0, len(order), size)]
        if loader.drop_last and batches and len(batches[-1]) < size:
            batches.pop()
        return batches


def _set_epoch(sampler: Any, epoch: int) -> None:
    set_epoch = getattr(sampler, "set_epoch", None)
    if callable(set_epoch):
        set_epoch(epoch)


class _IndexBatches(torch.utils.data.Sampler[list[int]]):
    """A batch sampler over precomputed batches (an iterable of index lists)."""

    def __init__(self, batches: Callable[[], Iterator[list[int]]], length: int | None) -> None:
        self._batches = batches
        self._length = length

    def __iter__(self) -> Iterator[list[int]]:
        return self._batches()

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("this batch sampler repeats forever and has no length")
        return self._length


class TrainingStream:
    """This worker's training batches from global batch ``start`` on, forever.

    ``batches_per_epoch`` is the number of steps in one epoch (the same on every worker).
    """

    def __init__(self, loader: Any, *, seed: int, rank: int, size: int, start: int) -> None:
        self._start = start
        self._rank = rank
        self._size = size
        self._seed = seed
        converted = loader if isinstance(loader, DataLoader) else from_torch(loader)
        self._passthrough: Any = None if converted is not None else loader
        if converted is not None:
            self._plan: BatchPlan | None = BatchPlan(converted, seed=seed)
            self._det_loader: DataLoader | None = converted
            per_slot = len(self._plan.epoch(0))
            self.batches_per_epoch: int | None = per_slot // size
            if not self.batches_per_epoch:
                raise ValueError(
                    f"the training data loader has {per_slot} batch(es) per epoch, fewer than "
                    f"the {size} worker(s); use a smaller batch size or more data"
                )
        else:
            self._plan = None
            self._det_loader = None
            try:
                self.batches_per_epoch = len(loader)
            except TypeError:
                self.batches_per_epoch = None
            if size > 1:
                log.warning(
                    "the training data loader is iterated as is (an IterableDataset or no "
                    "automatic batching): every worker reads the same data unless the dataset "
                    "shards itself"
                )

    def __iter__(self) -> Iterator[Any]:
        if self._plan is not None and self._det_loader is not None:
            sampler = _IndexBatches(self._planned_batches, None)
            # Seeded per start point: workers' seeds derive from it, the global RNG is untouched.
            torch_loader = self._det_loader._torch_loader(
                sampler, seeded_generator(self._seed, 1, self._start)
            )
            return iter(torch_loader)
        return self._passthrough_batches()

    def _planned_batches(self) -> Iterator[list[int]]:
        assert self._plan is not None and self.batches_per_epoch
        per_epoch = self.batches_per_epoch
        epoch, skip = divmod(self._start, per_epoch)
        while True:
            mine = self._plan.epoch(epoch)[self._rank :: self._size][:per_epoch]
            yield from mine[skip:]
            epoch, skip = epoch + 1, 0

    def _passthrough_batches(self) -> Iterator[Any]:
        loader = self._passthrough
        skip = self._start
        if self.batches_per_epoch:
            skip %= self.batches_per_epoch
        while True:
            produced = False
            for batch in loader:
                produced = True
                if skip:
                    skip -= 1
                    continue
                yield batch
            if not produced:
                raise ValueError("the training data loader produced no batches")


def validation_loader(loader: Any, *, seed: int, rank: int, size: int) -> Any:
    """What this worker iterates to validate: its share of every batch, once."""
    converted = loader if isinstance(loader, DataLoader) else from_torch(loader)
    if converted is None:
        if size > 1:
            log.warning(
                "the validation data loader is iterated as is: every worker evaluates the same "
                "data unless the dataset shards itself"
            )
        return loader
    batches = BatchPlan(converted, seed=seed).epoch(0)[rank::size]
    sampler = _IndexBatches(lambda: iter(batches), len(batches))
    return converted._torch_loader(sampler, seeded_generator(seed, 2))


def full_loader(loader: Any, *, seed: int) -> Any:
    """A torch loader over the whole dataset, for ``evaluate_full_dataset``."""
    if not isinstance(loader, DataLoader):
        return loader
    batches = BatchPlan(loader, seed=seed).epoch(0)
    sampler = _IndexBatches(lambda: iter(batches), len(batches))
    return loader._torch_loader(sampler, seeded_generator(seed, 2))


def is_loader(value: Any) -> bool:
    """Whether ``value`` is a data loader the trainer accepts."""
    return isinstance(value, (DataLoader, torch.utils.data.DataLoader))
