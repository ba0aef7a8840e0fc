"""Fast protobuf encoding and decoding for the betterproto2-generated ``v1`` messages.

betterproto2 interprets its field metadata on every call: ``bytes(message)`` enters
``warnings.catch_warnings`` for each field to build its default, writes each varint through a
fresh ``BytesIO``, and ``parse`` wraps every field in a ``ParsedField``. That made a 12-field
``v1.Job`` cost ~1.6 ms to encode, so listing 1,000 jobs spent over a second in serialization.

This module reads the same metadata once per class and turns it into a *plan*: for encoding,
one straight-line function per class with its tag bytes precomputed; for decoding, a dict from
the full tag (field number and wire type) to a reader that stores the value.

It follows the protobuf encoding spec (https://protobuf.dev/programming-guides/encoding/), and
tests/unit/test_wire_oracle.py holds it to the official runtime (``google.protobuf`` built from
the same ``.proto`` files). Where betterproto2 departs from the spec, this module does not:

- of several members of one oneof on the wire, the last one wins (betterproto2 keeps them all);
- a singular message field that appears more than once is merged into one, as the spec asks,
  also inside a oneof and as a map value (betterproto2 keeps the last); a map entry without a
  value holds an empty message, not None;
- an implicit-presence double or float of -0.0 is written (only +0.0 is the default);
- a float's NaN keeps its float32 bits, payload and signaling bit included (struct's "f"
  sets the quiet bit);
- enums are read as int32, like int32 fields (``ff ff ff ff 0f`` is -1, not 4294967295);
- unknown fields, groups included, are skipped and kept, and written back after the known
  fields, as the official runtime does;
- malformed input raises ``DecodeError`` (a ``ValueError``) with a reason, never a stray
  ``IndexError``, and ``WireCodec`` answers it with ``INVALID_ARGUMENT``;
- encoding a message with two members of one oneof set raises ``ValueError`` (no protobuf
  message can hold both; writing both would let the receiver silently keep one).

Repeated numbers are always written packed, the proto3 default (a ``[packed = false]`` option
is not in betterproto2's metadata); both forms are read. A class whose metadata uses something
this module does not implement (wrapped well-known types) gets no plan and is handed to
betterproto2 itself. ``WireCodec`` plugs all of this into grpclib, for servers and channels.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import threading
import warnings
from collections.abc import Callable
from typing import Any

import betterproto2
from grpclib.const import Status
from grpclib.encoding.base import CodecBase
from grpclib.exceptions import GRPCError

from determined.common._protowire import (
    _FIXED32,
    _FIXED64,
    _LEN,
    _VARINT,
    DecodeError,
    _key,
    _len_prefix,
    _read_varint,
    _skip,
    _to_bool,
    _to_int32,
    _to_int64,
    _to_uint32,
    _to_uint64,
    _unzigzag32,
    _unzigzag64,
    _varint,
    _zigzag,
)

__all__ = ["DecodeError", "WireCodec", "decode", "encode"]

# A writer appends a field's wire bytes to ``parts``; a reader parses one field's payload
# from ``data`` at ``pos`` into ``values`` and returns the position after it.
_Writer = Callable[[Any, list[bytes]], None]
_Reader = Callable[[bytes, int, int, dict[str, Any]], int]

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


class _Unsupported(Exception):
    """A field kind this module leaves to betterproto2."""


class _KeepUnknown(Exception):
    """Raised by a reader whose field (up to ``stop``) is kept as the unknown field ``raw``."""

    def __init__(self, stop: int, raw: bytes) -> None:
        self.stop = stop
        self.raw = raw


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


class _Plan:
    """How to encode and decode one message class, derived once from its metadata."""

    __slots__ = ("cls", "dicts", "encode", "lists", "plain", "readers", "template")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        meta = cls._betterproto  # type: ignore[attr-defined]
        lines = ["def encode(message):", "    d = message.__dict__", "    parts = []"]
        namespace: dict[str, Any] = {
            "_varint": _varint,
            "_encode": encode,
            "_VARINTS": _VARINTS,
            "_encoders": _encoders,
            "_encoder": _encoder,
            "_copysign": math.copysign,
            "_oneof_error": _oneof_error,
        }
        self.readers: dict[int, _Reader] = {}
        self.template: dict[str, Any] = {}
        self.lists: list[str] = []
        self.dicts: list[str] = []
        groups: dict[str, list[str]] = {}
        for name, fmeta in meta.meta_by_field_name.items():
            if fmeta.group:
                groups.setdefault(fmeta.group, []).append(name)
        for group, members in groups.items():
            if len(members) > 1:
                present = " + ".join(f"(d[{m!r}] is not None)" for m in members)
                lines.append(f"    if {present} > 1:")
                lines.append(f"        _oneof_error(message, {group!r}, {members!r})")
        for name, fmeta in meta.meta_by_field_name.items():
            if fmeta.unwrap is not None:
                raise _Unsupported(f"{cls.__name__}.{name} wraps a well-known type")
            ptype = fmeta.proto_type
            by_presence = bool(fmeta.optional or fmeta.group)
            if fmeta.repeated:
                self.lists.append(name)
                self.template[name] = None
            elif ptype == betterproto2.TYPE_MAP:
                self.dicts.append(name)
                self.template[name] = None
            elif by_presence or ptype == betterproto2.TYPE_MESSAGE:
                by_presence = True
                self.template[name] = None
            else:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", category=DeprecationWarning)
                    self.template[name] = meta.default_gen[name]()
            siblings = [m for m in groups.get(fmeta.group or "", []) if m != name]
            writer = _field(cls, name, fmeta, self.readers, siblings)
            n = len(namespace)
            namespace[f"W{n}"] = writer
            lines.append(f"    v = d[{name!r}]")
            if by_presence:
                lines.append("    if v is not None:")
            elif ptype in (betterproto2.TYPE_DOUBLE, betterproto2.TYPE_FLOAT) and not (
                fmeta.repeated
            ):
                # -0.0 is not the default: its bits are not zero, so it is written.
                lines.append("    if v or _copysign(1.0, v) < 0.0:")
            else:
                lines.append("    if v:")
            lines += ["        " + line for line in _inline(fmeta, n, namespace)]
        lines += [
            "    unknown = d.get('_unknown_fields')",
            "    if unknown:",
            "        parts.append(unknown)",
            "    return b''.join(parts)",
        ]
        # One straight-line function per class: no per-field calls or dispatch.
        exec("\n".join(lines), namespace)
        self.encode: Callable[[Any], bytes] = namespace["encode"]
        self.template["_unknown_fields"] = b""
        # Instances can be built from a filled-in __dict__ unless the class runs its own
        # __post_init__ (betterproto2's only resets ``_unknown_fields``, which we fill in).
        self.plain = (
            dataclasses.is_dataclass(cls)
            and getattr(cls, "__post_init__", None) is betterproto2.Message.__post_init__
            and "__slots__" not in cls.__dict__
        )


def _oneof_error(message: Any, group: str, members: list[str]) -> None:
    present = [m for m in members if getattr(message, m) is not None]
    raise ValueError(
        f"{type(message).__name__} has {len(present)} members of oneof {group!r} set "
        f"({', '.join(present)}); a protobuf message holds at most one"
    )


def _field(
    cls: type, name: str, fmeta: Any, readers: dict[int, _Reader], siblings: list[str]
) -> _Writer:
    """The writer for one field; registers its readers (by full tag) in ``readers``.

    ``siblings`` are the other members of the field's oneof, cleared when it is read.
    """
    number: int = fmeta.number
    ptype: str = fmeta.proto_type
    if ptype == betterproto2.TYPE_MAP:
        return _map_field(cls, name, fmeta, readers)
    sub_cls: type | None = None
    if ptype in (betterproto2.TYPE_MESSAGE, betterproto2.TYPE_ENUM):
        sub_cls = cls._betterproto.cls_by_field[name]  # type: ignore[attr-defined]
    encode_one, wire_type, read_one = _scalar(ptype, sub_cls)
    key = _key(number, wire_type)
    if not fmeta.repeated:
        reader = (
            _message_store(name, sub_cls)
            if ptype == betterproto2.TYPE_MESSAGE
            else _fast_store(name, ptype, sub_cls) or _store(name, read_one)
        )
        readers[(number << 3) | wire_type] = _oneof_store(reader, siblings) if siblings else reader
        return _single_writer(key, encode_one)
    readers[(number << 3) | wire_type] = _append(name, read_one)
    if ptype in _VARINT_TYPES or ptype in _FIXED_FORMATS:
        packed_key = _key(number, _LEN)
        readers[(number << 3) | _LEN] = _packed_reader(name, ptype, sub_cls)
        if ptype == betterproto2.TYPE_FLOAT:

            def write_floats(values: Any, parts: list[bytes]) -> None:
                body = _f32s_bytes(values)
                parts += (packed_key, _varint(len(body)), body)

            return write_floats
        if ptype in _FIXED_FORMATS:
            code = _FIXED_FORMATS[ptype][0]

            def write_fixed(values: Any, parts: list[bytes]) -> None:
                body = struct.pack(f"<{len(values)}{code}", *values)
                parts += (packed_key, _varint(len(body)), body)

            return write_fixed
        to_wire, _ = _varint_codec(ptype, sub_cls)

        def write_packed(values: Any, parts: list[bytes]) -> None:
            body = b"".join([_varint(to_wire(v)) for v in values])
            parts += (packed_key, _varint(len(body)), body)

        return write_packed

    def write_repeated(values: Any, parts: list[bytes]) -> None:
        for v in values:
            parts.append(key)
            encode_one(v, parts)

    return write_repeated


def _inline(fmeta: Any, n: int, namespace: dict[str, Any]) -> list[str]:
    """Source lines for writing the non-default value ``v`` of field ``n`` into ``parts``.

    Common kinds are written inline; the rest call the field's writer ``W<n>``. Varints
    below 2**14 (lengths, steps, ids) are looked up, not computed.
    """
    ptype = fmeta.proto_type
    if ptype == betterproto2.TYPE_MAP:
        return [f"W{n}(v, parts)"]
    prefixed = "ln = len(b); parts += (K{n}, _VARINTS[ln] if ln < 0x4000 else _varint(ln), b)"
    if fmeta.repeated:
        if ptype == betterproto2.TYPE_STRING:
            namespace[f"K{n}"] = _key(fmeta.number, _LEN)
            return ["for x in v:", "    b = x.encode(); " + prefixed.format(n=n)]
        if ptype == betterproto2.TYPE_MESSAGE:
            # Each element's class is looked up once per run of equal classes, not per call.
            namespace[f"K{n}"] = _key(fmeta.number, _LEN)
            return [
                "t = None",
                "for x in v:",
                "    if type(x) is not t:",
                "        t = type(x); e = _encoders.get(t) or _encoder(t)",
                "    b = e(x); " + prefixed.format(n=n),
            ]
        return [f"W{n}(v, parts)"]
    if ptype in _VARINT_TYPES and ptype not in (
        betterproto2.TYPE_SINT32,
        betterproto2.TYPE_SINT64,
    ):
        namespace[f"K{n}"] = _key(fmeta.number, _VARINT)
        return [f"parts += (K{n}, _VARINTS[v] if 0 <= v < 0x4000 else _varint(v))"]
    if ptype in _FIXED_FORMATS:
        code, wire_type, _ = _FIXED_FORMATS[ptype]
        namespace[f"K{n}"] = _key(fmeta.number, wire_type)
        namespace[f"P{n}"] = struct.Struct("<" + code).pack
        if ptype == betterproto2.TYPE_FLOAT:
            namespace["_f32_nan_bytes"] = _f32_nan_bytes
            return [f"parts += (K{n}, P{n}(v) if v == v else _f32_nan_bytes(v))"]
        return [f"parts += (K{n}, P{n}(v))"]
    namespace[f"K{n}"] = _key(fmeta.number, _LEN)
    if ptype == betterproto2.TYPE_STRING:
        return ["b = v.encode(); " + prefixed.format(n=n)]
    if ptype == betterproto2.TYPE_BYTES:
        return ["b = v; " + prefixed.format(n=n)]
    if ptype == betterproto2.TYPE_MESSAGE:
        return ["b = _encode(v); " + prefixed.format(n=n)]
    return [f"W{n}(v, parts)"]


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
            if n < 0x80:
                pos += 1
            else:
                n, pos = _read_varint(data, pos)
            stop = pos + n
            if stop > end:
                raise DecodeError("length-delimited field runs past the end of its message")
            values[name] = data[pos:stop].decode()
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


def _map_field(cls: type, name: str, fmeta: Any, readers: dict[int, _Reader]) -> _Writer:
    """Maps are repeated entry messages whose key (1) and value (2) are always written."""
    key_meta, value_meta = fmeta.map_meta
    if value_meta.unwrap is not None:
        raise _Unsupported(f"{cls.__name__}.{name} maps to a well-known type")
    value_cls: type | None = None
    if value_meta.proto_type in (betterproto2.TYPE_MESSAGE, betterproto2.TYPE_ENUM):
        value_cls = cls._betterproto.cls_by_field[f"{name}.value"]  # type: ignore[attr-defined]
    enc_key, key_wire, dec_key = _scalar(key_meta.proto_type, None)
    enc_value, value_wire, dec_value = _scalar(value_meta.proto_type, value_cls)
    key_tag = (1 << 3) | key_wire
    value_tag = (2 << 3) | value_wire
    key_key, value_key = _VARINTS[key_tag], _VARINTS[value_tag]
    field_key = _key(fmeta.number, _LEN)
    message_cls = value_cls if value_meta.proto_type == betterproto2.TYPE_MESSAGE else None
    entry_readers: dict[int, _Reader] = {
        key_tag: _store("key", dec_key),
        value_tag: _message_store("value", message_cls)
        if message_cls
        else _store("value", dec_value),
    }
    entry_cls = cls._betterproto.cls_by_field[name]  # type: ignore[attr-defined]
    key_default = entry_cls._betterproto.default_gen["key"]()
    # A message value's default is an empty message, made per entry (never shared); an enum
    # value's is its zero member (betterproto2's entry classes give a plain 0).
    value_default = None if message_cls else entry_cls._betterproto.default_gen["value"]()
    if value_meta.proto_type == betterproto2.TYPE_ENUM:
        value_default = _varint_codec(betterproto2.TYPE_ENUM, value_cls)[1](0)

    def write_map(mapping: Any, parts: list[bytes]) -> None:
        for k, v in mapping.items():
            entry: list[bytes] = [key_key]
            enc_key(k, entry)
            entry.append(value_key)
            enc_value(v, entry)
            body = b"".join(entry)
            parts += (field_key, _varint(len(body)), body)

    def read_entry(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
        start, stop = _len_prefix(data, pos, end)
        entry = {"key": key_default, "value": value_default}
        unknown = _parse_fields(entry_readers, data, start, stop, entry)
        if unknown:
            # An entry with fields besides its key and value (a wrong wire type, say) is not
            # applied but kept among the message's unknown fields, re-encoded, as the
            # official runtime keeps it.
            kept = entry_cls(key=entry["key"], value=entry["value"])
            kept._unknown_fields = unknown
            body = encode(kept)
            raise _KeepUnknown(stop, field_key + _varint(len(body)) + body)
        value = entry["value"]
        if value is None and message_cls is not None:
            value = _decode(message_cls, data, stop, stop, None)
        values[name][entry["key"]] = value
        return stop

    readers[(fmeta.number << 3) | _LEN] = read_entry
    return write_map


# Plans, built on first use; None marks a class left to betterproto2.
_plans: dict[type, _Plan | None] = {}
_plans_lock = threading.Lock()
# Each planned class's encoding function (``bytes`` for the classes left to betterproto2).
_encoders: dict[type, Callable[[Any], bytes]] = {}


def _plan(cls: type) -> _Plan | None:
    try:
        return _plans[cls]
    except KeyError:
        pass
    with _plans_lock:
        if cls not in _plans:
            try:
                _plans[cls] = _Plan(cls)
            except _Unsupported:
                _plans[cls] = None
        return _plans[cls]


def _encoder(cls: type) -> Callable[[Any], bytes]:
    plan = _plan(cls)
    fn: Callable[[Any], bytes] = bytes if plan is None else plan.encode
    _encoders[cls] = fn
    return fn


def encode(message: Any) -> bytes:
    """The protobuf encoding of a betterproto2 message.

    Raises ``ValueError`` for a message no protobuf runtime could hold (two members of one
    oneof set).
    """
    try:
        fn = _encoders[type(message)]
    except KeyError:
        fn = _encoder(type(message))
    return fn(message)


def decode(cls: type, data: bytes | bytearray | memoryview) -> Any:
    """The ``cls`` message encoded in ``data``; unknown fields are kept (as betterproto2 does).

    Raises ``DecodeError`` when ``data`` is not a valid encoding.
    """
    if type(data) is not bytes:
        data = bytes(data)
    try:
        return _decode(cls, data, 0, len(data), None)
    except DecodeError as e:
        reason = str(e)
    except IndexError:
        reason = "truncated input"
    except UnicodeDecodeError:
        reason = "a string field is not valid UTF-8"
    except struct.error:
        reason = "truncated fixed-width field"
    except RecursionError:
        reason = "messages nested too deeply"
    raise DecodeError(f"not a valid {cls.__name__}: {reason}")


def _decode(cls: type, data: bytes, pos: int, end: int, into: Any) -> Any:
    """The message in ``data[pos:end]``; merged into ``into`` (a message this decode made)."""
    plan = _plans[cls] if cls in _plans else _plan(cls)
    if plan is None:
        prefix = b"" if into is None else bytes(into)
        return cls.parse(prefix + data[pos:end])  # type: ignore[attr-defined]
    if into is None:
        values = plan.template.copy()
        for name in plan.lists:
            values[name] = []
        for name in plan.dicts:
            values[name] = {}
    elif plan.plain:
        values = into.__dict__
    else:
        values = {name: getattr(into, name) for name in plan.template}
    unknown = _parse_fields(plan.readers, data, pos, end, values)
    if unknown:
        values["_unknown_fields"] += unknown
    if plan.plain:
        if into is not None:
            return into
        message: Any = object.__new__(cls)
        message.__dict__ = values
        return message
    message = cls(**{k: v for k, v in values.items() if k != "_unknown_fields"})
    message._unknown_fields = values["_unknown_fields"]
    return message


def _parse_fields(
    readers: dict[int, _Reader], data: bytes, pos: int, end: int, values: dict[str, Any]
) -> bytes:
    """Reads fields in ``data[pos:end]`` into ``values``; returns the unknown ones' raw bytes."""
    unknown: list[bytes] = []
    while pos < end:
        start = pos
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _read_varint(data, pos)
            if pos - start > 5 or tag > 0xFFFFFFFF:
                raise DecodeError("field tag longer than 32 bits")
        reader = readers.get(tag)
        if reader is not None:
            try:
                pos = reader(data, pos, end, values)
                continue
            except _KeepUnknown as e:
                pos = e.stop
                unknown.append(e.raw)
                continue
        pos = _skip(data, pos, end, tag, 0)
        unknown.append(data[start:pos])
    if pos > end:
        raise DecodeError("field runs past the end of its message")
    return b"".join(unknown)


class WireCodec(CodecBase):
    """grpclib's ``proto`` codec, with betterproto2 messages going through this module.

    Bytes that do not decode are answered with ``INVALID_ARGUMENT`` naming the reason (on a
    server, grpclib would otherwise send ``UNKNOWN``; on a channel, the caller gets the same
    error for a malformed reply). Anything else (a payload with ``SerializeToString``, a
    google.protobuf message) is handled exactly as grpclib's own ``ProtoCodec`` would.
    """

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        if not isinstance(message, message_type):
            raise TypeError(f"Message must be of type {message_type!r}, not {type(message)!r}")
        if isinstance(message, betterproto2.Message):
            return encode(message)
        data: bytes = message.SerializeToString()
        return data

    def decode(self, data: bytes, message_type: Any) -> Any:
        if isinstance(message_type, type) and issubclass(message_type, betterproto2.Message):
            try:
                return decode(message_type, data)
            except DecodeError as e:
                raise GRPCError(Status.INVALID_ARGUMENT, f"malformed message: {e}") from None
        return message_type.FromString(data)
