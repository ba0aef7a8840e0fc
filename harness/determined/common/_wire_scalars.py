"""How betterproto2's scalar field types look on the wire, for ``determined.common.wire``.

Which types are varints, the fixed-width types' ``struct`` formats, the table of small varints
the encoders index, float32 conversions that keep a NaN's bits, and each varint type's
conversions to and from the varint's integer.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import betterproto2

from determined.common._protowire import (
    _FIXED32,
    _FIXED64,
    _to_bool,
    _to_int32,
    _to_int64,
    _to_uint32,
    _to_uint64,
    _unzigzag32,
    _unzigzag64,
    _zigzag,
)

# Every varint below 2**14, made once (~0.7 MiB, ~2 ms): lengths, steps, ids and tags are
# nearly all that small, and indexing a list is a fifth of an encoding's time cheaper than
# computing them. (Here, not in _protowire: tasks, which encode little, skip making it.)
_VARINTS = [bytes((n,)) for n in range(0x80)] + [
    bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(0x80, 0x4000)
]

_VARINT_TYPES = {
    betterproto2.TYPE_INT32,
    betterproto2.TYPE_INT64,
    betterproto2.TYPE_UINT32,
    betterproto2.TYPE_UINT64,
    betterproto2.TYPE_SINT32,
    betterproto2.TYPE_SINT64,
    betterproto2.TYPE_BOOL,
    betterproto2.TYPE_ENUM,
}
_FIXED_FORMATS = {
    betterproto2.TYPE_DOUBLE: ("d", _FIXED64, 8),
    betterproto2.TYPE_FLOAT: ("f", _FIXED32, 4),
    betterproto2.TYPE_FIXED64: ("Q", _FIXED64, 8),
    betterproto2.TYPE_SFIXED64: ("q", _FIXED64, 8),
    betterproto2.TYPE_FIXED32: ("I", _FIXED32, 4),
    betterproto2.TYPE_SFIXED32: ("i", _FIXED32, 4),
}

# struct's "f" widens a float32 to a double (and narrows it back) with C casts, which on x86
# set a NaN's quiet bit: a signaling NaN read and written again would come back quiet. The
# official runtime keeps a float32's bits, so a NaN goes through these instead (a NaN is
# rare, so the common case stays struct's): its sign and mantissa are moved bit for bit into
# the double's sign and the top of its mantissa, through "<Q" and "<d", which copy bits and
# do no arithmetic.
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")


def _f32_nan(bits: int) -> float:
    """The double for the float32 NaN ``bits``, its payload and signaling bit kept."""
    return float(
        _F64.unpack(_U64.pack((bits >> 31) << 63 | 0x7FF << 52 | (bits & 0x7FFFFF) << 29))[0]
    )


def _f32_nan_bytes(v: float) -> bytes:
    """The float32 bytes for the NaN ``v``: the top 23 bits of its mantissa (and its sign).

    A mantissa whose top bits are all zero gets the quiet bit, so a NaN never becomes infinity.
    """
    (bits,) = _U64.unpack(_F64.pack(v))
    return _U32.pack((bits >> 63) << 31 | 0xFF << 23 | ((bits >> 29) & 0x7FFFFF or 0x400000))


def _f32_bytes(v: float) -> bytes:
    return _F32.pack(v) if v == v else _f32_nan_bytes(v)


def _f32s(data: bytes, start: int, count: int) -> Any:
    """``count`` float32s from ``data[start:]``; NaNs keep their bits."""
    values = struct.unpack_from(f"<{count}f", data, start)
    s = sum(values)  # NaN if a value is (or if inf meets -inf: a false alarm, still right)
    if s != s:
        words = struct.unpack_from(f"<{count}I", data, start)
        values = tuple(_f32_nan(w) if v != v else v for v, w in zip(values, words, strict=True))
    return values


def _f32s_bytes(values: Any) -> bytes:
    body = struct.pack(f"<{len(values)}f", *values)
    s = sum(values)  # as in _f32s
    if s != s:
        body = b"".join([_f32_bytes(v) for v in values])
    return body


def _varint_codec(
    proto_type: str, enum_cls: type | None
) -> tuple[Callable[[int], int], Callable[[int], Any]]:
    """(python value -> varint integer, varint integer -> python value) for ``proto_type``."""
    to_wire: Callable[[int], int] = int
    if proto_type in (betterproto2.TYPE_SINT32, betterproto2.TYPE_SINT64):
        to_wire = _zigzag
    if proto_type == betterproto2.TYPE_ENUM:
        assert enum_cls is not None
        members: dict[Any, Any] = enum_cls._value2member_map_  # type: ignore[attr-defined]
        make: Callable[[int], Any] = enum_cls

        def to_enum(v: int) -> Any:
            v = _to_int32(v)  # enums are int32 on the wire
            member = members.get(v)
            return make(v) if member is None else member

        return to_wire, to_enum
    from_wire: dict[str, Callable[[int], Any]] = {
        betterproto2.TYPE_INT32: _to_int32,
        betterproto2.TYPE_INT64: _to_int64,
        betterproto2.TYPE_UINT32: _to_uint32,
        betterproto2.TYPE_UINT64: _to_uint64,
        betterproto2.TYPE_SINT32: _unzigzag32,
        betterproto2.TYPE_SINT64: _unzigzag64,
        betterproto2.TYPE_BOOL: _to_bool,
    }
    return to_wire, from_wire[proto_type]
