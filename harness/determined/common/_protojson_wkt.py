"""The well-known types in proto3 JSON, both ways: times as RFC 3339 text, durations as
``"1.5s"``, wrappers as their value, a Struct as the JSON object it holds, a Value as the
JSON value, a ListValue as an array.

Two departures from ``MessageToDict``, both as Determined's gateway (Go) writes them: a
Value's whole number is written as an integer (``100``, not ``100.0``; the same JSON number,
but a script reading a config gets an ``int``), and a Value's NaN or infinity, which JSON
cannot hold and the official runtime refuses to write, is written as ``"NaN"``,
``"Infinity"`` or ``"-Infinity"``, as a double field's is, instead of failing the response.
"""

from __future__ import annotations

import datetime
import math
import re
import struct
from base64 import b64encode
from collections.abc import Callable
from typing import Any

Convert = Callable[[Any], Any]

_MAX_EXACT = 2**53
_pack_float32 = struct.Struct("<f")


def _fraction(nanos: int) -> str:
    """Nanoseconds as the fraction the proto3 JSON mapping writes: 0, 3, 6 or 9 digits."""
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1000 == 0:
        return f".{nanos // 1000:06d}"
    return f".{nanos:09d}"


def rfc3339(value: datetime.datetime) -> str:
    """``2024-05-01T12:00:00.250Z``: a Timestamp's JSON."""
    t = value.astimezone(datetime.UTC) if value.tzinfo else value
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
        f"{_fraction(t.microsecond * 1000)}Z"
    )


def duration(value: datetime.timedelta) -> str:
    """``-1.500s``: a Duration's JSON."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    seconds, rest = divmod(abs(micros), 1_000_000)
    return f"{sign}{seconds}{_fraction(rest * 1000)}s"


def double_json(value: float) -> float | str:
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if math.isnan(value):
        return "NaN"
    return value


def float32_json(value: float) -> float | str:
    """A ``float`` in the fewest digits that read back as the same float32 (as
    ``MessageToDict`` writes 0.1f as 0.1, not 0.10000000149011612)."""
    if math.isinf(value) or math.isnan(value):
        return double_json(value)
    (value,) = _pack_float32.unpack(_pack_float32.pack(value))
    precision = 6
    shortest = float(f"{value:.{precision}g}")
    while _pack_float32.unpack(_pack_float32.pack(shortest))[0] != value:  # at most 9 digits
        precision += 1
        shortest = float(f"{value:.{precision}g}")
    return shortest


def _number(value: float, plain: bool) -> float | int | str:
    if isinstance(value, int):
        return value
    if math.isfinite(value) and value.is_integer() and abs(value) <= _MAX_EXACT:
        return int(value)
    return value if plain else double_json(value)


def value_json(message: Any, plain: bool = False) -> Any:
    """A ``google.protobuf.Value`` as the JSON value it holds (null when it holds nothing).

    ``plain``: as Python data rather than JSON, a NaN or an infinity kept as a float.
    """
    if message.number_value is not None:
        return _number(message.number_value, plain)
    if message.string_value is not None:
        return message.string_value
    if message.bool_value is not None:
        return message.bool_value
    if message.struct_value is not None:
        return struct_json(message.struct_value, plain)
    if message.list_value is not None:
        return [value_json(v, plain) for v in message.list_value.values]
    return None


def struct_json(message: Any, plain: bool = False) -> dict[str, Any]:
    return {k: value_json(v, plain) for k, v in message.fields.items()}


def list_json(message: Any) -> list[Any]:
    return [value_json(v) for v in message.values]


# By class name (the classes live in the generated google.protobuf module).
JSON_OF: dict[str, Convert] = {
    "Struct": struct_json,
    "Value": value_json,
    "ListValue": list_json,
}


def _b64(value: bytes) -> str:
    return b64encode(value).decode("ascii")


_UNWRAPPED: dict[str, Convert | None] = {
    "Timestamp": rfc3339,
    "Duration": duration,
    "DoubleValue": double_json,
    "FloatValue": float32_json,
    "Int64Value": str,
    "UInt64Value": str,
    "BytesValue": _b64,
    "Int32Value": None,
    "UInt32Value": None,
    "BoolValue": None,
    "StringValue": None,
}


def is_well_known(cls: Any) -> bool:
    """Whether ``cls`` is a class of betterproto2's generated ``google.protobuf`` module."""
    return isinstance(cls, type) and cls.__module__.endswith("google.protobuf")


def unwrapped_json(wrapper: type) -> Convert | None:
    """The JSON of a value betterproto2 unwrapped from the message class ``wrapper``; None
    when it is written as it is."""
    try:
        return _UNWRAPPED[wrapper.__name__]
    except KeyError:
        raise TypeError(f"no JSON for the unwrapped type {wrapper.__name__}") from None


# Reading them.

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})"
)
_DURATION = re.compile(r"(-)?(\d+)(?:\.(\d{1,9}))?s")


def parse_rfc3339(text: str) -> datetime.datetime:
    """A Timestamp's JSON (``2024-05-01T12:00:00.25Z``, or with an offset) as an aware
    datetime in UTC; raises ``ValueError`` saying what is expected."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(f"expected an RFC 3339 time such as 2024-05-01T12:00:00Z, got {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micros = int((m.group(7) or "0").ljust(9, "0")) // 1000
    zone = m.group(8)
    offset = datetime.timedelta(0)
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    try:
        when = datetime.datetime(
            year, month, day, hour, minute, second, micros, datetime.timezone(offset)
        )
        return when.astimezone(datetime.UTC)
    except (ValueError, OverflowError) as e:
        raise ValueError(f"not a time: {text!r} ({e})") from None


def parse_duration(text: str) -> datetime.timedelta:
    """A Duration's JSON (``"1.5s"``, ``"-0.25s"``)."""
    m = _DURATION.fullmatch(text)
    if m is None:
        raise ValueError(f"expected a duration such as 1.5s, got {text!r}")
    micros = int(m.group(2)) * 1_000_000 + int((m.group(3) or "0").ljust(9, "0")) // 1000
    try:
        return datetime.timedelta(microseconds=-micros if m.group(1) else micros)
    except OverflowError:
        raise ValueError(f"duration out of range: {text!r}") from None
