"""What the SDK's modules share: ``OrderBy``, Determined's deprecated enums, times, and the
error for a bad argument."""

from __future__ import annotations

import datetime
import enum
import warnings
from typing import Any, TypeVar

from determined.common import errors


class OrderBy(enum.Enum):
    """Whether a sorted list is in ascending or descending order (Determined's names and
    values; ``ASC``/``DESC`` are the same members as ``ASCENDING``/``DESCENDING``)."""

    ASCENDING = "ORDER_BY_ASC"
    ASC = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"
    DESC = "ORDER_BY_DESC"


class DeprecatedEnum(enum.Enum):
    """An enum Determined keeps for older scripts: using a member warns (FutureWarning)."""

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            warnings.warn(
                f"'{type(self).__name__}' is deprecated and will be removed in a future "
                "release. Please use 'experimental.OrderBy' instead.",
                FutureWarning,
                stacklevel=2,
            )
        return super().__getattribute__(name)


def descending(order_by: Any) -> bool:
    """Whether ``order_by`` (an ``OrderBy`` or one of the deprecated order enums) says
    descending; they share their values."""
    return getattr(order_by, "_value_", None) == OrderBy.DESC.value


class InvalidValue(errors.InvalidArgument, ValueError):
    """A bad argument to an SDK call, refused before any request: Determined raises a
    ValueError there, pydet an InvalidArgument; this is both."""


_E = TypeVar("_E", bound=enum.Enum)


def state_named(states: type[_E], number: int) -> _E | None:
    """The member of ``states`` named as the master's ``v1.State`` ``number`` (None for
    UNSPECIFIED: not known yet)."""
    from determined.api.gen import v1

    found: _E | None = states.__members__.get(v1.State(int(number)).name)
    return found


def deprecated(what: str, instead: str) -> None:
    warnings.warn(
        f"{what} has been deprecated and will be removed in a future version. "
        f"Please call {instead} instead.",
        FutureWarning,
        stacklevel=3,
    )


def rfc3339(when: datetime.datetime | float | None) -> str | None:
    """A time (a Timestamp field's datetime, or epoch seconds) as the API's JSON writes it
    (``2024-05-01T12:00:00.5Z``)."""
    found = moment(when)
    return None if found is None else found.isoformat().replace("+00:00", "Z")


def moment(when: datetime.datetime | float | None) -> datetime.datetime | None:
    """A time (a Timestamp field's datetime, or epoch seconds) as an aware datetime in UTC
    (None for none)."""
    if isinstance(when, datetime.datetime):
        return when.astimezone(datetime.UTC)
    if not when:
        return None
    return datetime.datetime.fromtimestamp(when, tz=datetime.UTC)
