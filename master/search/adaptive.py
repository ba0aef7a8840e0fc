"""Adaptive ASHA: several ASHA brackets side by side, each trading exploration for training
length differently, because the right trade-off is not known in advance.

How Determined lays the brackets out, which this follows:

- The most rungs a bracket may have is ``max_rungs``, capped so that the bottom rung still
  trains at least one unit (``divisor**(R-1) <= max_length``) and the bottom rung is not
  smaller than one trial per top-rung survivor (``divisor**(R-1) <= max_trials``).
- ``mode`` picks the brackets from that maximum ``R``: ``aggressive`` one bracket of ``R``
  rungs; ``standard`` brackets of ``(R-1)//2+1 .. R`` rungs; ``conservative`` ``1 .. R``.
  ``bracket_rungs`` names them explicitly instead. Brackets with more rungs come first.
- ``max_trials`` is split so that each bracket gets roughly the same training budget: a
  bracket of ``r`` rungs weighs ``divisor**(r-1) / r``; every bracket gets at least one trial
  and the rounding remainder goes to the first.
- ``max_concurrent_trials`` is split evenly (remainder to the first brackets); it is raised to
  the number of brackets if lower. 0 gives each bracket ``max(last bracket's trials, divisor)``.
"""

from __future__ import annotations

import math
from typing import Any

from determined.common import expconf
from pydet.master.search.asha import Bracket, Kind
from pydet.master.search.base import ImportedTrial, Operation, SearchMethod, signed


def rungs_fitting(n: int, divisor: float) -> int:
    """The most rungs ``R`` with ``divisor**(R-1) <= n``, counted exactly (a logarithm can
    land a hair under an integer and lose a rung)."""
    rungs = 1
    while divisor**rungs <= n:
        rungs += 1
    return rungs


def bracket_layout(searcher: expconf.AdaptiveASHASearcher, max_length: int) -> list[int]:
    """Rungs per bracket, most rungs first."""
    if searcher.bracket_rungs:
        rungs = list(searcher.bracket_rungs)
    else:
        most = min(
            searcher.max_rungs,
            rungs_fitting(max_length, searcher.divisor),
            rungs_fitting(searcher.max_trials, searcher.divisor),
        )
        if searcher.mode == "aggressive":
            rungs = [most]
        elif searcher.mode == "standard":
            rungs = list(range((most - 1) // 2 + 1, most + 1))
        else:
            rungs = list(range(1, most + 1))
    return sorted(rungs, reverse=True)


def bracket_trials(max_trials: int, divisor: float, rungs: list[int]) -> list[int]:
    weights = [divisor ** (r - 1) / r for r in rungs]
    total = sum(weights)
    trials = [max(int(w / total * max_trials), 1) for w in weights]
    trials[0] += max(max_trials - sum(trials), 0)
    return trials


def bracket_concurrency(max_concurrent: int, divisor: float, trials: list[int]) -> list[int]:
    n = len(trials)
    if max_concurrent == 0:
        return [max(trials[-1], int(divisor))] * n
    max_concurrent = max(max_concurrent, n)
    return [max_concurrent // n + (1 if i < max_concurrent % n else 0) for i in range(n)]


class AdaptiveASHASearch(SearchMethod):
    """Routes each trial's events to its bracket and creates trials where brackets want them.
    Trial ids, hyperparameters and seeds come from one generator, in bracket order."""

    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        searcher = config.searcher
        assert isinstance(searcher, expconf.AdaptiveASHASearcher)
        self.searcher = searcher
        self.time_metric = searcher.time_metric
        self.metric = searcher.metric
        kind: Kind
        if searcher.time_metric is not None and searcher.max_time is not None:
            kind, max_length = "by_time", searcher.max_time
        else:
            assert searcher.max_length is not None, "adaptive_asha needs max_length or max_time"
            kind = "stop_once" if searcher.stop_once else "promote"
            max_length = searcher.max_length.value
        self.kind = kind
        self.max_length = max_length
        rungs = bracket_layout(searcher, max_length)
        trials = bracket_trials(searcher.max_trials, searcher.divisor, rungs)
        limits = bracket_concurrency(searcher.max_concurrent_trials, searcher.divisor, trials)
        self.brackets = [
            self._new_bracket(r, n, limit)
            for r, n, limit in zip(rungs, trials, limits, strict=True)
        ]
        self.owner: dict[str, int] = {}

    def _new_bracket(self, num_rungs: int, max_trials: int, limit: int) -> Bracket:
        return Bracket(
            kind=self.kind,
            num_rungs=num_rungs,
            max_length=self.max_length,
            divisor=self.searcher.divisor,
            max_trials=max_trials,
            max_concurrent=limit,
        )

    def _bracket(self, request_id: str) -> Bracket | None:
        index = self.owner.get(request_id)
        return None if index is None else self.brackets[index]

    def _fill(self) -> list[Operation]:
        ops: list[Operation] = []
        for index, bracket in enumerate(self.brackets):
            while bracket.wants_trial():
                create = self._create()
                self.owner[create.request_id] = index
                bracket.add(create.request_id)
                ops.append(create)
        return ops

    def _exhausted(self) -> bool:
        return all(b.valid_trials() >= b.max_trials for b in self.brackets)

    def import_trials(self, trials: list[ImportedTrial]) -> dict[int, str]:
        """Every bracket ranks the old trials in its rungs (see :mod:`asha`)."""
        skipped: dict[int, str] = {}
        for old in trials:
            placed = [
                bracket.seed(f"x{old.trial_id}", old.history, self.searcher.smaller_is_better)
                for bracket in self.brackets
            ]
            if not any(placed):
                skipped[old.trial_id] = f"skipped: no {self.metric} reported at a rung's length"
        return skipped

    def initial_operations(self) -> list[Operation]:
        return self._with_shutdown(self._fill())

    def on_trial_created(self, request_id: str) -> list[Operation]:
        bracket = self._bracket(request_id)
        return [] if bracket is None else bracket.first_op(request_id)

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        bracket = self._bracket(request_id)
        if bracket is None:
            return []
        loss = signed(float(metric), self.searcher.smaller_is_better)
        ops = bracket.completed(request_id, loss, length)
        return self._with_shutdown(ops + self._fill())

    def on_validation_reported(
        self, request_id: str, metrics: dict[str, Any], steps_completed: int
    ) -> list[Operation]:
        bracket = self._bracket(request_id)
        if bracket is None or self.time_metric is None:
            return []
        time, value = _number(metrics.get(self.time_metric)), _number(metrics.get(self.metric))
        # Without both numbers there is nothing to rank; the trial keeps training.
        if time is None or value is None or not math.isfinite(time):
            return []
        loss = signed(value, self.searcher.smaller_is_better)
        ops = bracket.reported(request_id, time, loss)
        return self._with_shutdown(ops + self._fill())

    def _trial_exited(self, request_id: str, reason: str) -> list[Operation]:
        bracket = self._bracket(request_id)
        ops = [] if bracket is None else bracket.exited(request_id, reason)
        return ops + self._fill()

    def _trial_ended(self, request_id: str) -> list[Operation]:
        bracket = self._bracket(request_id)
        ops = [] if bracket is None else bracket.ended(request_id)
        return ops + self._fill()

    def target_trials(self) -> int:
        return sum(b.max_trials for b in self.brackets)

    def _grow(self, max_trials: int) -> list[Operation]:
        """The brackets keep their rungs and results; the new budget is split over them as
        it would have been from the start, and they fill up with new trials."""
        rungs = [len(b.rungs) for b in self.brackets]
        trials = bracket_trials(max_trials, self.searcher.divisor, rungs)
        limits = bracket_concurrency(
            self.searcher.max_concurrent_trials, self.searcher.divisor, trials
        )
        for bracket, n, limit in zip(self.brackets, trials, limits, strict=True):
            bracket.grow(max(n, bracket.max_trials), limit)
        return self._fill()

    def progress(self) -> float:
        """Training recorded in the rungs over the training the brackets plan; below 1 until
        the search has shut down (stop-driven brackets can run over the plan)."""
        if self.done:
            return 1.0
        budgets = [b.budget() for b in self.brackets]
        done = sum(d for d, _ in budgets)
        expected = sum(e for _, e in budgets)
        return min(0.99, done / expected)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "owner": dict(self.owner),
            # Kept because a grown search's layout is not the one its max_trials would give.
            "layout": [[len(b.rungs), b.max_trials, b.limit] for b in self.brackets],
            "brackets": [b.state_dict() for b in self.brackets],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        super().load_state_dict(state)
        self.owner = {str(k): int(v) for k, v in state["owner"].items()}
        if "layout" in state:
            self.brackets = [self._new_bracket(*map(int, row)) for row in state["layout"]]
        for bracket, saved in zip(self.brackets, state["brackets"], strict=True):
            bracket.load_state_dict(saved)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
