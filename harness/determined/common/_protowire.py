"""Protobuf's wire format, the parts every codec shares: varints, tags, length prefixes,
zig-zag and fixed-width conversions, and skipping a field that is not known.

Imports nothing but the standard library, so that ``determined.api.lite`` (what tasks use)
stays light; ``determined.common.wire`` builds its plans on the same functions.
"""

from __future__ import annotations

_VARINT, _FIXED64, _LEN, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5
_U64 = (1 << 64) - 1
_MAX_FIELD_NUMBER = (1 << 29) - 1
_MAX_DEPTH = 100  # nested groups, as the official runtime's recursion limit
_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


class DecodeError(ValueError):
    """Bytes that are not a valid protobuf encoding of the message they were read as."""


def _varint(n: int) -> bytes:
    """``n`` as a protobuf varint; negatives are sign-extended to ten bytes, as int32/64 are."""
    if n < 0x4000:
        if n >= 0:
            return _ONE_BYTE[n] if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7))
        if n < -(1 << 63):
            raise ValueError(f"{n} does not fit in 64 bits")
        n += 1 << 64
    elif n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it (the slow path of the inlined reads).

    Bits past the 64th (a tenth byte above 1) are dropped, as the official runtime does.
    """
    result = 0
    shift = 0
    while True:
        try:
            b = data[pos]
        except IndexError:
            raise DecodeError("truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & _U64, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("varint longer than ten bytes")


def _read_tag(data: bytes, pos: int) -> tuple[int, int]:
    """The field tag at ``pos`` and the position after it (the slow path of wire's inlined read).

    A tag is a varint of at most five bytes that fits in 32 bits, as the official runtime reads it.
    """
    tag, stop = _read_varint(data, pos)
    if stop - pos > 5 or tag > 0xFFFFFFFF:
        raise DecodeError("field tag longer than 32 bits")
    return tag, stop


def _key(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


# Scalar conversions: to the wire (a varint's integer) and back from it.


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def _to_int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _to_int64(v: int) -> int:
    v &= _U64
    return v - (1 << 64) if v >= 1 << 63 else v


def _to_uint32(v: int) -> int:
    return v & 0xFFFFFFFF


def _to_uint64(v: int) -> int:
    return v & _U64


def _unzigzag32(v: int) -> int:
    v &= 0xFFFFFFFF
    return (v >> 1) ^ -(v & 1)


def _unzigzag64(v: int) -> int:
    v &= _U64
    return (v >> 1) ^ -(v & 1)


def _to_bool(v: int) -> bool:
    return v > 0


def _len_prefix(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(start, stop) of the length-delimited payload at ``pos``, checked against ``end``."""
    n = data[pos] if pos < end else 0x80
    if n < 0x80:
        pos += 1
    else:
        n, pos = _read_varint(data, pos)
    stop = pos + n
    if stop > end:
        raise DecodeError("length-delimited field runs past the end of its message")
    return pos, stop


def _skip(data: bytes, pos: int, end: int, tag: int, depth: int) -> int:
    """The position after the value of the unknown field ``tag`` that starts at ``pos``."""
    number, wire_type = tag >> 3, tag & 7
    # Inside a group the official runtime only carries fields along, unchecked; so do we.
    if depth == 0 and not 0 < number <= _MAX_FIELD_NUMBER:
        raise DecodeError(f"invalid field number {number}")
    if wire_type == _VARINT:
        _, pos = _read_varint(data, pos)
    elif wire_type == _FIXED64:
        pos += 8
    elif wire_type == _LEN:
        _, pos = _len_prefix(data, pos, end)
    elif wire_type == _FIXED32:
        pos += 4
    elif wire_type == _START_GROUP:
        if depth >= _MAX_DEPTH:
            raise DecodeError("groups nested too deeply")
        while True:
            if pos >= end:
                raise DecodeError(f"group {number} has no end")
            inner, pos = _read_tag(data, pos)
            if inner & 7 == _END_GROUP:
                if inner >> 3 != number:
                    raise DecodeError(f"group {number} ends with the end of group {inner >> 3}")
                break
            pos = _skip(data, pos, end, inner, depth + 1)
    elif wire_type == _END_GROUP:
        raise DecodeError(f"end of group {number}, which was not started")
    else:
        raise DecodeError(f"invalid wire type {wire_type} (field {number})")
    if pos > end:
        raise DecodeError("field runs past the end of its message")
    return pos
