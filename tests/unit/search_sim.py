"""A small stand-in for the master that drives a search method to its end.

It carries out operations the way the master must: a ``Create`` makes a trial and asks for
its first op (with ``checkpoint_of``, the trial starts where that trial has trained to, as
from its latest checkpoint); a ``ValidateAfter`` sets the length the trial trains to (a
longer one for a trial that waits is a promotion and it resumes); ``Close`` ends the trial
once its current op is done (at once if it is waiting); ``Stop`` ends it at once as
completed. Trials "run" by reaching their op's length (length-driven) or by reporting
validations every ``report_every`` units of the time metric (stop-driven), with metrics from
``metric_fn``.

Every call made to the method and the operations it returned are logged, so that tests can
check decisions against the definition of an algorithm and replay a search.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from determined.common import expconf
from pydet.master.search import searcher

MetricFn = Callable[["SimTrial", int, random.Random], float]


@dataclass
class SimTrial:
    request_id: str
    hparams: dict[str, Any]
    seed: int
    target: int = 0
    trained: int = 0
    closing: bool = False
    ended: str = ""  # "", "closed", "stopped", or the early-exit reason
    ops_done: int = 0
    last_metric: float = 0.0
    lengths: list[int] = field(default_factory=list)
    parent: str | None = None  # the trial whose checkpoint it started from

    @property
    def index(self) -> int:
        return int(self.request_id[1:])

    @property
    def working(self) -> bool:
        return not self.ended and self.target > self.trained


@dataclass
class Call:
    event: str
    args: tuple[Any, ...]
    ops: list[searcher.Operation]


class SimulationError(AssertionError):
    pass


class Simulator:
    def __init__(
        self,
        method: searcher.SearchMethod,
        *,
        metric_fn: MetricFn,
        seed: int = 0,
        order: str = "fifo",
        fail: dict[str, tuple[int, str]] | None = None,
        time_metric: str | None = None,
        metric_name: str = "loss",
        report_every: int = 0,
    ) -> None:
        self.method = method
        self.metric_fn = metric_fn
        self.rng = random.Random(seed)
        self.order = order
        # request id -> (index of the op at which it exits early, reason)
        self.fail = fail or {}
        self.time_metric = time_metric
        self.metric_name = metric_name
        self.report_every = report_every
        self.trials: dict[str, SimTrial] = {}
        self.log: list[Call] = []
        self.shutdown = False
        self.max_working = 0
        self.progress: list[float] = []
        self._queue: deque[searcher.Operation | _Settle] = deque()
        self._tickets: dict[str, int] = {}
        self._next_ticket = 0

    # -- calling the method ---------------------------------------------------------------------

    def call(self, event: str, *args: Any) -> None:
        ops = list(getattr(self.method, event)(*args))
        self.log.append(Call(event, args, ops))
        self._queue.extend(ops)

    def _drain(self) -> None:
        while self._queue:
            self._carry_out(self._queue.popleft())
        working = sum(1 for t in self.trials.values() if t.working)
        self.max_working = max(self.max_working, working)
        self.progress.append(self.method.progress())

    def _carry_out(self, op: searcher.Operation | _Settle) -> None:
        if isinstance(op, _Settle):
            trial = self.trials[op.request_id]
            if trial.closing and not trial.ended and not trial.working:
                self._end(trial, "closed")
            return
        if self.shutdown:
            raise SimulationError(f"{op} after Shutdown")
        if isinstance(op, searcher.Create):
            if op.request_id in self.trials:
                raise SimulationError(f"{op.request_id} created twice")
            trial = SimTrial(op.request_id, op.hparams, op.seed)
            if op.checkpoint_of is not None:
                # It starts where its parent's latest checkpoint is: at the parent's length.
                parent = self.trials.get(op.checkpoint_of)
                if parent is None:
                    raise SimulationError(f"{op} forks from an unknown trial")
                trial.parent, trial.trained = parent.request_id, parent.trained
            self.trials[op.request_id] = trial
            self.call("on_trial_created", op.request_id)
        elif isinstance(op, searcher.ValidateAfter):
            trial = self._trial(op.request_id)
            if trial.closing or op.length <= trial.trained:
                raise SimulationError(
                    f"{op} for a trial at {trial.trained} (closing={trial.closing})"
                )
            trial.target = op.length
            trial.lengths.append(op.length)
            self._tickets[op.request_id] = self._next_ticket
            self._next_ticket += 1
        elif isinstance(op, searcher.Close):
            trial = self._trial(op.request_id)
            trial.closing = True
            if not trial.working:
                self._end(trial, "closed")
        elif isinstance(op, searcher.Stop):
            self._end(self._trial(op.request_id), "stopped")
        else:
            unfinished = [t.request_id for t in self.trials.values() if not t.ended]
            if unfinished:
                raise SimulationError(f"Shutdown with trials still running: {unfinished}")
            self.shutdown = True

    def _trial(self, request_id: str) -> SimTrial:
        trial = self.trials.get(request_id)
        if trial is None or trial.ended:
            raise SimulationError(f"operation for {'an ended' if trial else 'an unknown'} trial")
        return trial

    def _end(self, trial: SimTrial, how: str) -> None:
        trial.ended = how
        if how in ("closed", "stopped"):
            self.call("on_trial_closed", trial.request_id)
        else:
            self.call("on_trial_exited_early", trial.request_id, how)

    # -- running trials -------------------------------------------------------------------------

    def start(self) -> Simulator:
        self.progress.append(self.method.progress())
        self.call("initial_operations")
        self._drain()
        return self

    def step(self) -> bool:
        """Advances one trial by one op (length-driven) or one report (stop-driven); False
        when no trial has anything left to do."""
        working = [t for t in self.trials.values() if t.working]
        if not working:
            return False
        if self.order == "random":
            trial = self.rng.choice(sorted(working, key=lambda t: t.index))
        else:
            trial = min(working, key=lambda t: self._tickets[t.request_id])
        failure = self.fail.get(trial.request_id)
        if failure is not None and failure[0] == trial.ops_done:
            self._end(trial, failure[1])
            self._drain()
            return True
        if self.time_metric is not None:
            self._report(trial)
            self._drain()
            if trial.ended or trial.trained < trial.target:
                return True
        self._complete(trial)
        self._drain()
        return True

    def _report(self, trial: SimTrial) -> None:
        assert self.time_metric is not None
        t = min(trial.trained + self.report_every, trial.target)
        metric = self.metric_fn(trial, t, self.rng)
        trial.trained = t
        trial.last_metric = metric
        self.call(
            "on_validation_reported",
            trial.request_id,
            {self.time_metric: t, self.metric_name: metric},
            t,
        )

    def _complete(self, trial: SimTrial) -> None:
        """The trial reached its op's length and calls ``op.report_completed(metric)``."""
        if self.time_metric is None:
            trial.last_metric = self.metric_fn(trial, trial.target, self.rng)
        trial.trained = trial.target
        trial.ops_done += 1
        self.call("on_validation_completed", trial.request_id, trial.last_metric, trial.target)
        self._queue.append(_Settle(trial.request_id))

    def run(self, max_steps: int = 100_000) -> Simulator:
        self.start()
        for _ in range(max_steps):
            if not self.step():
                break
        else:
            raise SimulationError("the search did not finish")
        return self

    def grow(self, max_trials: int, max_steps: int = 100_000) -> Simulator:
        """``det experiment continue --max-trials``: the budget is raised after the search
        ended (or while it runs), and the search runs to its new end."""
        self.shutdown = False
        self.call("grow", max_trials)
        self._drain()
        for _ in range(max_steps):
            if not self.step():
                return self
        raise SimulationError("the grown search did not finish")

    # -- results --------------------------------------------------------------------------------

    def final_lengths(self) -> dict[str, int]:
        return {rid: t.trained for rid, t in self.trials.items()}

    def calls(self, event: str) -> list[Call]:
        return [c for c in self.log if c.event == event]


@dataclass(frozen=True)
class _Settle:
    """Once the ops answering a completed op are carried out: a trial that was closed while
    it worked, and has nothing more to do, ends now."""

    request_id: str


def config(
    searcher_cfg: dict[str, Any], hps: dict[str, Any] | None = None, **extra: Any
) -> expconf.ExperimentConfig:
    return expconf.parse_experiment_config(
        {
            "entrypoint": "python3 train.py",
            "searcher": searcher_cfg,
            "hyperparameters": hps or {},
            **extra,
        }
    )


def replay(
    log: list[Call],
    fresh: Callable[[], searcher.SearchMethod],
    *,
    restore_at: int | None = None,
    restored: Callable[[], searcher.SearchMethod] | None = None,
) -> None:
    """Feeds a logged event sequence to a new method and asserts the same operations come
    back; with ``restore_at``, the state after that many events goes through strict JSON
    into another instance (``restored``, e.g. built with another seed) that carries on."""
    method = fresh()
    for n, call in enumerate(log):
        if n == restore_at:
            state = json.loads(json.dumps(method.state_dict(), allow_nan=False))
            records = json.loads(json.dumps(method.trial_records(), allow_nan=False))
            method = (restored or fresh)()
            method.load_state_dict(state)
            method.load_trial_records(records)
        ops = getattr(method, call.event)(*call.args)
        assert ops == call.ops, f"event {n} ({call.event}{call.args}) differs"
