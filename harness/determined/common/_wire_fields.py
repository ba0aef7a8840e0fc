"""Per-field writers and readers for ``determined.common.wire``'s plans.

A writer appends one field's wire bytes; a reader parses one field's payload into the dict
of values a message is built from. The commonest singular kinds read their value inline;
the rest go through ``_scalar``, the (writer, wire type, reader) of one non-map value.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import betterproto2

from determined.common._protowire import (
    _FIXED32,
    _LEN,
    _VARINT,
    DecodeError,
    _len_prefix,
    _read_varint,
    _varint,
)
from determined.common._wire_scalars import (
    _F32,
    _FIXED_FORMATS,
    _U32,
    _VARINT_TYPES,
    _f32_nan,
    _f32_nan_bytes,
    _f32s,
    _varint_codec,
)
from determined.common.wire import _decode, _Unsupported, encode

# A writer appends a field's wire bytes to ``parts``; a reader parses one field's payload
# from ``data`` at ``pos`` into ``values`` and returns the position after it.
_Writer = Callable[[Any, list[bytes]], None]
_Reader = Callable[[bytes, int, int, dict[str, Any]], int]


def _single_writer(key: bytes, encode_one: _Writer) -> _Writer:
    def write(v: Any, parts: list[bytes]) -> None:
        parts.append(key)
        encode_one(v, parts)

    return write


def _store(name: str, read_one: Callable[[bytes, int, int], tuple[Any, int]]) -> _Reader:
    def read(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
        values[name], pos = read_one(data, pos, end)
        return pos

    return read


def _message_store(name: str, cls: type | None) -> _Reader:
    """A singular message field: a second occurrence is merged into the first (the spec)."""
    assert cls is not None
    sub_cls = cls

    def read(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
        start, stop = _len_prefix(data, pos, end)
        values[name] = _decode(sub_cls, data, start, stop, values[name])
        return stop

    return read


def _oneof_store(reader: _Reader, siblings: list[str]) -> _Reader:
    """A oneof member: reading it clears the others, so the last one on the wire wins."""

    def read(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
        for other in siblings:
            values[other] = None
        return reader(data, pos, end, values)

    return read


def _fast_store(name: str, ptype: str, sub_cls: type | None) -> _Reader | None:
    """Readers for the commonest singular kinds, with the value read inline (no inner call)."""
    if ptype == betterproto2.TYPE_STRING:

        def read_str(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
            n = data[pos] if pos < end else 0x80
            start = pos + 1
            stop = start + n
            if n >= 0x80 or stop > end:  # not a short string, whole: _len_prefix reads it
                start, stop = _len_prefix(data, pos, end)
            values[name] = data[start:stop].decode()
            return stop

        return read_str
    if ptype in _VARINT_TYPES and ptype != betterproto2.TYPE_ENUM:
        _, from_wire = _varint_codec(ptype, sub_cls)

        def read_varint(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
            b = data[pos]
            if b < 0x80:
                values[name] = from_wire(b)
                return pos + 1
            v, pos = _read_varint(data, pos)
            values[name] = from_wire(v)
            return pos

        return read_varint
    return None


def _append(name: str, read_one: Callable[[bytes, int, int], tuple[Any, int]]) -> _Reader:
    def read(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
        v, pos = read_one(data, pos, end)
        values[name].append(v)
        return pos

    return read


def _scalar(
    ptype: str, sub_cls: type | None
) -> tuple[_Writer, int, Callable[[bytes, int, int], tuple[Any, int]]]:
    """(value writer without the key, wire type, value reader) for one non-map value."""
    if ptype in _VARINT_TYPES:
        to_wire, from_wire = _varint_codec(ptype, sub_cls)

        if to_wire is int:

            def enc_varint(v: Any, parts: list[bytes]) -> None:
                parts.append(_varint(v))

        else:

            def enc_varint(v: Any, parts: list[bytes]) -> None:
                parts.append(_varint(to_wire(v)))

        def dec_varint(data: bytes, pos: int, end: int) -> tuple[Any, int]:
            b = data[pos]
            if b < 0x80:
                return from_wire(b), pos + 1
            v, pos = _read_varint(data, pos)
            return from_wire(v), pos

        return enc_varint, _VARINT, dec_varint
    if ptype == betterproto2.TYPE_FLOAT:
        pack_f32, unpack_f32 = _F32.pack, _F32.unpack_from

        def enc_float(v: Any, parts: list[bytes]) -> None:
            parts.append(pack_f32(v) if v == v else _f32_nan_bytes(v))

        def dec_float(data: bytes, pos: int, end: int) -> tuple[Any, int]:
            if pos + 4 > end:
                raise DecodeError("fixed-width field runs past the end of its message")
            (v,) = unpack_f32(data, pos)
            if v != v:
                v = _f32_nan(_U32.unpack_from(data, pos)[0])
            return v, pos + 4

        return enc_float, _FIXED32, dec_float
    if ptype in _FIXED_FORMATS:
        code, wire_type, size = _FIXED_FORMATS[ptype]
        packer = struct.Struct("<" + code)
        pack, unpack_from = packer.pack, packer.unpack_from

        def enc_fixed(v: Any, parts: list[bytes]) -> None:
            parts.append(pack(v))

        def dec_fixed(data: bytes, pos: int, end: int) -> tuple[Any, int]:
            if pos + size > end:
                raise DecodeError("fixed-width field runs past the end of its message")
            return unpack_from(data, pos)[0], pos + size

        return enc_fixed, wire_type, dec_fixed
    if ptype == betterproto2.TYPE_STRING:

        def enc_str(v: Any, parts: list[bytes]) -> None:
            b = v.encode()
            parts += (_varint(len(b)), b)

        def dec_str(data: bytes, pos: int, end: int) -> tuple[Any, int]:
            start, stop = _len_prefix(data, pos, end)
            return data[start:stop].decode(), stop

        return enc_str, _LEN, dec_str
    if ptype == betterproto2.TYPE_BYTES:

        def enc_bytes(v: Any, parts: list[bytes]) -> None:
            parts += (_varint(len(v)), v)

        def dec_bytes(data: bytes, pos: int, end: int) -> tuple[Any, int]:
            start, stop = _len_prefix(data, pos, end)
            return data[start:stop], stop

        return enc_bytes, _LEN, dec_bytes
    if ptype == betterproto2.TYPE_MESSAGE:
        assert sub_cls is not None
        cls = sub_cls

        def enc_msg(v: Any, parts: list[bytes]) -> None:
            b = encode(v)
            parts += (_varint(len(b)), b)

        def dec_msg(data: bytes, pos: int, end: int) -> tuple[Any, int]:
            start, stop = _len_prefix(data, pos, end)
            return _decode(cls, data, start, stop, None), stop

        return enc_msg, _LEN, dec_msg
    raise _Unsupported(f"proto type {ptype!r}")


def _packed_reader(name: str, ptype: str, sub_cls: type | None) -> _Reader:
    """Reads a packed run of numbers into the list ``values[name]``."""
    if ptype == betterproto2.TYPE_FLOAT:

        def read_floats(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
            start, stop = _len_prefix(data, pos, end)
            count, extra = divmod(stop - start, 4)
            if extra:
                raise DecodeError("packed field is not a whole number of values")
            values[name].extend(_f32s(data, start, count))
            return stop

        return read_floats
    if ptype in _FIXED_FORMATS:
        code, _, size = _FIXED_FORMATS[ptype]

        def read_fixed(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
            start, stop = _len_prefix(data, pos, end)
            count, extra = divmod(stop - start, size)
            if extra:
                raise DecodeError("packed field is not a whole number of values")
            values[name].extend(struct.unpack_from(f"<{count}{code}", data, start))
            return stop

        return read_fixed
    _, from_wire = _varint_codec(ptype, sub_cls)

    def read_varints(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
        pos, stop = _len_prefix(data, pos, end)
        out = values[name]
        while pos < stop:
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                b, pos = _read_varint(data, pos)
            out.append(from_wire(b))
        if pos != stop:
            raise DecodeError("packed varints run past the end of their field")
        return stop

    return read_varints
