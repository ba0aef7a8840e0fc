"""``core_context.searcher``: the hyperparameter searcher's work for this trial.

``operations()`` yields one ``SearcherOperation`` per train-validate-report cycle the
searcher asks for. ``op.length`` is absolute (train until ``length`` units in total, in the
unit of ``searcher.max_length``); ``op.report_completed(metric)`` hands the searcher the
validation metric, and the master's reply to it says what the next op is (a longer one, if
e.g. ASHA promotes the trial, or none). Only the chief reports; with the default
``SearcherMode.WorkersAskChief`` all workers iterate together and receive the same ops.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from determined.core import _util
from determined.core._distributed import DistributedContext, DummyDistributedContext

if TYPE_CHECKING:
    from determined.core._rpc import MasterClient, NextOp

log = logging.getLogger("determined.core")


class Unit(enum.Enum):
    """The unit of ``searcher.max_length`` in the experiment config."""

    EPOCHS = "EPOCHS"
    RECORDS = "RECORDS"
    BATCHES = "BATCHES"


class SearcherMode(enum.Enum):
    """Who iterates ``operations()``: every worker together (default) or only the chief."""

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"


class SearcherOperation:
    """One unit of searcher work: train to ``length``, validate, ``report_completed()``."""

    def __init__(
        self,
        *,
        length: int,
        is_chief: bool,
        on_progress: Callable[[float], None],
        on_completed: Callable[[int, float], None],
    ) -> None:
        self._length = length
        self._is_chief = is_chief
        self._on_progress = on_progress
        self._on_completed = on_completed
        self._completed = False

    @property
    def length(self) -> int:
        """The total training length (not an increment) to reach before validating."""
        return self._length

    def report_progress(self, length: float) -> None:
        """Report how far training has come toward ``length`` (same unit as ``length``)."""
        if not self._is_chief:
            raise RuntimeError("only the chief (rank 0) may call op.report_progress()")
        if self._completed and length != self._length:
            raise RuntimeError("op.report_progress() was called after op.report_completed()")
        try:
            done = float(length)
        except (TypeError, ValueError):
            raise TypeError(f"op.report_progress() needs a number, not {length!r}") from None
        fraction = 1.0 if self._length <= 0 else done / self._length
        self._on_progress(min(1.0, max(0.0, 0.0 if math.isnan(fraction) else fraction)))

    def report_completed(self, searcher_metric: Any) -> None:
        """Finish the op with the value of the searcher's metric from the validation."""
        if not self._is_chief:
            raise RuntimeError("only the chief (rank 0) may call op.report_completed()")
        if self._completed:
            raise RuntimeError("op.report_completed() may be called only once per operation")
        try:
            metric = float(searcher_metric)
        except (TypeError, ValueError):
            raise TypeError(
                "op.report_completed() needs a number (the searcher metric), "
                f"not {searcher_metric!r}"
            ) from None
        self._on_completed(self._length, metric)
        self._completed = True


class SearcherContext:
    """Gives the training loop the searcher's operations for this trial."""

    def __init__(
        self,
        *,
        client: MasterClient,
        distributed: DistributedContext,
        trial_id: int,
        report_progress: Callable[[float], None],
        flush_metrics: Callable[[], None],
        units: Unit | None = None,
    ) -> None:
        self._client = client
        self._dist = distributed
        self._trial_id = trial_id
        self._report_progress = report_progress
        self._flush_metrics = flush_metrics
        self._units = units
        # The master's answer for the next op, given with the last completion.
        self._next: NextOp | None = None

    def operations(
        self,
        searcher_mode: SearcherMode = SearcherMode.WorkersAskChief,
        auto_ack: bool = True,
    ) -> Iterator[SearcherOperation]:
        """Yield the searcher's operations until it has no more work for this trial.

        Each op must be completed (``op.report_completed``, on the chief) before the next
        one is requested.
        """
        mode = SearcherMode(searcher_mode)
        together = mode is SearcherMode.WorkersAskChief
        if self._dist.rank != 0:
            if not together:
                raise RuntimeError(
                    "searcher.operations(searcher_mode=SearcherMode.ChiefOnly) may only be "
                    f"iterated by the chief; this is rank {self._dist.rank}"
                )
            while True:
                length = self._dist.broadcast(None)
                if length is None:
                    return
                yield self._op(length, is_chief=False)
        while True:
            length = self._next_length()
            if together:
                self._dist.broadcast(length)
            if length is None:
                return
            op = self._op(length, is_chief=True)
            yield op
            if not op._completed:
                raise RuntimeError(
                    "call op.report_completed(searcher_metric) on each searcher operation "
                    "before asking for the next one"
                )

    def acknowledge_out_of_ops(self) -> None:
        """Accepted for compatibility; nothing to do."""

    def get_configured_units(self) -> Unit | None:
        """The unit of ``searcher.max_length`` (None when it is a bare number)."""
        return self._units

    def _op(self, length: int, *, is_chief: bool) -> SearcherOperation:
        return SearcherOperation(
            length=length,
            is_chief=is_chief,
            on_progress=self._progress,
            on_completed=self._complete,
        )

    def _progress(self, progress: float) -> None:
        self._report_progress(progress)

    def _next_length(self) -> int | None:
        known, self._next = self._next, None
        if known is not None:
            return known.length
        return self._client.get_searcher_op(self._trial_id)

    def _complete(self, length: int, metric: float) -> None:
        # The validation metrics reported before completion reach the master first.
        self._flush_metrics()
        self._next = self._client.complete_searcher_op(self._trial_id, length, metric)
        log.info("completed searcher operation (length=%d, metric=%s)", length, metric)


class DummySearcherContext(SearcherContext):
    """The off-cluster stand-in: a single operation of ``length`` (1 by default)."""

    def __init__(self, distributed: DistributedContext | None = None, length: int = 1) -> None:
        self._dist = distributed or DummyDistributedContext()
        self._length = _util.check_int(length, what="length", minimum=1)
        self._units = None
        self._given = False

    def operations(
        self,
        searcher_mode: SearcherMode = SearcherMode.WorkersAskChief,
        auto_ack: bool = True,
    ) -> Iterator[SearcherOperation]:
        """Yield one operation of the stand-in's length."""
        self._given = False
        return super().operations(searcher_mode, auto_ack)

    def _progress(self, progress: float) -> None:
        log.info("progress: %.1f%%", progress * 100)

    def _next_length(self) -> int | None:
        if self._given:
            return None
        self._given = True
        return self._length

    def _complete(self, length: int, metric: float) -> None:
        log.info("searcher operation complete: length=%d, searcher_metric=%s", length, metric)


def parse_units(config: dict[str, Any]) -> Unit | None:
    """The unit of ``searcher.max_length`` in an experiment config."""
    searcher = config.get("searcher") or {}
    max_length = searcher.get("max_length")
    if isinstance(max_length, dict) and len(max_length) == 1:
        return {"epochs": Unit.EPOCHS, "records": Unit.RECORDS, "batches": Unit.BATCHES}.get(
            next(iter(max_length))
        )
    return None
