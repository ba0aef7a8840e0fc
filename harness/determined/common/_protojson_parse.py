"""Reading a ``v1`` message from protobuf's JSON mapping, as ``json_format.ParseDict`` reads
it, with errors a person can act on (``protojson.parse``).

A field is found by its ``json_name`` (``startTime``) or its own name (``start_time``), as
the mapping allows. Unknown fields, values of the wrong type, integers out of their range,
unknown enum names, two members of one oneof and the same field given under both names are
refused with a ``ParseError`` that names the field by its path (``updates[0].priority:
expected an integer, got the string "high"``). ``null`` leaves a field unset (a Value holds
JSON null). Documents nested deeper than ``MAX_DEPTH`` are refused before they can exhaust
the stack.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Callable
from typing import Any

import betterproto2

from determined.common import _protojson_wkt as wkt

MAX_DEPTH = 64

_RANGES = {
    betterproto2.TYPE_INT32: (-(2**31), 2**31 - 1),
    betterproto2.TYPE_SINT32: (-(2**31), 2**31 - 1),
    betterproto2.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    betterproto2.TYPE_UINT32: (0, 2**32 - 1),
    betterproto2.TYPE_FIXED32: (0, 2**32 - 1),
    betterproto2.TYPE_INT64: (-(2**63), 2**63 - 1),
    betterproto2.TYPE_SINT64: (-(2**63), 2**63 - 1),
    betterproto2.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    betterproto2.TYPE_UINT64: (0, 2**64 - 1),
    betterproto2.TYPE_FIXED64: (0, 2**64 - 1),
}
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_WRAPPER_KINDS = {
    "DoubleValue": betterproto2.TYPE_DOUBLE,
    "FloatValue": betterproto2.TYPE_FLOAT,
    "Int64Value": betterproto2.TYPE_INT64,
    "UInt64Value": betterproto2.TYPE_UINT64,
    "Int32Value": betterproto2.TYPE_INT32,
    "UInt32Value": betterproto2.TYPE_UINT32,
    "BoolValue": betterproto2.TYPE_BOOL,
    "StringValue": betterproto2.TYPE_STRING,
    "BytesValue": betterproto2.TYPE_BYTES,
}


class ParseError(ValueError):
    """JSON that is not the message it was read as; ``str(e)`` names the field and the
    problem."""


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    return "an array" if isinstance(value, list) else "an object"


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _fail(path: str, problem: str) -> ParseError:
    return ParseError(f"{path or 'request body'}: {problem}")


class _Field:
    __slots__ = ("group", "meta", "name", "sub")

    def __init__(self, name: str, meta: Any, sub: Any) -> None:
        self.name = name
        self.meta = meta
        self.sub = sub  # the message or enum class, or None
        self.group: str | None = meta.group


def json_name(field_name: str) -> str:
    """A field's ``json_name`` as protoc makes it: ``start_time`` -> ``startTime``.

    ``field_name`` is betterproto2's (a keyword gets a trailing ``_``, dropped here).
    """
    out: list[str] = []
    upper = False
    for c in field_name.rstrip("_"):
        if c == "_":
            upper = True
        else:
            out.append(c.upper() if upper else c)
            upper = False
    return "".join(out)


_tables: dict[type, dict[str, _Field]] = {}


def _table(cls: type) -> dict[str, _Field]:
    """Each field of ``cls`` by its JSON name and by its own name."""
    table = _tables.get(cls)
    if table is None:
        table = {}
        info = cls._betterproto  # type: ignore[attr-defined]
        for name, meta in info.meta_by_field_name.items():
            sub = info.cls_by_field.get(name)
            if meta.proto_type == betterproto2.TYPE_MAP:
                sub = info.cls_by_field.get(f"{name}.value")
            field = _Field(name, meta, sub)
            table[json_name(name)] = field
            table[name.rstrip("_")] = field
        _tables[cls] = table
    return table


def parse(cls: type, value: Any, *, path: str = "") -> Any:
    """The ``cls`` message that the JSON value ``value`` (as ``json.loads`` gives it) holds.

    ``path`` prefixes the field paths in errors (``"webhook"``).
    """
    return _message(cls, value, path, 0)


def _message(cls: type, value: Any, path: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise _fail(path, f"nested more than {MAX_DEPTH} levels deep")
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object, got {_describe(value)}")
    table = _table(cls)
    values: dict[str, Any] = {}
    keys: dict[str, str] = {}
    groups: dict[str, str] = {}
    for key, raw in value.items():
        field = table.get(key)
        where = _at(path, key)
        if field is None:
            raise _fail(where, f"unknown field of {cls.__name__}")
        if field.name in keys:
            raise _fail(where, f"given twice (also as {keys[field.name]!r})")
        keys[field.name] = key
        if raw is None and not _holds_null(field):
            continue
        if field.group is not None:
            other = groups.get(field.group)
            if other is not None:
                raise _fail(where, f"{other!r} is already given (one of them only)")
            groups[field.group] = key
        values[field.name] = _field_value(field, raw, where, depth)
    return cls(**values)


def _holds_null(field: _Field) -> bool:
    """A singular google.protobuf.Value field reads JSON null as a Value holding null."""
    meta = field.meta
    return (
        not meta.repeated
        and meta.proto_type == betterproto2.TYPE_MESSAGE
        and wkt.is_well_known(field.sub)
        and field.sub.__name__ == "Value"
    )


def _field_value(field: _Field, raw: Any, path: str, depth: int) -> Any:
    meta = field.meta
    if meta.proto_type == betterproto2.TYPE_MAP:
        if not isinstance(raw, dict):
            raise _fail(path, f"expected an object, got {_describe(raw)}")
        key_meta, value_meta = meta.map_meta
        return {
            _map_key(key_meta.proto_type, k, path): _single(
                value_meta.proto_type, field.sub, value_meta.unwrap, v, f"{path}[{k!r}]", depth
            )
            for k, v in raw.items()
        }
    if meta.repeated:
        if not isinstance(raw, list):
            raise _fail(path, f"expected an array, got {_describe(raw)}")
        return [
            _single(meta.proto_type, field.sub, meta.unwrap, v, f"{path}[{i}]", depth)
            for i, v in enumerate(raw)
        ]
    return _single(meta.proto_type, field.sub, meta.unwrap, raw, path, depth)


def _map_key(proto_type: str, key: str, path: str) -> Any:
    if proto_type == betterproto2.TYPE_STRING:
        return key
    if proto_type == betterproto2.TYPE_BOOL:
        if key in ("true", "false"):
            return key == "true"
        raise _fail(path, f"map key {key!r} is not true or false")
    return _integer(proto_type, key, f"{path}[{key!r}]")


def _single(proto_type: str, sub: Any, unwrap: Any, raw: Any, path: str, depth: int) -> Any:
    if unwrap is not None:
        return _unwrapped(unwrap(), raw, path)
    if proto_type == betterproto2.TYPE_MESSAGE:
        if wkt.is_well_known(sub) and sub.__name__ in _DYNAMIC:
            return _DYNAMIC[sub.__name__](sub, raw, path, depth + 1)
        return _message(sub, raw, path, depth + 1)
    return _scalar(proto_type, sub, raw, path)


def _scalar(proto_type: str, enum_cls: Any, raw: Any, path: str) -> Any:
    if proto_type == betterproto2.TYPE_STRING:
        if not isinstance(raw, str):
            raise _fail(path, f"expected a string, got {_describe(raw)}")
        return raw
    if proto_type == betterproto2.TYPE_BOOL:
        if not isinstance(raw, bool):
            raise _fail(path, f"expected true or false, got {_describe(raw)}")
        return raw
    if proto_type in _RANGES:
        return _integer(proto_type, raw, path)
    if proto_type in (betterproto2.TYPE_DOUBLE, betterproto2.TYPE_FLOAT):
        return _number(proto_type, raw, path)
    if proto_type == betterproto2.TYPE_BYTES:
        if not isinstance(raw, str):
            raise _fail(path, f"expected base64 text, got {_describe(raw)}")
        try:
            text = raw.replace("-", "+").replace("_", "/")
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise _fail(path, "not valid base64") from None
    if proto_type == betterproto2.TYPE_ENUM:
        return _enum(enum_cls, raw, path)
    raise _fail(path, f"fields of type {proto_type} are not read from JSON")


def _integer(proto_type: str, raw: Any, path: str) -> int:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, str):
        try:
            value = int(raw.strip()) if raw.strip() == raw else None
        except ValueError:
            value = None
    if value is None:
        raise _fail(path, f"expected an integer, got {_describe(raw)}")
    low, high = _RANGES[proto_type]
    if not low <= value <= high:
        raise _fail(path, f"{value} is out of range ({low} to {high})")
    return value


def _number(proto_type: str, raw: Any, path: str) -> float:
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str):
        if raw in _NON_FINITE:
            return _NON_FINITE[raw]
        try:
            value = float(raw)
        except ValueError:
            value = None
        if value is not None and not math.isfinite(value):
            value = None  # "inf", "nan": not the mapping's spelling
    if value is None:
        raise _fail(path, f"expected a number, got {_describe(raw)}")
    if proto_type == betterproto2.TYPE_FLOAT and abs(value) > _FLOAT32_MAX:
        raise _fail(path, f"{value} is too large for a float")
    return value


def _enum(enum_cls: Any, raw: Any, path: str) -> Any:
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not -(2**31) <= raw < 2**31:
            raise _fail(path, f"{raw} is out of range for an enum")
        return enum_cls(raw)
    if isinstance(raw, str):
        for member in enum_cls:
            if raw in (member.proto_name, member.name) and member.name:
                return member
    names = ", ".join(m.proto_name or m.name for m in enum_cls if m.value)
    raise _fail(path, f"expected one of {names}, got {_describe(raw)}")


def _unwrapped(wrapper: type, raw: Any, path: str) -> Any:
    """A Timestamp, Duration or wrapper field, as betterproto2 holds it."""
    name = wrapper.__name__
    if name in ("Timestamp", "Duration"):
        if not isinstance(raw, str):
            raise _fail(path, f"expected a {name.lower()} as text, got {_describe(raw)}")
        try:
            return wkt.parse_rfc3339(raw) if name == "Timestamp" else wkt.parse_duration(raw)
        except ValueError as e:
            raise _fail(path, str(e)) from None
    kind = _WRAPPER_KINDS.get(name)
    if kind is None:
        raise _fail(path, f"{name} is not read from JSON")
    return _scalar(kind, None, raw, path)


def _struct(cls: type, raw: Any, path: str, depth: int) -> Any:
    if not isinstance(raw, dict):
        raise _fail(path, f"expected an object, got {_describe(raw)}")
    value_cls = cls._betterproto.cls_by_field["fields.value"]  # type: ignore[attr-defined]
    return cls(
        fields={
            str(k): _value(value_cls, v, f"{path}[{k!r}]" if path else repr(k), depth + 1)
            for k, v in raw.items()
        }
    )


def _list(cls: type, raw: Any, path: str, depth: int) -> Any:
    if not isinstance(raw, list):
        raise _fail(path, f"expected an array, got {_describe(raw)}")
    value_cls = cls._betterproto.cls_by_field["values"]  # type: ignore[attr-defined]
    return cls(values=[_value(value_cls, v, f"{path}[{i}]", depth + 1) for i, v in enumerate(raw)])


def _value(cls: type, raw: Any, path: str, depth: int) -> Any:
    """Any JSON value as a google.protobuf.Value (``cls``)."""
    if depth > MAX_DEPTH:
        raise _fail(path, f"nested more than {MAX_DEPTH} levels deep")
    if raw is None:
        null = cls._betterproto.cls_by_field["null_value"]  # type: ignore[attr-defined]
        return cls(null_value=null(0))
    if isinstance(raw, bool):
        return cls(bool_value=raw)
    if isinstance(raw, int | float):
        if not math.isfinite(raw):
            raise _fail(path, "JSON numbers are finite")
        return cls(number_value=float(raw))
    if isinstance(raw, str):
        return cls(string_value=raw)
    info = cls._betterproto  # type: ignore[attr-defined]
    if isinstance(raw, list):
        return cls(list_value=_list(info.cls_by_field["list_value"], raw, path, depth))
    if isinstance(raw, dict):
        return cls(struct_value=_struct(info.cls_by_field["struct_value"], raw, path, depth))
    raise _fail(path, f"not a JSON value: {type(raw).__name__}")


_DYNAMIC: dict[str, Callable[[type, Any, str, int], Any]] = {
    "Struct": _struct,
    "ListValue": _list,
    "Value": _value,
}


_QUERY_TRUE, _QUERY_FALSE = ("true", "1"), ("false", "0")
_SPLIT_KINDS = frozenset((betterproto2.TYPE_ENUM, *_RANGES))


def _query_scalar(proto_type: str, wrapper: str, text: str) -> Any:
    """A query parameter's text as the JSON value ``parse`` takes for the field."""
    kind = _WRAPPER_KINDS.get(wrapper, proto_type) if wrapper else proto_type
    if kind == betterproto2.TYPE_BOOL:
        lowered = text.lower()
        return True if lowered in _QUERY_TRUE else False if lowered in _QUERY_FALSE else text
    if kind == betterproto2.TYPE_ENUM and text.lstrip("-").isdigit():
        return int(text)
    return text


def parse_query(cls: type, params: dict[str, list[str]]) -> Any:
    """The ``cls`` message that a GET's query parameters describe, as Determined's gateway
    reads them: each field by either of its names, a repeated field by repeating it (or, for
    numbers and enums, by commas), ``true``/``false`` for booleans. Parameters that name no
    field of ``cls`` are left to the caller; messages other than wrappers are not read."""
    table = _table(cls)
    body: dict[str, Any] = {}
    for key, values in params.items():
        field = table.get(key)
        if field is None or not values:
            continue
        meta = field.meta
        wrapper = meta.unwrap().__name__ if meta.unwrap is not None else ""
        if meta.proto_type == betterproto2.TYPE_MAP or (
            meta.proto_type == betterproto2.TYPE_MESSAGE and not wrapper
        ):
            raise _fail(key, "cannot be given as a query parameter")
        if meta.repeated:
            if meta.proto_type in _SPLIT_KINDS:
                values = [part.strip() for v in values for part in v.split(",") if part.strip()]
            body[key] = [_query_scalar(meta.proto_type, wrapper, v) for v in values]
        else:
            body[key] = _query_scalar(meta.proto_type, wrapper, values[-1])
    return parse(cls, body)
