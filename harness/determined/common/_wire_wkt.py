"""Well-known types that betterproto2 unwraps, for ``determined.common.wire``.

betterproto2 gives a field of type ``google.protobuf.Timestamp`` as a ``datetime``, a
``Duration`` as a ``timedelta`` and a wrapper (``Int32Value``, ``StringValue``, ...) as its
plain value, ``None`` when the field is unset. On the wire each is still its message. Here,
for one wrapper class, are the three conversions a plan needs: a value to the message's
bytes, a decoded message to the value, and a value back to a message (to merge a second
occurrence of the field into, as the spec asks).

A ``datetime`` holds microseconds: a Timestamp's nanoseconds below that are dropped when it is
read (towards zero, as the official runtime's ``ToDatetime`` does), and one outside the years
1 to 9999 cannot be read at all (``DecodeError``; the official runtime accepts it on the wire
but not in JSON). The same holds for a Duration and ``timedelta``. Both are converted here
directly (the master writes a Timestamp per time it shows); wrappers go through
betterproto2's own ``from_wrapped`` and ``to_wrapped``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from determined.common._protowire import DecodeError, _varint

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _timestamp_body(value: datetime.datetime) -> bytes:
    if value.tzinfo is None:
        raise ValueError(f"a Timestamp needs a timezone-aware datetime, got {value!r}")
    offset = value - EPOCH  # days may be negative; seconds and microseconds never are
    seconds = offset.days * 86400 + offset.seconds
    nanos = offset.microseconds * 1000
    body = b"\x08" + _varint(seconds) if seconds else b""
    return body + b"\x10" + _varint(nanos) if nanos else body


def _micros(nanos: int) -> int:
    return -(-nanos // 1000) if nanos < 0 else nanos // 1000  # towards zero, as upb does


def _timestamp_value(message: Any) -> datetime.datetime:
    try:
        return EPOCH + datetime.timedelta(
            seconds=message.seconds, microseconds=_micros(message.nanos)
        )
    except OverflowError:
        raise DecodeError(
            f"Timestamp {message.seconds}s {message.nanos}ns is outside the years 1 to 9999"
        ) from None


def _duration_body(value: datetime.timedelta) -> bytes:
    seconds, nanos = divmod_duration(value)
    body = b"\x08" + _varint(seconds) if seconds else b""
    return body + b"\x10" + _varint(nanos) if nanos else body


def divmod_duration(value: datetime.timedelta) -> tuple[int, int]:
    """(seconds, nanos) of a Duration, both of the sign of ``value``."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    seconds = abs(micros) // 1_000_000 * (1 if micros >= 0 else -1)
    return seconds, (micros - seconds * 1_000_000) * 1000


def _duration_value(message: Any) -> datetime.timedelta:
    try:
        return datetime.timedelta(seconds=message.seconds, microseconds=_micros(message.nanos))
    except OverflowError:
        raise DecodeError(f"Duration {message.seconds}s is out of range") from None


def _to_value(cls: type) -> Callable[[Any], Any]:
    to_wrapped: Callable[[Any], Any] = cls.to_wrapped  # type: ignore[attr-defined]

    def convert(message: Any) -> Any:
        try:
            return to_wrapped(message)
        except (OverflowError, ValueError) as e:
            raise DecodeError(f"{cls.__name__} out of range: {e}") from None

    return convert


def conversions(
    cls: type, encode: Callable[[Any], bytes]
) -> tuple[Callable[[Any], bytes], Callable[[Any], Any], Callable[[Any], Any]]:
    """(value -> message bytes, message -> value, value -> message) for the wrapper ``cls``."""
    from_wrapped: Callable[[Any], Any] = cls.from_wrapped  # type: ignore[attr-defined]
    if cls.__name__ == "Timestamp":
        return _timestamp_body, _timestamp_value, from_wrapped
    if cls.__name__ == "Duration":
        # (betterproto2's own from_timedelta gets negative durations wrong.)
        return _duration_body, _duration_value, lambda v: cls(*divmod_duration(v))
    return (lambda v: encode(from_wrapped(v))), _to_value(cls), from_wrapped
