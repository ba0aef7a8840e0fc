"""What the experiment config says about a trial's schedule, and lengths in batches.

Lengths (``searcher.max_length``, hence each searcher op's length, and the periods
``min_validation_period``/``min_checkpoint_period``) are written in batches, records or
epochs; the trainer counts global batches (one step of every worker). A bare integer is a
number of batches. Records become ``ceil(records / global_batch_size)`` batches; epochs
become ``ceil(epochs * records_per_epoch / global_batch_size)`` batches when the config sets
``records_per_epoch``, and otherwise ``epochs * batches_per_epoch`` of the training data
loader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from determined.common.expconf import Length
from determined.pytorch._env import TrialEnvError

_UNITS = {"batches": Length.batches, "records": Length.records, "epochs": Length.epochs}
_ZERO = Length.batches(0)


@dataclass(frozen=True)
class Schedule:
    """The schedule-related fields of an experiment config, checked."""

    searcher_metric: str | None = None
    max_length: Length | None = None
    min_validation_period: Length = _ZERO
    min_checkpoint_period: Length = _ZERO
    records_per_epoch: int = 0
    scheduling_unit: int = 100
    perform_initial_validation: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Schedule:
        """Read the fields from a config dict (``DET_EXPERIMENT_CONFIG``'s form).

        Raises:
            TrialEnvError: a field has the wrong form; the message names it.
        """
        searcher = config.get("searcher") or {}
        if not isinstance(searcher, Mapping):
            raise TrialEnvError(f"searcher: expected a mapping, got {searcher!r}")
        metric = searcher.get("metric")
        if metric is not None and not isinstance(metric, str):
            raise TrialEnvError(f"searcher.metric: expected a string, got {metric!r}")
        return cls(
            searcher_metric=metric,
            max_length=_max_length(searcher),
            min_validation_period=_length_or_zero(config, "min_validation_period"),
            min_checkpoint_period=_length_or_zero(config, "min_checkpoint_period"),
            records_per_epoch=_int(config, "records_per_epoch", 0, minimum=0),
            scheduling_unit=_int(config, "scheduling_unit", 100, minimum=1),
            perform_initial_validation=bool(config.get("perform_initial_validation") or False),
        )

    def op_length(self, value: int) -> Length:
        """A searcher op's length as a ``Length`` in the unit of ``searcher.max_length``
        (batches when it is a bare number or absent)."""
        if self.max_length is None:
            return Length.batches(value)
        return Length(self.max_length.unit, value)

    def to_batches(
        self, length: Length, *, global_batch_size: int, batches_per_epoch: int | None
    ) -> int:
        """``length`` in global batches (rounded up, so a length is never cut short)."""
        return to_batches(
            length,
            global_batch_size=global_batch_size,
            records_per_epoch=self.records_per_epoch,
            batches_per_epoch=batches_per_epoch,
        )


def to_batches(
    length: Length,
    *,
    global_batch_size: int,
    records_per_epoch: int = 0,
    batches_per_epoch: int | None = None,
) -> int:
    """``length`` in global batches; see the module docstring for the rules."""
    if length.unit == "epochs" and not records_per_epoch:
        if not batches_per_epoch:
            raise TrialEnvError(
                "a length in epochs needs records_per_epoch in the experiment config, or a "
                "training data loader with a length"
            )
        return length.value * batches_per_epoch
    try:
        return length.to_batches(
            global_batch_size=global_batch_size, records_per_epoch=records_per_epoch or None
        )
    except ValueError as e:
        raise TrialEnvError(str(e)) from None


def _max_length(searcher: Mapping[str, Any]) -> Length | None:
    """``searcher.max_length``; for pbt, which has none, what its last round trains to (in
    ``length_per_round``'s unit, the unit of its ops)."""
    if searcher.get("max_length") is not None:
        return parse_length(searcher["max_length"], "searcher.max_length")
    if searcher.get("length_per_round") is None:
        return None
    per_round = parse_length(searcher["length_per_round"], "searcher.length_per_round")
    rounds = searcher.get("num_rounds")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise TrialEnvError(f"searcher.num_rounds: expected an integer >= 1, got {rounds!r}")
    return Length(per_round.unit, per_round.value * rounds)


def parse_length(value: Any, path: str) -> Length:
    """``{batches: N}``, ``{records: N}``, ``{epochs: N}`` or a bare N (batches)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise TrialEnvError(f"{path}: must be >= 0, got {value}")
        return Length.batches(value)
    if isinstance(value, Mapping) and len(value) == 1:
        unit, count = next(iter(value.items()))
        if unit in _UNITS and isinstance(count, int) and not isinstance(count, bool):
            if count < 0:
                raise TrialEnvError(f"{path}.{unit}: must be >= 0, got {count}")
            return _UNITS[unit](count)
    raise TrialEnvError(
        f"{path}: expected a length like {{batches: 100}}, {{records: N}} or {{epochs: N}}, "
        f"got {value!r}"
    )


def _length_or_zero(config: Mapping[str, Any], key: str) -> Length:
    value = config.get(key)
    return _ZERO if value is None else parse_length(value, key)


def _int(config: Mapping[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TrialEnvError(f"{key}: expected an integer >= {minimum}, got {value!r}")
    return value
