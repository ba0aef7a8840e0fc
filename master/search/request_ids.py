"""A searcher's set of request ids that also keeps them in creation order.

The searcher's whole state is saved at every event, and its set of finished trials grows
with the experiment: sorting thousands of ids again at each save made a 10,000-trial
search quadratic. This set keeps its order as ids are added (a binary search and an
insertion); any other change drops the order, to be sorted again once when next asked.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Set
from typing import Any, Self


def creation_order(request_id: str) -> tuple[int, str]:
    """The searcher's ids are "r1", "r2", ...: shorter first, then alphabetical."""
    return (len(request_id), request_id)


def rid_sorted(request_ids: Iterable[str]) -> list[str]:
    """Request ids in creation order: JSON state and iteration must not depend on set order.
    Two sorts with built-in keys, not one with a Python key: it is the faster."""
    ordered = sorted(request_ids)
    ordered.sort(key=len)
    return ordered


class RequestIds(set[str]):
    """A set of request ids; ``ordered()`` lists them in creation order."""

    def __init__(self, request_ids: Iterable[str] = ()) -> None:
        super().__init__(request_ids)
        self._ordered: list[str] | None = None

    def ordered(self) -> list[str]:
        if self._ordered is None:
            self._ordered = rid_sorted(self)
        return list(self._ordered)

    def add(self, request_id: str) -> None:
        if request_id in self:
            return
        super().add(request_id)
        if self._ordered is not None:
            bisect.insort(self._ordered, request_id, key=creation_order)

    # Every other change forgets the order.

    def _forget(self) -> None:
        self._ordered = None

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
