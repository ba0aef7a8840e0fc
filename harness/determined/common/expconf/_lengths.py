"""Training lengths: how far to train, validate or checkpoint, in batches, records or epochs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from determined.common.expconf._reader import Problems, Section, as_int, describe, join

Unit = Literal["batches", "records", "epochs"]
UNITS: tuple[Unit, ...] = ("batches", "records", "epochs")

D = TypeVar("D")


@dataclass(frozen=True)
class Length:
    """An amount of training, written ``{batches: N}``, ``{records: N}`` or ``{epochs: N}``.

    A searcher's ``max_length`` may also be a bare integer. That is kept as ``unit=None``: a
    count in whatever unit the training code reports progress in, which Determined's newer
    searchers leave to the trial. It is never silently turned into batches, so that code
    converting lengths can refuse to guess.
    """

    unit: Unit | None
    value: int

    @classmethod
    def batches(cls, value: int) -> Length:
        return cls("batches", value)

    @classmethod
    def records(cls, value: int) -> Length:
        return cls("records", value)

    @classmethod
    def epochs(cls, value: int) -> Length:
        return cls("epochs", value)

    def to_dict(self) -> dict[str, int] | int:
        return self.value if self.unit is None else {self.unit: self.value}

    def to_batches(
        self, *, global_batch_size: int | None = None, records_per_epoch: int | None = None
    ) -> int:
        """Converts to batches, rounding up so that a length is never cut short.

        A unit-less length is returned as is: the trial defines what one unit means.
        """
        if self.unit in (None, "batches"):
            return self.value
        if not global_batch_size:
            raise ValueError(f"converting {self.unit} to batches needs a global_batch_size")
        records = self.value
        if self.unit == "epochs":
            if not records_per_epoch:
                raise ValueError("converting epochs to batches needs records_per_epoch")
            records = self.value * records_per_epoch
        return math.ceil(records / global_batch_size)


def parse_length(
    problems: Problems, path: str, value: Any, *, allow_bare: bool = False, positive: bool = False
) -> Length | None:
    """``positive``: a length to train for, where zero would be a trial that never trains."""
    least = 1 if positive else 0
    if allow_bare and isinstance(value, int) and not isinstance(value, bool):
        count = as_int(problems, path, value, minimum=least)
        return None if count is None else Length(None, count)
    if not isinstance(value, Mapping):
        expected = "an integer or a length" if allow_bare else "a length"
        problems.add(path, f"expected {expected} like {{batches: 100}}, got {describe(value)}")
        return None
    keys = list(value)
    if len(keys) != 1 or keys[0] not in UNITS:
        got = ", ".join(str(k) for k in keys) if keys else "an empty mapping"
        problems.add(path, f"expected exactly one of {', '.join(UNITS)}; got {got}")
        return None
    unit: Unit = next(u for u in UNITS if u == keys[0])
    count = as_int(problems, join(path, unit), value[unit], minimum=least)
    return None if count is None else Length(unit, count)


def read_length(
    sec: Section, key: str, default: D, *, allow_bare: bool = False, positive: bool = False
) -> Length | D:
    return sec.get(
        key,
        default,
        lambda p, v: parse_length(sec.problems, p, v, allow_bare=allow_bare, positive=positive),
    )
