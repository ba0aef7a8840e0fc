"""Times between the two forms pydet keeps them in: seconds since the epoch (what the store,
the task messages and ``time.time()`` hold) and timezone-aware ``datetime``s (what a
``google.protobuf.Timestamp`` field of the API messages holds)."""

from __future__ import annotations

import datetime


def to_datetime(seconds: float | None) -> datetime.datetime | None:
    """``seconds`` since the epoch as an aware datetime in UTC; None for None."""
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)


def to_seconds(when: datetime.datetime | None) -> float | None:
    """An aware datetime as seconds since the epoch; None for None."""
    return None if when is None else when.timestamp()
