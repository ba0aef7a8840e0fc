"""The ``v1`` API for code inside tasks: the same messages and calls, light to import.

The betterproto2-generated ``determined.api.gen.v1`` (with betterproto2, pydantic and
grpclib's server) takes a few hundred milliseconds to import, and every trial paid that twice
(its launcher and its script) for a handful of calls. This module builds message classes on
first use from ``v1_schema`` (tables generated from the same ``.proto`` files, see
api/generate.py) and encodes them with ``_protowire``; ``determined.api.channel`` carries
them, so the master sees the same gRPC calls.

    from determined.api import lite as v1

    request = v1.GetCurrentSearcherOperationRequest(trial_id=7)
    response = v1.stub(channel.unary).get_current_searcher_operation(request)
    response.op.length

Messages behave like the generated ones where tasks use them: keyword construction, fields as
attributes, ``None`` for an unset message or ``optional`` field, lists and dicts for repeated
and map fields, enums as plain ints. Unknown fields are skipped; malformed bytes raise
``DecodeError``. tests/unit/test_lite_oracle.py holds the codec to the official runtime.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from determined.api.gen import v1_schema
from determined.common import _protowire as pw
from determined.common._protowire import DecodeError

__all__ = [
    "DecodeError",
    "Message",
    "enum_name",
    "enum_value",
    "message_class",
    "plain",
    "seconds",
    "struct_of",
    "stub",
    "timestamp",
]

_FIXED = {
    "double": ("<d", pw._FIXED64, 8),
    "float": ("<f", pw._FIXED32, 4),
    "fixed64": ("<Q", pw._FIXED64, 8),
    "sfixed64": ("<q", pw._FIXED64, 8),
    "fixed32": ("<I", pw._FIXED32, 4),
    "sfixed32": ("<i", pw._FIXED32, 4),
}
_FROM_VARINT: dict[str, Callable[[int], Any]] = {
    "int32": pw._to_int32,
    "enum": pw._to_int32,
    "int64": pw._to_int64,
    "uint32": pw._to_uint32,
    "uint64": pw._to_uint64,
    "sint32": pw._unzigzag32,
    "sint64": pw._unzigzag64,
    "bool": pw._to_bool,
}
_DEFAULTS: dict[str, Any] = {"string": "", "bytes": b"", "bool": False, "message": None}


def _sint32(v: int) -> int:
    return ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF


_TO_VARINT: dict[str, Callable[[Any], int]] = {
    "sint32": _sint32,
    "sint64": pw._zigzag,
    "bool": int,
    "uint32": lambda v: v & 0xFFFFFFFF,
    "uint64": lambda v: v & ((1 << 64) - 1),
}


def _zero(kind: str) -> Any:
    return 0.0 if kind in ("double", "float") else _DEFAULTS.get(kind, 0)


class _Field:
    """One field of a message: how to write it, how to read it, its default."""

    __slots__ = (
        "default",
        "fixed",
        "kind",
        "map",
        "name",
        "number",
        "oneof",
        "presence",
        "repeated",
        "siblings",
        "type_name",
    )

    def __init__(self, row: Sequence[Any]) -> None:
        name, number, kind, type_name, repeated, presence, oneof = row
        self.name: str = name
        self.number: int = number
        self.kind: str = kind
        self.map: tuple[Any, ...] | None = type_name if kind == "map" else None
        self.type_name: str | None = None if kind == "map" else type_name
        self.repeated: bool = repeated
        self.presence: bool = presence
        self.oneof: str = oneof
        self.siblings: tuple[str, ...] = ()
        self.fixed = _FIXED.get(kind)
        self.default: Any = None if presence else _zero(kind)

    def empty(self) -> Any:
        if self.map is not None:
            return {}
        if self.repeated:
            return []
        return self.default


class Message:
    """A ``v1`` message; subclasses are made by ``message_class``."""

    _fields: tuple[_Field, ...] = ()
    _by_number: dict[int, _Field] = {}  # replaced per subclass

    def __init__(self, *args: Any, **values: Any) -> None:
        """Fields by keyword, or the first ones positionally in the ``.proto``'s order."""
        if len(args) > len(self._fields):
            raise TypeError(f"{type(self).__name__} has {len(self._fields)} fields")
        for f in self._fields:
            self.__dict__[f.name] = f.empty()
        for f, value in zip(self._fields, args, strict=False):
            self.__dict__[f.name] = value
        for name, value in values.items():
            if name not in self.__dict__:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            self.__dict__[name] = value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({args})"

    def SerializeToString(self) -> bytes:  # protobuf's name
        parts: list[bytes] = []
        _write(self, parts)
        return b"".join(parts)

    @classmethod
    def FromString(cls, data: bytes) -> Any:  # protobuf's name
        """The message encoded in ``data``; raises ``DecodeError`` for malformed bytes."""
        data = bytes(data)
        try:
            return _read(cls, data, 0, len(data))
        except DecodeError:
            raise
        except (IndexError, struct.error):
            raise DecodeError(f"not a valid {cls.__name__}: truncated input") from None
        except UnicodeDecodeError:
            raise DecodeError(f"not a valid {cls.__name__}: a string is not UTF-8") from None
        except RecursionError:
            raise DecodeError(f"not a valid {cls.__name__}: nested too deeply") from None


_classes: dict[str, type[Message]] = {}


def message_class(name: str) -> type[Message]:
    """The class of the ``v1`` message ``name`` (made on first use)."""
    cls = _classes.get(name)
    if cls is None:
        rows = v1_schema.MESSAGES.get(name)
        if rows is None:
            raise AttributeError(f"v1 has no message {name!r}")
        fields = tuple(_Field(r) for r in rows)
        for f in fields:
            if f.oneof:
                f.siblings = tuple(g.name for g in fields if g.oneof == f.oneof and g is not f)
        namespace = {"_fields": fields, "_by_number": {f.number: f for f in fields}}
        cls = type(name, (Message,), namespace)
        _classes[name] = cls
    return cls


def __getattr__(name: str) -> type[Message]:
    # `lite.GetCheckpointRequest`, as `v1.GetCheckpointRequest`.
    if name[:1].isupper():
        return message_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Encoding.


def _scalar(kind: str, value: Any) -> bytes:
    fixed = _FIXED.get(kind)
    if fixed is not None:
        packed: bytes = struct.pack(fixed[0], value)
        return packed
    if kind == "string":
        data: bytes = value.encode()
        return pw._varint(len(data)) + data
    if kind == "bytes":
        return pw._varint(len(value)) + bytes(value)
    return pw._varint(_TO_VARINT.get(kind, int)(value))


def _wire_type(kind: str) -> int:
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed[1]
    return pw._LEN if kind in ("string", "bytes", "message") else pw._VARINT


def _is_default(f: _Field, value: Any) -> bool:
    if f.fixed is not None and f.kind in ("double", "float"):
        return bool(value == 0 and math.copysign(1.0, value) > 0)
    return bool(value == f.default)


def _submessage(value: Message) -> bytes:
    data = value.SerializeToString()
    return pw._varint(len(data)) + data


def _write(message: Message, parts: list[bytes]) -> None:
    values = message.__dict__
    for f in message._fields:
        value = values[f.name]
        if f.map is not None:
            _write_map(f, value, parts)
        elif f.repeated:
            if not value:
                continue
            if f.kind in ("string", "bytes", "message"):
                key = pw._key(f.number, pw._LEN)
                for v in value:
                    parts.append(key)
                    parts.append(_submessage(v) if f.kind == "message" else _scalar(f.kind, v))
            else:
                packed = b"".join(_scalar(f.kind, v) for v in value)
                parts += (pw._key(f.number, pw._LEN), pw._varint(len(packed)), packed)
        elif f.presence:
            if value is None:
                continue
            if f.oneof and any(values[s] is not None for s in f.siblings):
                raise ValueError(
                    f"{type(message).__name__}: more than one member of oneof {f.oneof} is set"
                )
            parts.append(pw._key(f.number, _wire_type(f.kind)))
            parts.append(_submessage(value) if f.kind == "message" else _scalar(f.kind, value))
        elif not _is_default(f, value):
            parts.append(pw._key(f.number, _wire_type(f.kind)))
            parts.append(_scalar(f.kind, value))


def _write_map(f: _Field, mapping: Mapping[Any, Any], parts: list[bytes]) -> None:
    assert f.map is not None
    key_kind, value_kind, value_type = f.map
    key_tag = pw._key(1, _wire_type(key_kind))
    value_tag = pw._key(2, _wire_type(value_kind))
    for k, v in mapping.items():
        value = _submessage(v) if value_type else _scalar(value_kind, v)
        entry = key_tag + _scalar(key_kind, k) + value_tag + value
        parts += (pw._key(f.number, pw._LEN), pw._varint(len(entry)), entry)


# Decoding.


def _read_one(kind: str, type_name: str | None, data: bytes, pos: int, end: int) -> Any:
    """The value of one ``kind`` field at ``pos``, and the position after it."""
    fixed = _FIXED.get(kind)
    if fixed is not None:
        stop = pos + fixed[2]
        if stop > end:
            raise DecodeError("truncated fixed-width field")
        return struct.unpack(fixed[0], data[pos:stop])[0], stop
    if kind in ("string", "bytes", "message"):
        start, stop = pw._len_prefix(data, pos, end)
        if kind == "string":
            return data[start:stop].decode(), stop
        if kind == "bytes":
            return data[start:stop], stop
        assert type_name is not None
        return _read(message_class(type_name), data, start, stop), stop
    v, pos = pw._read_varint(data, pos)
    return _FROM_VARINT[kind](v), pos


def _read(cls: type[Message], data: bytes, pos: int, end: int) -> Message:
    message = cls()
    values = message.__dict__
    by_number = cls._by_number
    while pos < end:
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = pw._read_tag(data, pos)
        f = by_number.get(tag >> 3)
        wire_type = tag & 7
        if f is None:
            pos = pw._skip(data, pos, end, tag, 0)
        elif f.map is not None and wire_type == pw._LEN:
            start, pos = pw._len_prefix(data, pos, end)
            entry = _read_entry(f, data, start, pos)
            if entry is not None:
                values[f.name][entry[0]] = entry[1]
        elif f.repeated and wire_type == pw._LEN and f.kind not in ("string", "bytes", "message"):
            start, pos = pw._len_prefix(data, pos, end)
            while start < pos:
                v, start = _read_one(f.kind, None, data, start, pos)
                values[f.name].append(v)
            if start != pos:
                raise DecodeError("packed field runs past its length")
        elif f.map is None and wire_type == _wire_type(f.kind):
            v, pos = _read_one(f.kind, f.type_name, data, pos, end)
            if f.repeated:
                values[f.name].append(v)
            else:
                if f.kind == "message" and values[f.name] is not None:
                    v = _merge(values[f.name], v)
                values[f.name] = v
                for s in f.siblings:
                    values[s] = None
        else:
            pos = pw._skip(data, pos, end, tag, 0)
    if pos > end:
        raise DecodeError("field runs past the end of its message")
    return message


def _merge(old: Message, new: Message) -> Message:
    """A singular message field seen twice is one message, merged (the spec's rule)."""
    merged: Message = type(old).FromString(old.SerializeToString() + new.SerializeToString())
    return merged


def _read_entry(f: _Field, data: bytes, pos: int, end: int) -> tuple[Any, Any] | None:
    """A map entry's key and value; None for an entry with other fields (a wrong wire type,
    say), which the official runtime keeps among the unknown fields and lite skips."""
    assert f.map is not None
    key_kind, value_kind, value_type = f.map
    key: Any = _zero(key_kind)
    value: Any = message_class(value_type)() if value_type else _zero(value_kind)
    skipped = False
    while pos < end:
        tag, pos = pw._read_varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if number == 1 and wire_type == _wire_type(key_kind):
            key, pos = _read_one(key_kind, None, data, pos, end)
        elif number == 2 and wire_type == _wire_type(value_kind):
            value, pos = _read_one(value_kind, value_type, data, pos, end)
        else:
            pos = pw._skip(data, pos, end, tag, 0)
            skipped = True
    if pos > end:
        raise DecodeError("map entry runs past its length")
    return None if skipped else (key, value)


# Well-known types: lite keeps them as messages; these convert the ones tasks use.

_MAX_EXACT = 2**53


def struct_of(value: Mapping[str, Any] | None) -> Message:
    """A ``google.protobuf.Struct`` holding ``value`` (JSON-like data)."""
    fields = {str(k): _value(v) for k, v in (value or {}).items()}
    return message_class("google.protobuf.Struct")(fields=fields)


def _value(v: Any) -> Message:
    cls = message_class("google.protobuf.Value")
    if v is None:
        return cls(null_value=0)
    if isinstance(v, bool):
        return cls(bool_value=v)
    if isinstance(v, int | float):
        return cls(number_value=float(v))
    if isinstance(v, str):
        return cls(string_value=v)
    if isinstance(v, Mapping):
        return cls(struct_value=struct_of(v))
    if isinstance(v, list | tuple):
        return cls(
            list_value=message_class("google.protobuf.ListValue")(values=[_value(x) for x in v])
        )
    raise TypeError(f"not a JSON value: {v!r}")


def plain(value: Any) -> dict[str, Any]:
    """The mapping a ``google.protobuf.Struct`` holds ({} for None), whole numbers as ints."""
    if value is None:
        return {}
    return {k: _plain(v) for k, v in value.fields.items()}


def _plain(v: Any) -> Any:
    if v.number_value is not None:
        n = v.number_value
        return int(n) if math.isfinite(n) and n.is_integer() and abs(n) <= _MAX_EXACT else n
    if v.string_value is not None:
        return v.string_value
    if v.bool_value is not None:
        return v.bool_value
    if v.struct_value is not None:
        return plain(v.struct_value)
    if v.list_value is not None:
        return [_plain(x) for x in v.list_value.values]
    return None


def timestamp(seconds: float) -> Message:
    """A ``google.protobuf.Timestamp`` of ``seconds`` since the epoch (to the microsecond)."""
    micros = round(seconds * 1_000_000)
    whole, rest = divmod(micros, 1_000_000)
    return message_class("google.protobuf.Timestamp")(seconds=whole, nanos=rest * 1000)


def seconds(value: Any) -> float:
    """A ``google.protobuf.Timestamp`` as seconds since the epoch (0.0 for None)."""
    return 0.0 if value is None else value.seconds + value.nanos / 1e9


def _members(enum: str) -> list[tuple[str, int]]:
    """An enum's members by their names without the prefix they share (``COMPLETED`` for
    ``STATE_COMPLETED``)."""
    rows = v1_schema.ENUMS[enum]
    words = [str(name).split("_") for name, _ in rows]
    shared = 0
    while all(len(w) > shared + 1 and w[shared] == words[0][shared] for w in words):
        shared += 1
    return [("_".join(w[shared:]), int(number)) for w, (_, number) in zip(words, rows, strict=True)]


def enum_value(enum: str, name: str) -> int:
    """The number of member ``name`` (``COMPLETED``) of the ``v1`` enum ``enum`` (a nested
    one by betterproto2's name: ``CheckpointState``)."""
    for member, number in _members(enum):
        if member == name:
            return number
    raise ValueError(f"{enum} has no member {name!r}")


def enum_name(enum: str, number: int) -> str:
    """``COMPLETED`` for ``enum_value(enum, "COMPLETED")``; the number as text for one this
    schema does not know."""
    for member, n in _members(enum):
        if n == number:
            return member
    return str(number)


# Calls.


def _snake(name: str) -> str:
    out = [name[0].lower()]
    for c in name[1:]:
        out.append("_" + c.lower() if c.isupper() else c)
    return "".join(out)


_methods: dict[str, tuple[str, str, str, bool]] = {}


def _method(snake_name: str) -> tuple[str, str, str, bool]:
    """``(path, request type, reply type, whether the replies are a stream)``."""
    if not _methods:
        for service, methods in v1_schema.SERVICES.items():
            for name, request, response, client_streams, server_streams in methods:
                if not client_streams:
                    path = f"/{v1_schema.PACKAGE}.{service}/{name}"
                    _methods[_snake(name)] = (path, request, response, bool(server_streams))
    try:
        return _methods[snake_name]
    except KeyError:
        raise AttributeError(f"v1 has no unary or server-streaming call {snake_name!r}") from None


def make_all() -> None:
    """Make every message class and the table of calls now, instead of on first use: for a
    process that forks many clients (the agent's launcher template), whose copies then find
    them made."""
    for name in v1_schema.MESSAGES:
        message_class(name)
    _method("get_master")


Invoke = Callable[..., Any]


class Stub:
    """``v1.DeterminedStub``'s unary calls, made by ``invoke(path, request, reply_type,
    timeout=..., metadata=...)`` (``determined.api.channel.Channel.unary``, or a wrapper that
    makes it awaitable): ``stub.get_checkpoint(request, timeout=10)``; and its
    server-streaming calls, made the same way by ``stream`` (``Channel.stream``), which
    returns the replies as an iterator."""

    def __init__(
        self,
        invoke: Invoke,
        *,
        metadata: Mapping[str, str] | None = None,
        stream: Invoke | None = None,
    ) -> None:
        self._invoke = invoke
        self._stream = stream
        self._metadata = dict(metadata or {})

    def __getattr__(self, name: str) -> Callable[..., Any]:
        path, _, response, streams = _method(name)
        if streams and self._stream is None:
            raise AttributeError(f"{name} is a server stream; give the stub a stream invoker")
        reply_type = message_class(response)
        invoke = self._stream if streams and self._stream is not None else self._invoke
        metadata = self._metadata

        def call(message: Message, *, timeout: float | None = None) -> Any:
            return invoke(path, message, reply_type, timeout=timeout, metadata=metadata)

        return call


def stub(
    invoke: Invoke, *, metadata: Mapping[str, str] | None = None, stream: Invoke | None = None
) -> Stub:
    return Stub(invoke, metadata=metadata, stream=stream)
