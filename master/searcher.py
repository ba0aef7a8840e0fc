"""Search methods: pure and deterministic. Given the config, the seed and the same events,
they make the same decisions, and their whole state round-trips through JSON so that a
restarted master continues a search exactly where it was.

Events in (trial created, validation completed, trial exited early, trial closed) turn into
operations out (create a trial, train it to a length, close it, shut the search down).
"""

from __future__ import annotations

import abc
import math
import random
from dataclasses import dataclass
from typing import Any

from determined.common import expconf


@dataclass(frozen=True)
class Create:
    request_id: str
    hparams: dict[str, Any]
    seed: int


@dataclass(frozen=True)
class ValidateAfter:
    request_id: str
    length: int


@dataclass(frozen=True)
class Close:
    request_id: str


@dataclass(frozen=True)
class Shutdown:
    failure: bool = False


Operation = Create | ValidateAfter | Close | Shutdown


def sample_hparams(tree: expconf.HParamTree, rng: random.Random) -> dict[str, Any]:
    """One random point of the search space, nested like the config's groups."""
    values: dict[tuple[str, ...], Any] = {}
    for path, hp in expconf.flatten_hparams(tree).items():
        values[path] = _sample_one(hp, rng)
    return expconf.unflatten_hparams(values)


def _sample_one(hp: expconf.Hyperparameter, rng: random.Random) -> Any:
    if isinstance(hp, expconf.ConstHP):
        return hp.val
    if isinstance(hp, expconf.IntHP):
        return rng.randint(hp.minval, hp.maxval)
    if isinstance(hp, expconf.DoubleHP):
        return rng.uniform(hp.minval, hp.maxval)
    if isinstance(hp, expconf.LogHP):
        return math.pow(hp.base, rng.uniform(hp.minval, hp.maxval))
    return hp.vals[rng.randrange(len(hp.vals))]


def max_length_units(searcher: expconf.SearcherConfig) -> int:
    """The target length handed to trials (in the config's unit; 1 when none is set)."""
    length = getattr(searcher, "max_length", None)
    if length is None:
        return 1
    assert isinstance(length, expconf.Length)
    return length.value


class SearchMethod(abc.ABC):
    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.created = 0
        self.closed: set[str] = set()
        self.lengths: dict[str, int] = {}

    def _create(self) -> list[Operation]:
        self.created += 1
        rid = f"r{self.created}"
        hparams = sample_hparams(self.config.hyperparameters, self.rng)
        seed = self.rng.randrange(2**31)
        return [Create(rid, hparams, seed)]

    @abc.abstractmethod
    def initial_operations(self) -> list[Operation]: ...

    def on_trial_created(self, request_id: str) -> list[Operation]:
        length = max_length_units(self.config.searcher)
        self.lengths[request_id] = length
        return [ValidateAfter(request_id, length)]

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        if length >= self.lengths.get(request_id, 0):
            return [Close(request_id)]
        return []

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        return self.on_trial_closed(request_id)

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        self.closed.add(request_id)
        if len(self.closed) >= self.target_trials():
            return [Shutdown()]
        return []

    @abc.abstractmethod
    def target_trials(self) -> int: ...

    def progress(self) -> float:
        return min(1.0, len(self.closed) / max(1, self.target_trials()))

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {
            "rng": [version, list(internal), gauss],
            "created": self.created,
            "closed": sorted(self.closed),
            "lengths": self.lengths,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.created = int(state["created"])
        self.closed = set(state["closed"])
        self.lengths = {k: int(v) for k, v in state["lengths"].items()}


class SingleSearch(SearchMethod):
    def initial_operations(self) -> list[Operation]:
        return self._create()

    def target_trials(self) -> int:
        return 1


class RandomSearch(SearchMethod):
    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        assert isinstance(config.searcher, expconf.RandomSearcher)
        self.searcher = config.searcher

    def _limit(self) -> int:
        concurrent = self.searcher.max_concurrent_trials or self.searcher.max_trials
        return min(concurrent, self.searcher.max_trials)

    def initial_operations(self) -> list[Operation]:
        ops: list[Operation] = []
        for _ in range(self._limit()):
            ops += self._create()
        return ops

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        ops = super().on_trial_closed(request_id)
        if self.created < self.searcher.max_trials:
            ops = self._create() + ops
        return ops

    def target_trials(self) -> int:
        return self.searcher.max_trials


def new_search(config: expconf.ExperimentConfig, seed: int) -> SearchMethod:
    searcher = config.searcher
    if isinstance(searcher, expconf.SingleSearcher):
        return SingleSearch(config, seed)
    if isinstance(searcher, expconf.RandomSearcher):
        return RandomSearch(config, seed)
    raise NotImplementedError(f"the {searcher.name} searcher is not available yet")
