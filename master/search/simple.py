"""Searchers whose trials each train once, to ``max_length``: single and random.

They share one shape (:class:`OneShotSearch`): keep up to the concurrency limit of trials
running, give each one ``ValidateAfter(max_length)``, close it when it reports that length,
and create the next trial when one ends. Grid search has the same shape with its points
taken from a grid instead of sampled.
"""

from __future__ import annotations

from typing import Any

from determined.common import expconf
from pydet.master.search.base import (
    Close,
    Operation,
    SearchMethod,
    ValidateAfter,
    max_length_units,
)
from pydet.master.search.request_ids import rid_sorted


class OneShotSearch(SearchMethod):
    """Trials that train once to ``max_length``; subclasses choose how many, how many at a
    time, and where their hyperparameters come from."""

    # Random search samples another point for a trial whose hyperparameters the user code
    # rejected; a grid point or the single trial has no stand-in.
    replaces_invalid = False

    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        self.length = max_length_units(config.searcher)
        # How far each unfinished trial trained, and those lengths tallied for progress():
        # how many reached ``length`` and the steps of those short of it. The tallies change
        # with ``completed`` (only through _set_completed and _drop_completed), so progress()
        # need not walk the trials running: it runs at every event, and with 1,000 running
        # that walk cost the master about 0.4 ms a time.
        self.completed: dict[str, int] = {}
        self._full = 0
        self._partial_steps = 0
        # Those the searcher closed, in the order it did (the order the same events give
        # again): a dict, so that saving it, at every event, sorts nothing.
        self.closing: dict[str, None] = {}
        self.invalid: set[str] = set()
        # Trials whose record (see ``trial_records``) changed since the master last saved.
        self._changed: set[str] = set()

    def _limit(self) -> int:
        """How many trials may run at once."""
        return 1

    def _hparams(self, index: int) -> dict[str, Any] | None:
        """The hyperparameters of the ``index``-th trial (0-based), or None to sample them."""
        return None

    def _valid_created(self) -> int:
        return self.created - len(self.invalid)

    def _fill(self) -> list[Operation]:
        ops: list[Operation] = []
        while (
            self._valid_created() < self.target_trials()
            and self.created - len(self.finished) < self._limit()
        ):
            ops.append(self._create(self._hparams(self._valid_created())))
        return ops

    def _exhausted(self) -> bool:
        return self._valid_created() >= self.target_trials()

    def initial_operations(self) -> list[Operation]:
        return self._with_shutdown(self._fill())

    def on_trial_created(self, request_id: str) -> list[Operation]:
        if not self._known(request_id) or request_id in self.finished:
            return []
        return [ValidateAfter(request_id, self.length)]

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        if not self._known(request_id) or request_id in self.finished or request_id in self.closing:
            return []
        self._set_completed(request_id, max(length, self.completed.get(request_id, 0)))
        if length < self.length:
            return []
        self._close(request_id)
        return [Close(request_id)]

    def reopen(self, request_id: str) -> list[Operation]:
        """An ended trial trains again to ``max_length`` (its experiment was continued,
        perhaps with a new length): it is unfinished again and the search is open."""
        if not self._known(request_id):
            return []
        self.finished.discard(request_id)
        self._unclose(request_id)
        self.invalid.discard(request_id)
        self.done = False
        return [ValidateAfter(request_id, self.length)]

    def refill(self, existing: set[str]) -> list[Operation]:
        """The search goes on after it was stopped early (its experiment continued): it
        creates the trials it had still to create, within its concurrency limit.

        ``existing`` are the request ids of the trials the master made. A stopping
        experiment makes no new trial, so the search's last creations may have none: they
        are forgotten, to be created again."""
        while self.created > 0 and f"r{self.created}" not in existing | self.finished:
            self.created -= 1
        self.done = False
        return self._with_shutdown(self._fill())

    def _trial_exited(self, request_id: str, reason: str) -> list[Operation]:
        if reason == "invalid_hp" and self.replaces_invalid:
            self.invalid.add(request_id)
        return self._trial_ended(request_id)

    def _trial_ended(self, request_id: str) -> list[Operation]:
        # A finished trial counts whole in the progress, and `finished` ignores its late
        # reports: what it trained to, and that it was closing, need not be kept. The state
        # is saved at every event, so what a finished trial leaves in it is paid for at
        # every later event (a reopened trial counts from its next report on).
        self._drop_completed(request_id)
        self._unclose(request_id)
        return self._fill()

    def _set_completed(self, request_id: str, done: int) -> None:
        self._tally(self.completed.get(request_id), -1)
        self.completed[request_id] = done
        self._tally(done, 1)
        self._changed.add(request_id)

    def _drop_completed(self, request_id: str) -> None:
        self._tally(self.completed.pop(request_id, None), -1)
        self._changed.add(request_id)

    def _close(self, request_id: str) -> None:
        self.closing[request_id] = None
        self._changed.add(request_id)

    def _unclose(self, request_id: str) -> None:
        self.closing.pop(request_id, None)
        self._changed.add(request_id)

    def _tally(self, done: int | None, sign: int) -> None:
        if done is None:
            return
        if done >= max(1, self.length):
            self._full += sign
        else:
            self._partial_steps += sign * done

    def progress(self) -> float:
        if self.done:
            return 1.0
        # A finished trial counts whole, an unfinished one by how far it trained; invalid ones
        # not at all. Nothing here walks the finished trials nor the running ones: even a set
        # difference with the finished costs their number (CPython walks the set taken away),
        # which made a 10,000-trial search quadratic. A finished trial has left ``completed``.
        credit = float(len(self.finished) - len(self.invalid & self.finished))
        credit += self._full + self._partial_steps / max(1, self.length)
        return min(1.0, credit / max(1, self.target_trials()))

    def state_dict(self) -> dict[str, Any]:
        # ``completed`` and ``closing`` are the trials' records, saved apart.
        return {**super().state_dict(), "invalid": rid_sorted(self.invalid)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        super().load_state_dict(state)
        self.completed, self._full, self._partial_steps = {}, 0, 0
        self.closing = {}
        self.invalid = set(state["invalid"])
        # States saved before the trials' records held ``completed`` and ``closing`` (and,
        # older still, finished trials in ``completed``: they never counted, and a reopened
        # trial counts from its next report on). Each becomes a record at the next save.
        for rid, done in state.get("completed", {}).items():
            if rid not in self.finished:
                self._set_completed(rid, int(done))
        for rid in state.get("closing", []):
            self._close(rid)

    def trial_records(self) -> dict[str, Any]:
        """A trial's record: [the length it reported completed (None before it did), 1 if
        the searcher closed it else 0]."""
        return {rid: self._trial_record(rid) for rid in {**self.completed, **self.closing}}

    def take_changed_records(self) -> dict[str, Any]:
        changed, self._changed = self._changed, set()
        return {rid: self._trial_record(rid) for rid in changed}

    def _trial_record(self, request_id: str) -> list[int | None] | None:
        done, closing = self.completed.get(request_id), request_id in self.closing
        if done is None and not closing:
            return None
        return [done, int(closing)]

    def load_trial_records(self, records: dict[str, Any]) -> None:
        unsaved = set(self._changed)  # from a state of the older form: still to be saved
        for rid, (done, closing) in records.items():
            if rid in self.finished:
                continue
            if done is not None:
                self._set_completed(rid, int(done))
            if closing:
                self._close(rid)
        self._changed = unsaved


class SingleSearch(OneShotSearch):
    """One trial, trained to ``max_length``."""

    def target_trials(self) -> int:
        return 1


class BudgetedSearch(OneShotSearch):
    """``max_trials`` trials, ``max_concurrent_trials`` at a time (0: no limit); a trial whose
    hyperparameters the user code rejected is replaced. The budget can grow."""

    replaces_invalid = True

    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        searcher = config.searcher
        assert isinstance(searcher, expconf.RandomSearcher | expconf.OptunaSearcher)
        self.max_trials = searcher.max_trials
        self.max_concurrent = searcher.max_concurrent_trials

    def _limit(self) -> int:
        return self.max_concurrent or self.max_trials

    def target_trials(self) -> int:
        return self.max_trials

    def _grow(self, max_trials: int) -> list[Operation]:
        # Whatever chooses the hyperparameters keeps its state: random continues its
        # sequence, a model keeps its history.
        self.max_trials = max_trials
        return self._fill()


class RandomSearch(BudgetedSearch):
    """Trials with independently sampled hyperparameters."""
