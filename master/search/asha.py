"""One bracket of asynchronous successive halving (ASHA; Li et al., "A System for Massively
Parallel Hyperparameter Tuning").

A bracket has ``R`` rungs; rung ``k`` trains to ``max_length / divisor**(R-1-k)``. Every
result a trial reports at a rung is kept in that rung, sorted best first. Three ways to act on
a result, chosen by the config:

- ``promote`` (``max_length``, the default): ASHA's asynchronous rule. With ``n`` results in a
  rung, the best ``floor(n / divisor)`` are promoted to the next rung, each as soon as it is
  known to be among them. A trial that is not (yet) promoted waits: a later, worse result can
  still lift it into the top share. Once every trial of the bracket has reported at the bottom
  rung and nothing is outstanding below a rung, that rung's unpromoted trials are closed.
- ``stop_once`` (``max_length`` with ``stop_once: true``): decide once, when the result
  arrives: continue if it is among the best ``max(1, floor(n / divisor))`` so far, otherwise
  close. Trials never wait, so no trial needs to be resumed later.
- ``by_time`` (``time_metric`` and ``max_time``): trials train to ``max_time`` on their own;
  each validation report places the trial in the rungs its ``time_metric`` has reached, once
  per rung, and the trial is stopped if it is not among the best ``max(1, floor(n / divisor))``.

A warm start (``searcher.source_experiment_id``) seeds the rungs with the old experiment's
finished trials: each one enters every rung it trained to, with its searcher metric at the
latest validation not past that rung's length (never a value it reached by training longer
than the rung asks of a new trial, so an old trial is never favoured). Imported results raise
the bar: a new trial is promoted or kept only if it ranks in the top share of old and new
results together. They are never promoted themselves (they have no process here; they hold
their place in the rung as already promoted), and they do not count towards ``max_trials``.

A trial that errors or is canceled counts as the worst result of the rung it was working
towards; a trial whose hyperparameters were invalid is removed from every rung and a new trial
takes its place.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Literal

from pydet.master.search.base import Close, Operation, Stop, ValidateAfter, signed
from pydet.master.search.request_ids import rid_sorted

Kind = Literal["promote", "stop_once", "by_time"]
KINDS: tuple[Kind, ...] = ("promote", "stop_once", "by_time")
WORST = math.inf


def rung_lengths(max_length: int, divisor: float, num_rungs: int) -> list[int]:
    """Each rung's length; never 0, so that a tiny ``max_length`` still trains."""
    return [max(1, int(max_length / divisor ** (num_rungs - 1 - k))) for k in range(num_rungs)]


def rung_sizes(max_trials: int, divisor: float, num_rungs: int) -> list[int]:
    """How many trials reach each rung under the promotion rule: ``floor(n / divisor)`` of
    each rung's ``n``."""
    sizes = [max_trials]
    for _ in range(num_rungs - 1):
        sizes.append(math.floor(sizes[-1] / divisor))
    return sizes


class Rung:
    """Results at one length, best (smallest loss) first."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.losses: list[float] = []
        self.promoted: list[bool] = []

    def __len__(self) -> int:
        return len(self.ids)

    def insert(self, request_id: str, loss: float, *, after_ties: bool) -> int:
        # Promotion ranks a new result after equal ones (first come, first promoted); stopping
        # ranks it before them, giving the newcomer the benefit of the doubt.
        find = bisect.bisect_right if after_ties else bisect.bisect_left
        index = find(self.losses, loss)
        self.ids.insert(index, request_id)
        self.losses.insert(index, loss)
        self.promoted.insert(index, False)
        return index

    def remove(self, request_id: str) -> None:
        if request_id in self.ids:
            index = self.ids.index(request_id)
            del self.ids[index], self.losses[index], self.promoted[index]

    def to_json(self) -> list[list[Any]]:
        # JSON has no infinity; None stands for the worst result.
        return [
            [rid, None if math.isinf(loss) else loss, promoted]
            for rid, loss, promoted in zip(self.ids, self.losses, self.promoted, strict=True)
        ]

    @classmethod
    def from_json(cls, rows: list[list[Any]]) -> Rung:
        rung = cls()
        for rid, loss, promoted in rows:
            rung.ids.append(str(rid))
            rung.losses.append(WORST if loss is None else float(loss))
            rung.promoted.append(bool(promoted))
        return rung


class Bracket:
    """The trials of one bracket and its rungs. It issues ``ValidateAfter``, ``Close`` and
    ``Stop``; the caller creates trials (ids and hyperparameters) when :meth:`wants_trial`."""

    def __init__(
        self,
        *,
        kind: Kind,
        num_rungs: int,
        max_length: int,
        divisor: float,
        max_trials: int,
        max_concurrent: int,
    ) -> None:
        self.kind = kind
        self.divisor = divisor
        self.max_trials = max_trials
        self.limit = max(1, min(max_concurrent, max_trials))
        self.lengths = rung_lengths(max_length, divisor, num_rungs)
        self.rungs = [Rung() for _ in range(num_rungs)]
        # Trials working towards each rung (length-driven only); a rung with none is complete
        # once the one below is.
        self.outstanding = [0] * num_rungs
        self.rung_of: dict[str, int] = {}
        self.busy: set[str] = set()  # trials with an op in progress: they count against limit
        self.gone: set[str] = set()  # errored or canceled: their results stay in the rungs
        self.closed: set[str] = set()  # no more ops will be issued for these
        self.invalid: set[str] = set()
        self.imported: set[str] = set()  # warm-start results, ids "x<source trial id>"

    @property
    def top(self) -> int:
        return len(self.rungs) - 1

    def valid_trials(self) -> int:
        return len(self.rung_of) - len(self.invalid)

    def wants_trial(self) -> bool:
        return self.valid_trials() < self.max_trials and len(self.busy) < self.limit

    def grow(self, max_trials: int, max_concurrent: int) -> None:
        """A larger budget: more trials enter the bottom rung and compete with the results
        there. Trials closed out before wait for nothing: if one earns a promotion now, it
        counts as the next rung's worst result (its process has ended)."""
        self.max_trials = max_trials
        self.limit = max(1, min(max_concurrent, max_trials))

    def seed(self, key: str, history: list[list[float]], smaller_is_better: bool) -> bool:
        """An old trial's results (``[length, metric]`` in length order) placed in the rungs
        it reached; False if it reached none."""
        placed = False
        reached = max((length for length, _ in history), default=0.0)
        for rung, length in zip(self.rungs, self.lengths, strict=True):
            before = [value for at, value in history if at <= length]
            if reached < length or not before:
                continue
            index = rung.insert(key, signed(before[-1], smaller_is_better), after_ties=True)
            rung.promoted[index] = True
            placed = True
        if placed:
            self.imported.add(key)
        return placed

    def _own(self, rung: Rung) -> int:
        """Results of this search's own trials in ``rung``."""
        return sum(1 for rid in rung.ids if rid not in self.imported)

    def add(self, request_id: str) -> None:
        self.rung_of[request_id] = 0
        self.busy.add(request_id)
        if self.kind != "by_time":
            self.outstanding[0] += 1

    def first_op(self, request_id: str) -> list[Operation]:
        if request_id not in self.busy:
            return []
        length = self.lengths[-1] if self.kind == "by_time" else self.lengths[0]
        return [ValidateAfter(request_id, length)]

    def _target(self, request_id: str) -> int:
        if self.kind == "by_time":
            return self.lengths[-1]
        return self.lengths[min(self.rung_of[request_id], self.top)]

    # -- results -------------------------------------------------------------------------------

    def completed(self, request_id: str, loss: float, length: int) -> list[Operation]:
        """The trial finished its op (``report_completed``) at ``length``."""
        if request_id not in self.busy or length < self._target(request_id):
            return []
        self.busy.discard(request_id)
        if self.kind == "by_time":
            # It reached max_time: whatever it has not yet been ranked in, rank it now; it is
            # done either way.
            self._place(request_id, length, loss)
            self.closed.add(request_id)
            return [Close(request_id)]
        return self._report(request_id, loss)

    def reported(self, request_id: str, time: float, loss: float) -> list[Operation]:
        """A validation report of a stop-driven trial at ``time`` (its time_metric)."""
        if self.kind != "by_time" or request_id not in self.busy:
            return []
        if not self._place(request_id, time, loss):
            return []
        self.busy.discard(request_id)
        self.closed.add(request_id)
        return [Stop(request_id)]

    def _place(self, request_id: str, time: float, loss: float) -> bool:
        """Ranks a stop-driven trial in every rung it has newly reached; True if it should
        stop. Each rung sees a trial once, so a decision is never revisited."""
        k = self.rung_of[request_id]
        while k <= self.top and time >= self.lengths[k]:
            rung = self.rungs[k]
            index = rung.insert(request_id, loss, after_ties=False)
            self.rung_of[request_id] = k + 1
            if k < self.top and index >= max(1, math.floor(len(rung) / self.divisor)):
                return True
            k += 1
        return False

    def _report(self, request_id: str, loss: float) -> list[Operation]:
        if self.kind == "promote":
            return self._promote(request_id, loss)
        k = self.rung_of[request_id]
        self.outstanding[k] -= 1
        rung = self.rungs[k]
        index = rung.insert(request_id, loss, after_ties=False)
        keep = k < self.top and index < max(1, math.floor(len(rung) / self.divisor))
        if request_id in self.gone:
            return []
        if keep:
            self.rung_of[request_id] = k + 1
            self.outstanding[k + 1] += 1
            self.busy.add(request_id)
            return [ValidateAfter(request_id, self.lengths[k + 1])]
        self.closed.add(request_id)
        return [Close(request_id)]

    def _promote(self, request_id: str, loss: float) -> list[Operation]:
        ops: list[Operation] = []
        queue = [(request_id, loss)]
        while queue:
            rid, value = queue.pop(0)
            k = self.rung_of[rid]
            self.outstanding[k] -= 1
            if k == self.top:
                self.rungs[k].insert(rid, value, after_ties=True)
                if rid not in self.closed and rid not in self.gone:
                    self.closed.add(rid)
                    ops.append(Close(rid))
                continue
            for winner in self._promotions(k, rid, value):
                self.rung_of[winner] = k + 1
                self.outstanding[k + 1] += 1
                if winner in self.gone or winner in self.closed:
                    # It cannot train any more (it failed, or it was closed out before the
                    # search grew): it takes the next rung's worst result at once.
                    queue.append((winner, WORST))
                else:
                    self.busy.add(winner)
                    ops.append(ValidateAfter(winner, self.lengths[k + 1]))
        if self._own(self.rungs[0]) >= self.max_trials:
            ops += self._close_out()
        return ops

    def _promotions(self, k: int, request_id: str, loss: float) -> list[str]:
        """Adds a result to rung ``k`` and names the trial that has just earned promotion."""
        rung = self.rungs[k]
        before = math.floor(len(rung) / self.divisor)
        after = math.floor((len(rung) + 1) / self.divisor)
        index = rung.insert(request_id, loss, after_ties=True)
        if index < after:
            rung.promoted[index] = True
            return [request_id]
        # One more promotion is due and the newcomer is not it: the best one not yet promoted.
        if after != before and not rung.promoted[before]:
            rung.promoted[before] = True
            return [rung.ids[before]]
        return []

    def _close_out(self) -> list[Operation]:
        """Closes unpromoted trials in every rung that can no longer change."""
        ops: list[Operation] = []
        for k, rung in enumerate(self.rungs):
            if self.outstanding[k] > 0:
                break
            for rid, promoted in zip(rung.ids, rung.promoted, strict=True):
                if not promoted and rid not in self.closed:
                    self.closed.add(rid)
                    ops.append(Close(rid))
        return ops

    # -- trials that end -----------------------------------------------------------------------

    def exited(self, request_id: str, reason: str) -> list[Operation]:
        """The trial ended early; the master will not run it again."""
        if reason == "invalid_hp":
            self.invalid.add(request_id)
            self.closed.add(request_id)
            for rung in self.rungs:
                rung.remove(request_id)
            if request_id in self.busy:
                self.busy.discard(request_id)
                if self.kind != "by_time":
                    self.outstanding[self.rung_of[request_id]] -= 1
            return []
        self.gone.add(request_id)
        if request_id not in self.busy:
            self.closed.add(request_id)
            return []
        self.busy.discard(request_id)
        if self.kind == "by_time":
            self.closed.add(request_id)
            k = self.rung_of[request_id]
            if k <= self.top:
                self.rungs[k].insert(request_id, WORST, after_ties=False)
                self.rung_of[request_id] = k + 1
            return []
        self.closed.add(request_id)
        return self._report(request_id, WORST)

    def ended(self, request_id: str) -> list[Operation]:
        """The trial ended normally. If it was not told to, it left work undone: a
        length-driven trial then counts as failed, or its rungs would wait for it forever."""
        if request_id in self.closed:
            return []
        if self.kind == "by_time":
            self.busy.discard(request_id)
            self.closed.add(request_id)
            return []
        return self.exited(request_id, "errored")

    # -- progress and persistence --------------------------------------------------------------

    def budget(self) -> tuple[float, float]:
        """(length trained in recorded results, length the bracket expects to train).

        The plan is ``floor(n / divisor)`` trials per rung, raised to what has already reached
        a rung: asynchronous promotion can move more trials up than the synchronous plan.
        """
        steps = [b - a for a, b in zip([0, *self.lengths], self.lengths, strict=False)]
        sizes = rung_sizes(self.max_trials, self.divisor, len(self.rungs))
        done = expected = 0
        for k, (rung, step, planned) in enumerate(zip(self.rungs, steps, sizes, strict=True)):
            own = self._own(rung)
            reached = own + (0 if self.kind == "by_time" else self.outstanding[k])
            done += own * step
            expected += max(planned, reached) * step
        return float(done), float(max(expected, 1))

    def state_dict(self) -> dict[str, Any]:
        return {
            "rungs": [rung.to_json() for rung in self.rungs],
            "outstanding": list(self.outstanding),
            "rung_of": {rid: self.rung_of[rid] for rid in rid_sorted(list(self.rung_of))},
            "busy": rid_sorted(self.busy),
            "gone": rid_sorted(self.gone),
            "closed": rid_sorted(self.closed),
            "invalid": rid_sorted(self.invalid),
            "imported": rid_sorted(self.imported),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rungs = [Rung.from_json(rows) for rows in state["rungs"]]
        self.outstanding = [int(n) for n in state["outstanding"]]
        self.rung_of = {str(k): int(v) for k, v in state["rung_of"].items()}
        self.busy = set(state["busy"])
        self.gone = set(state["gone"])
        self.closed = set(state["closed"])
        self.invalid = set(state["invalid"])
        self.imported = set(state.get("imported", []))
