"""Plans for ``determined.common.wire``: how to encode and decode one message class.

A plan is read once from a class's betterproto2 metadata: a straight-line encoding function
(made with ``exec``, tag bytes precomputed, common kinds written inline) and a dict from each
full tag (field number and wire type) to the reader that stores its value. Maps are planned
here too, as repeated entry messages.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import warnings
from collections.abc import Callable
from typing import Any

import betterproto2

from determined.common import _wire_wkt
from determined.common._protowire import _LEN, _VARINT, _key, _len_prefix, _varint
from determined.common._wire_fields import (
    _append,
    _fast_store,
    _message_store,
    _oneof_store,
    _packed_reader,
    _Reader,
    _scalar,
    _single_writer,
    _store,
    _Writer,
)
from determined.common._wire_scalars import (
    _FIXED_FORMATS,
    _VARINT_TYPES,
    _VARINTS,
    _f32_nan_bytes,
    _f32s_bytes,
    _varint_codec,
)
from determined.common.wire import (
    _decode,
    _encoder,
    _encoders,
    _KeepUnknown,
    _parse_fields,
    encode,
)


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
    if fmeta.unwrap is not None:
        return _unwrapped_field(name, fmeta, readers, siblings)
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
    if ptype == betterproto2.TYPE_MAP or fmeta.unwrap is not None:
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


def _map_field(cls: type, name: str, fmeta: Any, readers: dict[int, _Reader]) -> _Writer:
    """Maps are repeated entry messages whose key (1) and value (2) are always written."""
    key_meta, value_meta = fmeta.map_meta
    value_cls: type | None = None
    if value_meta.proto_type in (betterproto2.TYPE_MESSAGE, betterproto2.TYPE_ENUM):
        value_cls = cls._betterproto.cls_by_field[f"{name}.value"]  # type: ignore[attr-defined]
    enc_key, key_wire, dec_key = _scalar(key_meta.proto_type, None)
    enc_value, value_wire, dec_value = _scalar(value_meta.proto_type, value_cls)
    if value_meta.unwrap is not None:
        enc_value, dec_value, value_default = _unwrapped_scalar(value_meta.unwrap())
    key_tag = (1 << 3) | key_wire
    value_tag = (2 << 3) | value_wire
    key_key, value_key = _VARINTS[key_tag], _VARINTS[value_tag]
    field_key = _key(fmeta.number, _LEN)
    unwrapped = value_meta.unwrap is not None
    message_cls = (
        value_cls if value_meta.proto_type == betterproto2.TYPE_MESSAGE and not unwrapped else None
    )
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
    if not unwrapped:
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
            kept = entry_cls(key=entry["key"], value=entry["value"])  # (never unwrapped: the
            # value's wire type is LEN, so a bad entry holds the default or a decoded value)
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


def _unwrapped_scalar(
    wrapper: type,
) -> tuple[_Writer, Callable[[bytes, int, int], tuple[Any, int]], Any]:
    """(value writer without the key, value reader, default) for a value that betterproto2
    unwraps from the message ``wrapper`` (a map's value)."""
    to_body, to_value, _ = _wire_wkt.conversions(wrapper, encode)

    def enc(v: Any, parts: list[bytes]) -> None:
        body = to_body(v)
        parts += (_varint(len(body)), body)

    def dec(data: bytes, pos: int, end: int) -> tuple[Any, int]:
        start, stop = _len_prefix(data, pos, end)
        return to_value(_decode(wrapper, data, start, stop, None)), stop

    return enc, dec, to_value(wrapper())


def _unwrapped_field(
    name: str, fmeta: Any, readers: dict[int, _Reader], siblings: list[str]
) -> _Writer:
    """A field whose message betterproto2 unwraps (``datetime`` for a Timestamp, ``int`` for
    an Int32Value, ...): written and read as that message, held as the plain value."""
    wrapper: type = fmeta.unwrap()
    to_body, to_value, to_message = _wire_wkt.conversions(wrapper, encode)
    key = _key(fmeta.number, _LEN)
    tag = (fmeta.number << 3) | _LEN
    if fmeta.repeated:
        enc, dec, _ = _unwrapped_scalar(wrapper)
        readers[tag] = _append(name, dec)

        def write_all(values: Any, parts: list[bytes]) -> None:
            for v in values:
                parts.append(key)
                enc(v, parts)

        return write_all

    def read(data: bytes, pos: int, end: int, values: dict[str, Any]) -> int:
        start, stop = _len_prefix(data, pos, end)
        old = values[name]
        into = None if old is None else to_message(old)  # a second occurrence merges
        values[name] = to_value(_decode(wrapper, data, start, stop, into))
        return stop

    readers[tag] = _oneof_store(read, siblings) if siblings else read

    def write(v: Any, parts: list[bytes]) -> None:
        body = to_body(v)
        parts += (key, _varint(len(body)), body)

    return write
