"""The contract between the master and a search method, and what every method shares.

A search method is pure: it never touches the store, the clock or the network. The master
feeds it events and carries out the operations it returns. Given the same config, seed and
events it returns the same operations, and its state round-trips through JSON
(``state_dict``/``load_state_dict``) so that a restarted master continues a search exactly
where it stopped. What a method keeps about each unfinished trial may instead be a record of
that trial's (``trial_records``/``load_trial_records``): the master saves only the records
an event changed (``take_changed_records``), on the trials' rows, so that a save does not
cost the number of trials running.

Events (methods of :class:`SearchMethod`, each returning a list of operations):

- ``initial_operations()`` once, when the experiment is created.
- ``on_trial_created(request_id)`` right after the master has carried out a ``Create``
  (for one with ``checkpoint_of``, the new trial starts from that trial's latest checkpoint).
- ``on_validation_completed(request_id, metric, length)``: the trial called
  ``op.report_completed(metric)`` for the op of that length (length-driven searchers).
- ``on_validation_reported(request_id, metrics, steps_completed)``: every validation the trial
  reports, whatever its op; stop-driven ASHA reads its ``time_metric`` from it.
- ``on_trial_exited_early(request_id, reason)``: the trial ended without finishing its work;
  reason is one of :data:`EXIT_REASONS`.
- ``on_trial_closed(request_id)``: the trial ended normally (after ``Close`` or ``Stop``).

Exactly one of the last two arrives for each trial, once.

A warm-started search (``searcher.source_experiment_id``) is told about the old experiment's
finished trials once, before ``initial_operations()``: ``import_trials(trials)``. They are
results, not trials of this search: no request id, no operation is ever issued for them, and
they are part of the state, so a replayed search knows them exactly as the live one did.
"""

from __future__ import annotations

import abc
import math
import random
import sys
from dataclasses import dataclass
from typing import Any

from determined.common import expconf
from pydet.master.search import words
from pydet.master.search.request_ids import RequestIds

EXIT_REASONS = ("errored", "invalid_hp", "user_canceled")


@dataclass(frozen=True)
class Create:
    """Start a new trial with these hyperparameters and this seed.

    With ``checkpoint_of`` (another trial's request id), the new trial starts from that
    trial's latest checkpoint, as its child (population-based training); the master fails
    the experiment, naming that trial, if it has none.
    """

    request_id: str
    hparams: dict[str, Any]
    seed: int
    checkpoint_of: str | None = None


@dataclass(frozen=True)
class ValidateAfter:
    """Train the trial to ``length`` (an absolute length, not an increment) and report.

    A longer ``ValidateAfter`` for a trial that already finished its previous one is a
    promotion: the trial resumes from its latest checkpoint.
    """

    request_id: str
    length: int


@dataclass(frozen=True)
class Close:
    """The trial is done once its current operation is done; no more will come."""

    request_id: str


@dataclass(frozen=True)
class Stop:
    """Stop the trial now (stop-driven early stopping): the master sends it the preemption
    signal and ends it as COMPLETED, not as failed or paused."""

    request_id: str


@dataclass(frozen=True)
class Shutdown:
    """The search is over: every trial it created has ended."""

    failure: bool = False


Operation = Create | ValidateAfter | Close | Stop | Shutdown


@dataclass(frozen=True)
class ImportedTrial:
    """A finished trial of the experiment a search warm-starts from.

    ``metrics`` is its latest validation report (what a search that ran it would have been
    told last); ``history`` its searcher metric at each validation, ``[steps, value]`` in step
    order (what ASHA's rungs compare).
    """

    experiment_id: int
    trial_id: int
    hparams: dict[str, Any]
    metrics: dict[str, float]
    history: list[list[float]]
    length: int

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment_id": self.experiment_id,
            "trial_id": self.trial_id,
            "hparams": self.hparams,
            "metrics": self.metrics,
            "history": self.history,
            "length": self.length,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ImportedTrial:
        return cls(
            experiment_id=int(d["experiment_id"]),
            trial_id=int(d["trial_id"]),
            hparams=dict(d["hparams"]),
            metrics={str(k): float(v) for k, v in d["metrics"].items()},
            history=[[float(s), float(v)] for s, v in d["history"]],
            length=int(d["length"]),
        )


def sample_hparams(tree: expconf.HParamTree, rng: random.Random) -> dict[str, Any]:
    """One random point of the search space, nested like the config's groups."""
    values: dict[tuple[str, ...], Any] = {}
    for path, hp in expconf.flatten_hparams(tree).items():
        values[path] = sample_one(hp, rng)
    return expconf.unflatten_hparams(values)


def sample_one(hp: expconf.Hyperparameter, rng: random.Random) -> Any:
    """One random value of one hyperparameter."""
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


def signed(metric: float, smaller_is_better: bool) -> float:
    """Turns a metric into a loss (smaller is better). NaN becomes the worst value, so that a
    diverged trial never wins a comparison; the best infinity becomes the largest float, so
    that ``inf`` is only ever the worst and JSON state can write it as null."""
    if math.isnan(metric):
        return math.inf
    loss = metric if smaller_is_better else -metric
    return max(loss, -sys.float_info.max)


def searcher_value(metrics: dict[str, Any], name: str | None) -> float | None:
    """The searcher metric ``name`` in a validation report, if it is there as a number
    (NaN counts as missing)."""
    if not name or name not in metrics:
        return None
    try:
        value = float(metrics[name])
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


class SearchMethod(abc.ABC):
    """Events in, operations out. Subclasses keep their own state in plain containers and
    extend :meth:`state_dict`/:meth:`load_state_dict`."""

    def __init__(self, config: expconf.ExperimentConfig, seed: int) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.created = 0
        # Trials the master has ended (closed or exited early): each ends exactly once.
        self.finished = RequestIds()
        self.done = False

    # -- helpers for subclasses ----------------------------------------------------------------

    def _create(self, hparams: dict[str, Any] | None = None) -> Create:
        """A new trial; ids count up ("r1", "r2", ...) so that a replayed search names its
        trials the same way."""
        self.created += 1
        if hparams is None:
            hparams = sample_hparams(self.config.hyperparameters, self.rng)
        return Create(f"r{self.created}", hparams, self.rng.randrange(2**31))

    def _known(self, request_id: str) -> bool:
        if not request_id.startswith("r") or not request_id[1:].isdigit():
            return False
        return 1 <= int(request_id[1:]) <= self.created

    def _with_shutdown(self, ops: list[Operation]) -> list[Operation]:
        """Appends ``Shutdown`` once nothing is left to create and every trial has ended."""
        if (
            not self.done
            and self._exhausted()
            and not any(isinstance(op, Create) for op in ops)
            and len(self.finished) >= self.created
        ):
            self.done = True
            ops.append(Shutdown())
        return ops

    @abc.abstractmethod
    def _exhausted(self) -> bool:
        """No trial will be created any more."""

    def _trial_ended(self, request_id: str) -> list[Operation]:
        return []

    def _trial_exited(self, request_id: str, reason: str) -> list[Operation]:
        return self._trial_ended(request_id)

    # -- events --------------------------------------------------------------------------------

    def import_trials(self, trials: list[ImportedTrial]) -> dict[int, str]:
        """Seeds the search with an old experiment's finished trials (before
        ``initial_operations``). Returns, by source trial id, why a trial was not used.

        Random and grid search draw or enumerate their points without looking at results, so
        the old trials change none of their decisions; they run their own full budget, and the
        imported trials are shown beside theirs. Model-based and early-stopping searches
        override this."""
        return {}

    @abc.abstractmethod
    def initial_operations(self) -> list[Operation]: ...

    @abc.abstractmethod
    def on_trial_created(self, request_id: str) -> list[Operation]: ...

    @abc.abstractmethod
    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]: ...

    def on_validation_reported(
        self, request_id: str, metrics: dict[str, Any], steps_completed: int
    ) -> list[Operation]:
        """Only stop-driven searchers act on plain validation reports."""
        return []

    @property
    def acts_on_reports(self) -> bool:
        """Whether a plain validation report can change the search: only if its class
        overrides ``on_validation_reported``. The master neither calls nor saves a search
        that does not, at each report of each trial."""
        return type(self).on_validation_reported is not SearchMethod.on_validation_reported

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        if reason not in EXIT_REASONS:
            raise ValueError(f"exit reason {reason!r}: expected one of {', '.join(EXIT_REASONS)}")
        if not self._known(request_id) or request_id in self.finished:
            return []
        self.finished.add(request_id)
        return self._with_shutdown(self._trial_exited(request_id, reason))

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        if not self._known(request_id) or request_id in self.finished:
            return []
        self.finished.add(request_id)
        return self._with_shutdown(self._trial_ended(request_id))

    def grow(self, max_trials: int) -> list[Operation]:
        """Raises the search's budget to ``max_trials`` trials (``det experiment continue
        --max-trials``) and goes on from its state: the trials it now wants are created, none
        is repeated, and a search that had shut down is open again."""
        if max_trials <= self.target_trials():
            raise ValueError(
                f"max_trials {max_trials} must be more than the search's {self.target_trials()}"
            )
        ops = self._grow(max_trials)
        self.done = False
        return self._with_shutdown(ops)

    def reopen(self, request_id: str) -> list[Operation]:
        """An ended trial runs again (``det experiment continue``); only searches whose
        trials each train once can do that."""
        raise ValueError(f"a {self.config.searcher.name} search cannot run a trial again")

    def refill(self, existing: set[str]) -> list[Operation]:
        """The search goes on after its experiment was stopped early; only searches whose
        trials each train once can do that."""
        raise ValueError(f"a {self.config.searcher.name} search cannot go on after it stopped")

    def _grow(self, max_trials: int) -> list[Operation]:
        raise ValueError(f"a {self.config.searcher.name} search has no max_trials to raise")

    @abc.abstractmethod
    def target_trials(self) -> int:
        """How many trials the search means to run (not counting replaced invalid ones)."""

    @abc.abstractmethod
    def progress(self) -> float:
        """The fraction of the search's training budget that is done, in [0, 1]."""

    # -- persistence ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {
            "rng": [version, words.pack(internal), gauss],
            "created": self.created,
            "finished": self.finished.to_json(),
            "done": self.done,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, _words_from_json(internal), gauss))
        self.created = int(state["created"])
        self.finished = RequestIds.from_json(state["finished"])
        self.done = bool(state["done"])

    def trial_records(self) -> dict[str, Any]:
        """Every unfinished trial's record (JSON values), by request id; none by default."""
        return {}

    def take_changed_records(self) -> dict[str, Any]:
        """The records changed since the last call, by request id (None: the trial has none
        any more), and forgets the changes: the master saves them with the state."""
        return {}

    def load_trial_records(self, records: dict[str, Any]) -> None:
        """Records ``trial_records`` gave, after ``load_state_dict``; a method that keeps
        none has none to load."""
        del records


def _words_from_json(saved: str | list[int]) -> tuple[int, ...]:
    """The random generator's state words (625 of them, each under 2**32) as saved: packed
    (search/words.py), or the list of numbers that states saved before that hold."""
    if not isinstance(saved, str):
        return tuple(int(w) for w in saved)
    return words.unpack(saved)
