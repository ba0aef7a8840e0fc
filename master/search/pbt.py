"""Population-based training (Jaderberg et al., "Population Based Training of Neural
Networks"), in synchronous rounds as Determined's ``pbt`` searcher ran it.

``population_size`` trials train ``length_per_round`` in each of ``num_rounds`` rounds: in
round ``k`` (from 1) every member trains to ``k * length_per_round``. When the whole
population has reported the round, its members are ranked by the searcher metric (ties by
age). Unless it was the last round:

- the worst ``int(truncate_fraction * population_size)`` are closed;
- as many new trials start, one from the latest checkpoint of each of the best as many
  (``Create(checkpoint_of=...)``), with the parent's hyperparameters explored: each one
  resampled with ``resample_probability``, else numbers multiplied by ``1 - perturb_factor``
  or ``1 + perturb_factor`` (either at even odds, clipped to their range, ints rounded
  away from the old value) and categorical values kept; constants never change;
- the others, the parents included, train on in the next round.

After the last round every member is closed. A trial that exits early counts as the worst
result of its round and leaves the population; so does one that ended without reporting.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

from determined.common import expconf
from pydet.master.search.base import (
    Close,
    Operation,
    SearchMethod,
    ValidateAfter,
    sample_one,
    signed,
)
from pydet.master.search.request_ids import rid_sorted

WORST = math.inf


def explore(
    tree: expconf.HParamTree,
    old: dict[str, Any],
    rng: random.Random,
    *,
    resample_probability: float,
    perturb_factor: float,
) -> dict[str, Any]:
    """Hyperparameters near ``old``: each resampled with ``resample_probability``, else
    perturbed by ``perturb_factor`` (numbers) or kept (categorical); nested like the tree."""
    values: dict[tuple[str, ...], Any] = {}
    for path, hp in expconf.flatten_hparams(tree).items():
        if isinstance(hp, expconf.ConstHP):
            values[path] = hp.val
            continue
        if rng.random() < resample_probability:
            values[path] = sample_one(hp, rng)
            continue
        value = _lookup(old, path)
        if value is None:  # not in the parent (cannot happen for one this search made)
            values[path] = sample_one(hp, rng)
            continue
        up = rng.random() >= 0.5
        values[path] = _perturb(hp, value, up, perturb_factor)
    return expconf.unflatten_hparams(values)


def _lookup(hparams: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = hparams
    for name in path:
        if not isinstance(value, dict) or name not in value:
            return None
        value = value[name]
    return value


def _perturb(hp: expconf.Hyperparameter, value: Any, up: bool, factor: float) -> Any:
    multiplier = 1 + factor if up else 1 - factor
    if isinstance(hp, expconf.IntHP):
        scaled = float(value) * multiplier
        moved = math.ceil(scaled) if up else math.floor(scaled)
        if moved == value and factor > 0:
            moved = value + (1 if up else -1)  # 0 (or a tiny int) would never move otherwise
        return int(min(hp.maxval, max(hp.minval, moved)))
    if isinstance(hp, expconf.DoubleHP):
        return min(hp.maxval, max(hp.minval, float(value) * multiplier))
    if isinstance(hp, expconf.LogHP):
        low, high = hp.base**hp.minval, hp.base**hp.maxval
        return min(high, max(low, float(value) * multiplier))
    return value  # categorical: only resampling changes it


class PBTSearch(SearchMethod):
    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        searcher = config.searcher
        assert isinstance(searcher, expconf.PBTSearcher)
        self.searcher = searcher
        self.round = 0  # rounds the population has finished
        self.members: list[str] = []  # this round's population, oldest first
        self.results: dict[str, float] = {}  # this round's losses (inf: failed)
        self.hparams: dict[str, dict[str, Any]] = {}
        self.parents: dict[str, str] = {}  # child -> the trial it forked from
        self.closing: set[str] = set()

    def _target(self) -> int:
        return (self.round + 1) * self.searcher.length_per_round.value

    def _exhausted(self) -> bool:
        return self.round >= self.searcher.num_rounds or (self.created > 0 and not self.members)

    def target_trials(self) -> int:
        s = self.searcher
        return s.population_size + (s.num_rounds - 1) * s.replaced_per_round

    def progress(self) -> float:
        if self.done or self._exhausted():
            return 1.0
        within = len(self.results) / max(1, len(self.members))
        return min(1.0, (self.round + within) / self.searcher.num_rounds)

    # -- events --------------------------------------------------------------------------------

    def initial_operations(self) -> list[Operation]:
        ops: list[Operation] = []
        for _ in range(self.searcher.population_size):
            create = self._create()
            self.hparams[create.request_id] = create.hparams
            self.members.append(create.request_id)
            ops.append(create)
        return ops

    def on_trial_created(self, request_id: str) -> list[Operation]:
        if request_id not in self.members or request_id in self.finished:
            return []
        return [ValidateAfter(request_id, self._target())]

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        if request_id not in self.members or request_id in self.results or length < self._target():
            return []
        self.results[request_id] = signed(metric, self.searcher.smaller_is_better)
        return self._next_round()

    def _trial_exited(self, request_id: str, reason: str) -> list[Operation]:
        if request_id not in self.members:
            return []
        # It leaves the population; the round is decided among the others.
        self.members.remove(request_id)
        self.results.pop(request_id, None)
        return self._next_round() if self.members else []

    def _trial_ended(self, request_id: str) -> list[Operation]:
        if request_id in self.closing or request_id not in self.members:
            return []
        # It ended without being closed: it did not finish its round.
        return self._trial_exited(request_id, "errored")

    def _next_round(self) -> list[Operation]:
        """Once every member has a result: the next round's population, or the end."""
        ranked_ids = [rid for rid in self.members if rid in self.results]
        if len(ranked_ids) < len(self.members):
            return []
        ranked = sorted(ranked_ids, key=lambda rid: (self.results[rid], _age(rid)))
        self.round += 1
        self.results = {}
        ops: list[Operation] = []
        if self.round >= self.searcher.num_rounds:
            for rid in self.members:
                ops.append(self._close(rid))
            self.members = []
            return ops
        n = min(self.searcher.replaced_per_round, len(ranked) // 2)
        worst = ranked[len(ranked) - n :] if n else []
        best = ranked[:n]
        for rid in worst:
            ops.append(self._close(rid))
        survivors = [rid for rid in self.members if rid not in worst]
        children: list[str] = []
        for parent in best:
            hparams = explore(
                self.config.hyperparameters,
                self.hparams[parent],
                self.rng,
                resample_probability=self.searcher.resample_probability,
                perturb_factor=self.searcher.perturb_factor,
            )
            create = dataclasses.replace(self._create(hparams), checkpoint_of=parent)
            self.hparams[create.request_id] = hparams
            self.parents[create.request_id] = parent
            children.append(create.request_id)
            ops.append(create)
        self.members = survivors + children
        ops += [ValidateAfter(rid, self._target()) for rid in survivors]
        return ops

    def _close(self, request_id: str) -> Close:
        self.closing.add(request_id)
        return Close(request_id)

    # -- persistence ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "round": self.round,
            "members": list(self.members),
            "results": {
                rid: None if math.isinf(self.results[rid]) else self.results[rid]
                for rid in rid_sorted(list(self.results))
            },
            "hparams": {rid: self.hparams[rid] for rid in rid_sorted(list(self.hparams))},
            "parents": {rid: self.parents[rid] for rid in rid_sorted(list(self.parents))},
            "closing": rid_sorted(self.closing),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        super().load_state_dict(state)
        self.round = int(state["round"])
        self.members = [str(rid) for rid in state["members"]]
        self.results = {
            str(rid): WORST if loss is None else float(loss)
            for rid, loss in state["results"].items()
        }
        self.hparams = {str(rid): dict(hp) for rid, hp in state["hparams"].items()}
        self.parents = {str(k): str(v) for k, v in state["parents"].items()}
        self.closing = set(state["closing"])


def _age(request_id: str) -> int:
    return int(request_id[1:])
