"""Fast protobuf encoding and decoding for the betterproto2-generated ``v1`` messages.

betterproto2 interprets its field metadata on every call: ``bytes(message)`` enters
``warnings.catch_warnings`` for each field to build its default, writes each varint through a
fresh ``BytesIO``, and ``parse`` wraps every field in a ``ParsedField``. That made a 12-field
``v1.Job`` cost ~1.6 ms to encode, so listing 1,000 jobs spent over a second in serialization.

This module reads the same metadata once per class and turns it into a *plan*: for encoding,
one small writer per field with its tag bytes precomputed; for decoding, a dict from the
full tag (field number and wire type) to a reader that stores the value. The bytes written are
identical to betterproto2's (declaration order, zero values of non-optional fields left out,
map entries always carrying both key and value, unknown fields written back at the end), and
decoding builds the same messages ``parse`` does, so the two can be mixed freely on the wire.

A class whose metadata uses something this module does not implement (wrapped well-known
types) gets no plan and is handed to betterproto2 itself. ``WireCodec`` plugs all of this
into grpclib, for servers and channels alike.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
import warnings
from collections.abc import Callable
from typing import Any

import betterproto2
from grpclib.encoding.base import CodecBase

__all__ = ["WireCodec", "decode", "encode"]

# A writer appends a field's wire bytes to ``parts``; a reader parses one field's payload
# from ``data`` at ``pos`` into ``values`` and returns the position after it.
_Writer = Callable[[Any, list[bytes]], None]
_Reader = Callable[[bytes, int, int, dict[str, Any]], int]

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_U64 = (1 << 64) - 1
_SMALL = [bytes((n,)) for n in range(128)]

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


class _Unsupported(Exception):
    """A field kind this module leaves to betterproto2."""


def _varint(n: int) -> bytes:
    """``n`` as a protobuf varint; negatives are sign-extended to ten bytes, as int32/64 are."""
    if 0 <= n < 0x80:
        return _SMALL[n]
    if n < 0:
        if n < -(1 << 63):
            raise ValueError(f"{n} does not fit in 64 bits")
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it (the slow path of the inlined reads)."""
    result = 0
    shift = 0
    while True:
        try:
            b = data[pos]
        except IndexError:
            raise ValueError("truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than ten bytes")


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
            v = _to_int64(v)
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
        namespace: dict[str, Any] = {"_varint": _varint, "_encode": encode}
        self.readers: dict[int, _Reader] = {}
        self.template: dict[str, Any] = {}
        self.lists: list[str] = []
        self.dicts: list[str] = []
        for name, fmeta in meta.meta_by_field_name.items():
            if fmeta.unwrap is not None:
                raise _Unsupported(f"{cls.__name__}.{name} wraps a well-known type")
            by_presence = bool(fmeta.optional or fmeta.group)
            if fmeta.repeated:
                self.lists.append(name)
                self.template[name] = None
            elif fmeta.proto_type == betterproto2.TYPE_MAP:
                self.dicts.append(name)
                self.template[name] = None
            elif by_presence or fmeta.proto_type == betterproto2.TYPE_MESSAGE:
                by_presence = True
                self.template[name] = None
            else:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", category=DeprecationWarning)
                    self.template[name] = meta.default_gen[name]()
            writer = _field(cls, name, fmeta, self.readers)
            n = len(namespace)
            namespace[f"W{n}"] = writer
            lines.append(f"    v = d[{name!r}]")
            lines.append("    if v is not None:" if by_presence else "    if v:")
            lines.append("        " + _inline(fmeta, n, namespace))
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


def _field(cls: type, name: str, fmeta: Any, readers: dict[int, _Reader]) -> _Writer:
    """The writer for one field; registers its readers (by full tag) in ``readers``."""
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
        readers[(number << 3) | wire_type] = _fast_store(name, ptype, sub_cls) or _store(
            name, read_one
        )
        return _single_writer(key, encode_one)
    readers[(number << 3) | wire_type] = _append(name, read_one)
    if ptype in _VARINT_TYPES or ptype in _FIXED_FORMATS:
        packed_key = _key(number, _LEN)
        readers[(number << 3) | _LEN] = _packed_reader(name, ptype, sub_cls)
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


def _inline(fmeta: Any, n: int, namespace: dict[str, Any]) -> str:
    """Source for writing the non-default value ``v`` of field ``n`` into ``parts``.

    Common singular kinds are written inline; the rest call the field's writer ``W<n>``.
    """
    ptype = fmeta.proto_type
    if fmeta.repeated or ptype == betterproto2.TYPE_MAP:
        return f"W{n}(v, parts)"
    if ptype in _VARINT_TYPES and ptype not in (
        betterproto2.TYPE_SINT32,
        betterproto2.TYPE_SINT64,
    ):
        namespace[f"K{n}"] = _key(fmeta.number, _VARINT)
        return f"parts += (K{n}, _varint(v))"
    if ptype in _FIXED_FORMATS:
        code, wire_type, _ = _FIXED_FORMATS[ptype]
        namespace[f"K{n}"] = _key(fmeta.number, wire_type)
        namespace[f"P{n}"] = struct.Struct("<" + code).pack
        return f"parts += (K{n}, P{n}(v))"
    namespace[f"K{n}"] = _key(fmeta.number, _LEN)
    if ptype == betterproto2.TYPE_STRING:
        return f"b = v.encode(); parts += (K{n}, _varint(len(b)), b)"
    if ptype == betterproto2.TYPE_BYTES:
        return f"parts += (K{n}, _varint(len(v)), v)"
    if ptype == betterproto2.TYPE_MESSAGE:
        return f"b = _encode(v); parts += (K{n}, _varint(len(b)), b)"
    return f"W{n}(v, parts)"


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
                raise ValueError("length-delimited field runs past the end of its message")
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


def _len_prefix(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(start, stop) of the length-delimited payload at ``pos``, checked against ``end``."""
    n = data[pos] if pos < end else 0x80
    if n < 0x80:
        pos += 1
    else:
        n, pos = _read_varint(data, pos)
    stop = pos + n
    if stop > end:
        raise ValueError("length-delimited field runs past the end of its message")
    return pos, stop


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
    if ptype in _FIXED_FORMATS:
        code, wire_type, size = _FIXED_FORMATS[ptype]
        packer = struct.Struct("<" + code)
        pack, unpack_from = packer.pack, packer.unpack_from

        def enc_fixed(v: Any, parts: list[bytes]) -> None:
            parts.append(pack(v))

        def dec_fixed(data: bytes, pos: int, end: int) -> tuple[Any, int]:
            if pos + size > end:
                raise ValueError("fixed-width field runs past the end of its message")
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
            return _decode(cls, data, start, stop), stop

        return enc_msg, _LEN, dec_msg
    raise _Unsupported(f"proto type {ptype!r}")


def _packed_reader(name: str, ptype: str, sub_cls: type | None) -> _Reader:
    """Reads a packed run of numbers into the list ``values[name]``."""
    if ptype in _FIXED_FORMATS:
        code, _, size = _FIXED_FORMATS[ptype]

        def read_fixed(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
            start, stop = _len_prefix(data, pos, end)
            count, extra = divmod(stop - start, size)
            if extra:
                raise ValueError("packed field is not a whole number of values")
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
            raise ValueError("packed varints run past the end of their field")
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
    key_key, value_key = _SMALL[key_tag], _SMALL[value_tag]
    field_key = _key(fmeta.number, _LEN)
    entry_readers: dict[int, _Reader] = {
        key_tag: _store("key", dec_key),
        value_tag: _store("value", dec_value),
    }
    entry_cls = cls._betterproto.cls_by_field[name]  # type: ignore[attr-defined]
    key_default = entry_cls._betterproto.default_gen["key"]()
    value_default = entry_cls._betterproto.default_gen["value"]()

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
        _parse_fields(entry_readers, data, start, stop, entry)
        values[name][entry["key"]] = entry["value"]
        return stop

    readers[(fmeta.number << 3) | _LEN] = read_entry
    return write_map


# Plans, built on first use; None marks a class left to betterproto2.
_plans: dict[type, _Plan | None] = {}
_plans_lock = threading.Lock()


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


def encode(message: Any) -> bytes:
    """``bytes(message)`` for a betterproto2 message, byte for byte, only faster."""
    cls = type(message)
    plan = _plans[cls] if cls in _plans else _plan(cls)
    if plan is None:
        return bytes(message)
    return plan.encode(message)


def decode(cls: type, data: bytes | bytearray | memoryview) -> Any:
    """``cls.parse(data)``, only faster: unknown fields are kept as betterproto2 keeps them."""
    if type(data) is not bytes:
        data = bytes(data)
    return _decode(cls, data, 0, len(data))


def _decode(cls: type, data: bytes, pos: int, end: int) -> Any:
    plan = _plans[cls] if cls in _plans else _plan(cls)
    if plan is None:
        return cls.parse(data[pos:end])  # type: ignore[attr-defined]
    values = plan.template.copy()
    for name in plan.lists:
        values[name] = []
    for name in plan.dicts:
        values[name] = {}
    unknown = _parse_fields(plan.readers, data, pos, end, values)
    if unknown:
        values["_unknown_fields"] = unknown
    if plan.plain:
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
        reader = readers.get(tag)
        if reader is not None:
            pos = reader(data, pos, end, values)
            continue
        wire_type = tag & 7
        if wire_type == _VARINT:
            _, pos = _read_varint(data, pos)
        elif wire_type == _FIXED64:
            pos += 8
        elif wire_type == _LEN:
            _, pos = _len_prefix(data, pos, end)
        elif wire_type == _FIXED32:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire_type} (field {tag >> 3})")
        if tag >> 3 == 0:
            raise ValueError("field number 0 is invalid")
        unknown.append(data[start:pos])
    if pos > end:
        raise ValueError("field runs past the end of its message")
    return b"".join(unknown)


class WireCodec(CodecBase):
    """grpclib's ``proto`` codec, with betterproto2 messages going through this module.

    Anything else (a pre-encoded payload with ``SerializeToString``, a google.protobuf
    message) is handled exactly as grpclib's own ``ProtoCodec`` would.
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
            return decode(message_type, data)
        return message_type.FromString(data)
