"""A searcher's set of request ids that also keeps them in creation order, and in a compact
form for the searcher's saved state.

The searcher's whole state is saved at every event, and its set of finished trials grows
with the experiment: sorting thousands of ids again at each save made a 10,000-trial
search quadratic, and so did writing every one of them. This set keeps its order as ids are
added (a binary search and an insertion), and its ids as runs of consecutive numbers
(first and last n of "r<first>" to "r<last>"): trials finish roughly in the order they
were created, so the runs stay about as many as the trials running at once. Any other
change drops both, to be rebuilt once when next asked.

The saved form packs the runs' numbers as base64 text (search/words.py), and is kept until
the set changes: with 1,000 trials running, finishing out of order, the runs were hundreds
of ``[first, last]`` lists, whose JSON was most of the cost of each save.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Set
from typing import Any, Self

from pydet.master.search import words

# The saved form: {"runs": the runs' first and last numbers, packed, "others": [ids]}. States
# saved before it hold a list whose items are ids, or runs as [first, last].
Saved = dict[str, Any]
OldItem = str | list[int]


def creation_order(request_id: str) -> tuple[int, str]:
    """The searcher's ids are "r1", "r2", ...: shorter first, then alphabetical."""
    return (len(request_id), request_id)


def rid_sorted(request_ids: Iterable[str]) -> list[str]:
    """Request ids in creation order: JSON state and iteration must not depend on set order.
    Two sorts with built-in keys, not one with a Python key: it is the faster."""
    ordered = sorted(request_ids)
    ordered.sort(key=len)
    return ordered


def _number(request_id: str) -> int | None:
    """n for the searcher's own spelling "r<n>" (no leading zeros), else None."""
    digits = request_id[1:]
    if request_id[:1] != "r" or not digits.isdigit() or digits != str(int(digits)):
        return None
    return int(digits)


class _Runs:
    """Ids "r<n>" as sorted, disjoint, non-adjacent runs of n, and the other ids apart."""

    def __init__(self) -> None:
        self.firsts: list[int] = []
        self.lasts: list[int] = []
        self.others: set[str] = set()

    def add(self, request_id: str) -> None:
        """Adds an id the set did not hold."""
        n = _number(request_id)
        if n is None:
            self.others.add(request_id)
            return
        firsts, lasts = self.firsts, self.lasts
        i = bisect.bisect_right(firsts, n) - 1  # the run that starts at or before n
        joins_left = i >= 0 and lasts[i] == n - 1
        joins_right = i + 1 < len(firsts) and firsts[i + 1] == n + 1
        if joins_left and joins_right:
            lasts[i] = lasts[i + 1]
            del firsts[i + 1], lasts[i + 1]
        elif joins_left:
            lasts[i] = n
        elif joins_right:
            firsts[i + 1] = n
        else:
            firsts.insert(i + 1, n)
            lasts.insert(i + 1, n)

    def to_json(self) -> Saved:
        bounds = list(itertools.chain.from_iterable(zip(self.firsts, self.lasts, strict=True)))
        return {"runs": words.pack(bounds), "others": rid_sorted(self.others)}


class RequestIds(set[str]):
    """A set of request ids; ``ordered()`` lists them in creation order, ``to_json()`` gives
    them in a compact form that ``from_json`` reads back."""

    def __init__(self, request_ids: Iterable[str] = ()) -> None:
        super().__init__(request_ids)
        self._ordered: list[str] | None = None
        self._runs: _Runs | None = None
        self._saved: Saved | None = None

    @classmethod
    def from_json(cls, saved: Saved | Iterable[OldItem]) -> RequestIds:
        """Reads ``to_json``'s form, and the lists that states saved before it hold."""
        ids = cls()
        if isinstance(saved, dict):
            bounds = words.unpack(saved["runs"])
            for first, last in zip(bounds[::2], bounds[1::2], strict=True):
                for n in range(first, last + 1):
                    ids.add(f"r{n}")
            for rid in saved["others"]:
                ids.add(rid)
            return ids
        for item in saved:
            if isinstance(item, str):
                ids.add(item)
            else:
                first, last = item
                for n in range(int(first), int(last) + 1):
                    ids.add(f"r{n}")
        return ids

    def ordered(self) -> list[str]:
        if self._ordered is None:
            self._ordered = rid_sorted(self)
        return list(self._ordered)

    def to_json(self) -> Saved:
        """The saved form (see ``Saved``): the runs of "r<first>".."r<last>" in order, then
        any other ids in creation order."""
        if self._saved is None:
            if self._runs is None:
                runs = _Runs()
                for rid in self:
                    runs.add(rid)
                self._runs = runs
            self._saved = self._runs.to_json()
        return dict(self._saved)

    def add(self, request_id: str) -> None:
        if request_id in self:
            return
        super().add(request_id)
        self._saved = None
        if self._ordered is not None:
            bisect.insort(self._ordered, request_id, key=creation_order)
        if self._runs is not None:
            self._runs.add(request_id)

    # Every other change forgets the order and the runs.

    def _forget(self) -> None:
        self._ordered = None
        self._runs = None
        self._saved = None

    def discard(self, request_id: object) -> None:
        self._forget()
        super().discard(request_id)

    def remove(self, request_id: str) -> None:
        self._forget()
        super().remove(request_id)

    def pop(self) -> str:
        self._forget()
        return super().pop()

    def clear(self) -> None:
        self._forget()
        super().clear()

    def update(self, *others: Iterable[Any]) -> None:
        self._forget()
        super().update(*others)

    def difference_update(self, *others: Iterable[Any]) -> None:
        self._forget()
        super().difference_update(*others)

    def intersection_update(self, *others: Iterable[Any]) -> None:
        self._forget()
        super().intersection_update(*others)

    def symmetric_difference_update(self, other: Iterable[str]) -> None:
        self._forget()
        super().symmetric_difference_update(other)

    # typeshed types set's in-place operators against the operators' wider results.
    def __ior__(self, other: Set[Any]) -> Self:  # type: ignore[misc, override]
        self._forget()
        return super().__ior__(other)

    def __iand__(self, other: Set[Any]) -> Self:  # type: ignore[misc]  # as __ior__
        self._forget()
        return super().__iand__(other)

    def __isub__(self, other: Set[Any]) -> Self:  # type: ignore[misc]  # as __ior__
        self._forget()
        return super().__isub__(other)

    def __ixor__(self, other: Set[Any]) -> Self:  # type: ignore[misc, override]  # as __ior__
        self._forget()
        return super().__ixor__(other)
