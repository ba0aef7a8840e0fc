"""The ``v1`` messages in protobuf's JSON mapping, fast: ``to_dict`` writes one, ``parse``
reads one (``_protojson_parse``).

betterproto's own ``to_dict`` resolves every class's type hints on every call, about 2 ms
a message: 1,000 log lines took 2 s. This encoder makes one plan per message class from the
same field metadata and then only walks values.

The shapes are the proto3 JSON mapping as the official runtime writes it (``MessageToDict(
always_print_fields_with_no_presence=True)``, held to it by tests/unit/test_wire_oracle.py):
keys in lowerCamelCase (each field's ``json_name``), 64-bit integers as strings, enums by
name (numbers when unknown), bytes in base64, NaN and infinities as strings, floats in their
shortest float32 form, and the well-known types as ``_protojson_wkt`` writes them (times in
RFC 3339, a Struct as the JSON object it holds). Two differences are intended, both as
Determined's gateway writes its JSON: every field's key is present, ``null`` where a field
with presence (a message, a oneof member, an ``optional`` scalar) is unset, so that a reader
never meets a missing key; and a Struct's whole numbers are written as integers (``100``,
not ``100.0``), so that a script reading a config gets ints.

``to_dict(message, snake=True)`` keys by the fields' own names instead (the CLI's ``--json``).
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Callable
from typing import Any

import betterproto2

from determined.common import _protojson_wkt as wkt
from determined.common._protojson_parse import ParseError, json_name, parse, parse_query

__all__ = ["ParseError", "json_name", "parse", "parse_query", "to_dict"]

Convert = Callable[[Any], Any]
_Plan = list[tuple[str, str, Convert]]

_INT64 = frozenset(betterproto2.INT_64_TYPES)
_plans: dict[tuple[type, bool], _Plan] = {}


def _enum(enum_type: Any) -> Convert:
    def convert(value: Any) -> Any:
        member = enum_type(value)
        if not member.name:
            return member.value
        return member.proto_name or member.name

    return convert


def _scalar(proto_type: str, field_type: Any, unwrap: Any, snake: bool) -> Convert | None:
    """The conversion for one value of a type; None means "as it is"."""
    if unwrap is not None:
        return wkt.unwrapped_json(unwrap())
    if proto_type == betterproto2.TYPE_MESSAGE:
        if wkt.is_well_known(field_type) and field_type.__name__ in wkt.JSON_OF:
            return wkt.JSON_OF[field_type.__name__]
        return _dict_of(field_type, snake)
    if proto_type in _INT64:
        return str
    if proto_type == betterproto2.TYPE_BYTES:
        return lambda v: b64encode(v).decode("ascii")
    if proto_type == betterproto2.TYPE_ENUM:
        return _enum(field_type)
    if proto_type == betterproto2.TYPE_FLOAT:
        return wkt.float32_json
    if proto_type == betterproto2.TYPE_DOUBLE:
        return wkt.double_json
    return None


def _dict_of(cls: type, snake: bool) -> Convert:
    """``to_dict`` for messages of ``cls`` (planned on first use: classes can nest)."""

    def convert(message: Any) -> dict[str, Any]:
        plan = _plans.get((cls, snake))
        if plan is None:
            plan = _plan(cls, snake)
        return {key: c(getattr(message, name)) for name, key, c in plan}

    return convert


def _field(meta: Any, hint: Any, snake: bool) -> Convert:
    if meta.proto_type == betterproto2.TYPE_MAP:
        key_meta, value_meta = meta.map_meta
        key = _scalar(key_meta.proto_type, hint.__args__[0], None, snake) or (lambda k: k)
        value = _scalar(value_meta.proto_type, hint.__args__[1], value_meta.unwrap, snake) or (
            lambda v: v
        )
        return lambda m: {key(k): value(v) for k, v in m.items()}
    item_type = hint.__args__[0] if (meta.repeated or meta.optional) else hint
    one = _scalar(meta.proto_type, item_type, meta.unwrap, snake)
    if meta.repeated:
        if one is None:
            return list
        convert_one = one
        return lambda values: [convert_one(v) for v in values]
    if one is None:
        return lambda v: v
    convert = one
    return lambda v: None if v is None else convert(v)


def _plan(cls: type, snake: bool) -> _Plan:
    hints = cls._type_hints()  # type: ignore[attr-defined]
    plan: _Plan = []
    for name, meta in cls._betterproto.meta_by_field_name.items():  # type: ignore[attr-defined]
        key = name.rstrip("_") if snake else json_name(name)
        plan.append((name, key, _field(meta, hints[name], snake)))
    _plans[(cls, snake)] = plan
    return plan


def to_dict(message: betterproto2.Message, *, snake: bool = False) -> dict[str, Any]:
    """``message`` as a JSON object (keys in lowerCamelCase, or as named with ``snake``)."""
    cls = type(message)
    plan = _plans.get((cls, snake))
    if plan is None:
        plan = _plan(cls, snake)
    return {key: convert(getattr(message, name)) for name, key, convert in plan}
