"""Fast protobuf encoding and decoding for the betterproto2-generated ``v1`` messages.

betterproto2 interprets its field metadata on every call: ``bytes(message)`` enters
``warnings.catch_warnings`` for each field to build its default, writes each varint through a
fresh ``BytesIO``, and ``parse`` wraps every field in a ``ParsedField``. That made a 12-field
``v1.Job`` cost ~1.6 ms to encode, so listing 1,000 jobs spent over a second in serialization.

This codec reads the same metadata once per class and turns it into a *plan*: for encoding,
one straight-line function per class with its tag bytes precomputed; for decoding, a dict from
the full tag (field number and wire type) to a reader that stores the value.

This module holds the entry points (``encode``, ``decode``, ``WireCodec``), the plans built so
far and the loop that reads a message's fields. Plans are built in ``_wire_plan`` from the
per-field writers and readers of ``_wire_fields``; ``_wire_scalars`` maps scalar types to the
wire, and ``_protowire`` holds the wire format itself (varints, tags, skipping a field).

It follows the protobuf encoding spec (https://protobuf.dev/programming-guides/encoding/), and
tests/unit/test_wire_oracle.py holds it to the official runtime (``google.protobuf`` built from
the same ``.proto`` files). Where betterproto2 departs from the spec, this codec does not:

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
is not in betterproto2's metadata); both forms are read. The well-known types betterproto2
unwraps (a Timestamp held as a ``datetime``, a wrapper as its value) are written and read as
their messages (``_wire_wkt``). A class whose metadata uses something this codec does not
implement gets no plan and is handed to betterproto2 itself. ``WireCodec`` plugs all of this
into grpclib, for servers and channels.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import betterproto2
from grpclib.const import Status
from grpclib.encoding.base import CodecBase
from grpclib.exceptions import GRPCError

from determined.common._protowire import DecodeError, _read_tag, _skip

if TYPE_CHECKING:
    from determined.common._wire_fields import _Reader
    from determined.common._wire_plan import _Plan

__all__ = ["DecodeError", "WireCodec", "decode", "encode"]


class _Unsupported(Exception):
    """A field kind this codec leaves to betterproto2."""


class _KeepUnknown(Exception):
    """Raised by a reader whose field (up to ``stop``) is kept as the unknown field ``raw``."""

    def __init__(self, stop: int, raw: bytes) -> None:
        self.stop = stop
        self.raw = raw


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
    from determined.common._wire_plan import _Plan  # it imports this module: built on first use

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
            tag, pos = _read_tag(data, pos)
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
