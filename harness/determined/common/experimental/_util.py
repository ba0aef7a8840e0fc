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


def rfc3339(seconds: float | None) -> str | None:
    """Epoch seconds as the API's JSON writes a time (``2024-05-01T12:00:00.5Z``)."""
    if not seconds:
        return None
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")


def moment(seconds: float | None) -> datetime.datetime | None:
    """Epoch seconds as an aware datetime (None for none)."""
    if not seconds:
        return None
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
