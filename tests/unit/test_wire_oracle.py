"""``wire`` and ``protojson`` held to the official protobuf runtime as their oracle.

The oracle is ``google.protobuf`` (upb) with message classes that grpc_tools' protoc builds at
test time from the ``.proto`` files the generated ``v1`` code comes from (api/proto); they are
loaded into a private descriptor pool, so no generated protobuf code is committed and nothing
is registered globally. ``KINDS`` is a test-only proto for the field kinds ``v1`` does not use
(zig-zag and fixed-width numbers, floats, maps of messages and enums, scalar oneof members,
negative enum values, recursion, the largest field number); it is compiled twice, for the
official runtime and with betterproto2's plugin as api/generate.py compiles ``v1``.

Random official messages of every ``v1`` type and of ``KINDS`` (unknown fields appended) are
checked both ways: official bytes -> ``wire.decode`` (compared field by field with the official
parse) -> ``wire.encode`` -> official parse gives the original; and the same message built as
a betterproto2 object -> ``wire.encode`` -> official parse gives the original. Hand-made bytes
pin the spec's corner cases; mutated bytes check that ``wire`` rejects exactly what the
official runtime rejects.

``protojson`` gives ``MessageToDict(always_print_fields_with_no_presence=True)`` with two
intended differences: every field's key is present, with ``null`` where a field with presence
(a message, a oneof member, an ``optional`` scalar) is unset, so that readers never meet a
missing key; and a Struct's whole numbers are integers. Both write keys in lowerCamelCase,
64-bit integers as strings and enums by name. ``protojson.parse`` reads what ``MessageToDict``
writes back into the same message, and refuses what ``ParseDict`` refuses.
"""

from __future__ import annotations

import base64
import datetime
import importlib
import importlib.util
import inspect
import json
import math
import os
import struct
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import betterproto2
import pytest
from google.protobuf import (
    descriptor,
    descriptor_pb2,
    descriptor_pool,
    json_format,
    message,
    message_factory,
)
from google.protobuf.unknown_fields import UnknownFieldSet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from determined.api.gen import v1
from determined.common import protojson, wire

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "api" / "proto"
FD = descriptor.FieldDescriptor

KINDS = """
syntax = "proto3";
package oracle;

import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Color {
  COLOR_UNSPECIFIED = 0;
  COLOR_RED = 1;
  COLOR_BLUE = 2;
  COLOR_NEGATIVE = -1;
}

message Inner {
  string name = 1;
  int64 count = 2;
  repeated int32 values = 3;
  Inner child = 4;
  map<string, string> tags = 5;
}

message Empty {}

message Kinds {
  int32 i32 = 1;
  int64 i64 = 2;
  uint32 u32 = 3;
  uint64 u64 = 4;
  sint32 s32 = 5;
  sint64 s64 = 6;
  fixed32 f32 = 7;
  fixed64 f64 = 8;
  sfixed32 sf32 = 9;
  sfixed64 sf64 = 10;
  float flt = 11;
  double dbl = 12;
  bool flag = 13;
  string text = 14;
  bytes blob = 15;
  Color color = 16;
  Inner inner = 17;
  optional int32 maybe_i32 = 18;
  optional string maybe_text = 19;
  optional Color maybe_color = 20;
  optional double maybe_dbl = 21;
  repeated int32 r_i32 = 22;
  repeated int64 r_i64 = 23;
  repeated uint64 r_u64 = 24;
  repeated sint32 r_s32 = 25;
  repeated sint64 r_s64 = 26;
  repeated fixed32 r_f32 = 27;
  repeated sfixed64 r_sf64 = 28;
  repeated float r_flt = 29;
  repeated double r_dbl = 30;
  repeated bool r_flag = 31;
  repeated Color r_color = 32;
  repeated string r_text = 33;
  repeated bytes r_blob = 34;
  repeated Inner r_inner = 35;
  repeated int32 unpacked = 36 [packed = false];
  map<string, Inner> by_name = 37;
  map<int32, string> by_i32 = 38;
  map<int64, Color> by_i64 = 39;
  map<bool, bytes> by_flag = 40;
  map<uint32, double> by_u32 = 41;
  map<sint64, sfixed32> by_s64 = 42;
  oneof choice {
    string choice_text = 43;
    int64 choice_i64 = 44;
    Inner choice_inner = 45;
    Color choice_color = 46;
    Empty choice_empty = 47;
    google.protobuf.Timestamp choice_when = 67;
  }
  Empty empty = 48;
  map<string, float> by_text = 49;
  google.protobuf.Timestamp when = 50;
  repeated google.protobuf.Timestamp whens = 51;
  map<string, google.protobuf.Timestamp> when_by_name = 52;
  google.protobuf.Duration took = 53;
  WRAPPERS
  google.protobuf.Struct doc = 63;
  google.protobuf.Value any_value = 64;
  google.protobuf.ListValue items = 65;
  repeated google.protobuf.Struct docs = 66;
  map<string, google.protobuf.Int64Value> w_by_name = 68;
  uint32 last = 536870911;
}
"""
# One field of each wrapper type, w_i32 = 54 to w_u32 = 62.
_WRAPPERS = "Int32:i32 Int64:i64 UInt64:u64 Double:dbl Float:flt Bool:flag String:text Bytes:blob"
KINDS = KINDS.replace(
    "WRAPPERS",
    "\n  ".join(
        f"google.protobuf.{kind}Value w_{name} = {54 + i};"
        for i, (kind, name) in enumerate(w.split(":") for w in f"{_WRAPPERS} UInt32:u32".split())
    ),
)

# The well-known types betterproto2 gives as Python values (a Timestamp as a datetime, a
# wrapper as its value) rather than as messages.
UNWRAPPED = {
    "google.protobuf.Timestamp",
    "google.protobuf.Duration",
    *(
        f"google.protobuf.{kind}Value"
        for kind in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool")
    ),
    "google.protobuf.StringValue",
    "google.protobuf.BytesValue",
}

# Messages fuzzed with more examples (and mutated): every kind, the agent stream, the hot paths.
FOCUS = [
    "oracle.Kinds",
    "v1.AgentMessage",
    "v1.MasterMessage",
    "v1.Checkpoint",
    "v1.Job",
    "v1.ReportTrialMetricsRequest",
    "v1.GetExperimentsRequest",
]


def _examples(n: int) -> settings:
    # Derandomized: every run (CI's clean clone included) tries the same examples, so a
    # finding shows here first rather than as a flaky CI run. A mutated Timestamp in a
    # repeated field found one mismatch once (re-encoded bytes differing from the official
    # runtime's); it is noted for the codec's next change and not yet reproduced.
    return settings(
        max_examples=n, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )


def _proto_name(cls: type[Any]) -> str:
    """The full proto name a generated class was registered under (``v1.GetRolesByIDRequest``
    for the class betterproto2 calls ``GetRolesByIdRequest``)."""
    package = cls.__module__.rsplit(".", 1)[0]
    pool = importlib.import_module(f"{package}.message_pool").default_message_pool
    return str(pool.type_to_url[cls].rsplit("/", 1)[1])


def _betterproto_classes(module: types.ModuleType, package: str) -> dict[str, type[Any]]:
    return {
        _proto_name(cls): cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, betterproto2.Message) and cls.__module__ == module.__name__
    }


V1_NAMES = sorted(_betterproto_classes(v1, "v1"))


class Protos:
    """The official classes and the betterproto2 classes, by full proto name."""

    def __init__(
        self, official: dict[str, type[message.Message]], betterproto: dict[str, type[Any]]
    ) -> None:
        self.official = official
        self.betterproto = betterproto
        self.strategies: dict[tuple[str, int], st.SearchStrategy[message.Message]] = {}

    def __repr__(self) -> str:
        return f"<{len(self.official)} message types>"

    def pair(self, name: str) -> tuple[type[message.Message], type[Any]]:
        return self.official[name], self.betterproto[name]


def _protoc(*args: str) -> None:
    # betterproto2's plugin (and the ruff it formats with) live beside this interpreter.
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", *args], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr


def _official_classes(*descriptor_sets: Path) -> dict[str, type[message.Message]]:
    """Every message of the sets, in one private pool (the well-known types they share are
    added once)."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    classes: dict[str, type[message.Message]] = {}
    for descriptor_set in descriptor_sets:
        files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes())
        for f in files.file:
            if f.name in added:
                continue
            added.add(f.name)
            pool.Add(f)
            for desc in pool.FindFileByName(f.name).message_types_by_name.values():
                classes[desc.full_name] = message_factory.GetMessageClass(desc)
    return classes


@pytest.fixture(scope="module")
def protos(tmp_path_factory: pytest.TempPathFactory) -> Protos:
    tmp = tmp_path_factory.mktemp("oracle")
    v1_set = tmp / "v1.pb"
    v1_files = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.glob("v1/*.proto"))
    _protoc(f"-I{PROTO_DIR}", f"--descriptor_set_out={v1_set}", "--include_imports", *v1_files)

    (tmp / "proto").mkdir()
    (tmp / "proto" / "kinds.proto").write_text(KINDS)
    kinds_set = tmp / "kinds.pb"
    _protoc(
        f"-I{tmp / 'proto'}",
        f"--descriptor_set_out={kinds_set}",
        "--include_imports",
        "kinds.proto",
    )
    package = "_pydet_wire_oracle_kinds"
    out = tmp / package
    out.mkdir()
    _protoc(f"-I{tmp / 'proto'}", f"--python_betterproto2_out={out}", "kinds.proto")
    spec = importlib.util.spec_from_file_location(
        package, out / "__init__.py", submodule_search_locations=[str(out)]
    )
    assert spec is not None and spec.loader is not None
    sys.modules[package] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[package])
    kinds = importlib.import_module(f"{package}.oracle")

    official = _official_classes(v1_set, kinds_set)
    betterproto = {**_betterproto_classes(v1, "v1"), **_betterproto_classes(kinds, "oracle")}
    # A stale harness/determined/api/gen shows here first (api/generate.py --check in CI).
    assert sorted(n for n in official if not n.startswith("google.")) == sorted(betterproto)
    return Protos(official, betterproto)


# Random official messages, drawn from their descriptors.

I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)
_EDGES = [0, 1, -1, 127, 128, 300, 16383, 16384, 2**31 - 1, -(2**31), 2**32 - 1]


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.sampled_from([n for n in [*_EDGES, lo, hi] if lo <= n <= hi]) | st.integers(lo, hi)


_DOUBLES = st.floats() | st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324])
SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FD.TYPE_INT32: _ints(*I32),
    FD.TYPE_SINT32: _ints(*I32),
    FD.TYPE_SFIXED32: _ints(*I32),
    FD.TYPE_INT64: _ints(*I64),
    FD.TYPE_SINT64: _ints(*I64),
    FD.TYPE_SFIXED64: _ints(*I64),
    FD.TYPE_UINT32: _ints(0, 2**32 - 1),
    FD.TYPE_FIXED32: _ints(0, 2**32 - 1),
    FD.TYPE_UINT64: _ints(0, 2**64 - 1),
    FD.TYPE_FIXED64: _ints(0, 2**64 - 1),
    FD.TYPE_BOOL: st.booleans(),
    FD.TYPE_DOUBLE: _DOUBLES,
    FD.TYPE_FLOAT: st.floats(width=32) | st.sampled_from([-0.0, math.nan, math.inf]),
    FD.TYPE_STRING: st.text() | st.sampled_from(["", "é", "日本語", "🙂", "\x00", "a" * 200]),
    FD.TYPE_BYTES: st.binary() | st.sampled_from([b"", b"\x00\xff", b"x" * 300]),
}
MAX_DEPTH = 3


def _is_map(f: descriptor.FieldDescriptor) -> bool:
    return f.message_type is not None and f.message_type.GetOptions().map_entry


def _real_oneof(f: descriptor.FieldDescriptor) -> descriptor.OneofDescriptor | None:
    """The field's oneof, unless it is the synthetic one protoc makes for ``optional``."""
    oneof = f.containing_oneof
    if oneof is None or (len(oneof.fields) == 1 and oneof.name == "_" + f.name):
        return None
    return oneof


# What a datetime and a timedelta hold: the years 1 to 9999, whole microseconds (the bytes of
# the rest are tested by hand: test_timestamps_a_datetime_cannot_hold_are_refused).
_SECONDS = (-62135596800, 253402300799)
_DURATION_SECONDS = 315576000000


@st.composite
def _timestamp(draw: st.DrawFn, cls: type[message.Message]) -> message.Message:
    seconds = draw(_ints(*_SECONDS))
    nanos = draw(st.integers(0, 999999)) * 1000
    if seconds == _SECONDS[1] and nanos:
        seconds -= 1
    return cls(seconds=seconds, nanos=nanos)


@st.composite
def _duration(draw: st.DrawFn, cls: type[message.Message]) -> message.Message:
    seconds = draw(_ints(-_DURATION_SECONDS, _DURATION_SECONDS))
    sign = -1 if seconds < 0 else 1
    return cls(seconds=seconds, nanos=sign * draw(st.integers(0, 999999)) * 1000)


def _value(protos: Protos, f: descriptor.FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if f.type == FD.TYPE_MESSAGE:
        name = f.message_type.full_name
        if name == "google.protobuf.Timestamp":
            return _timestamp(protos.official[name])
        if name == "google.protobuf.Duration":
            return _duration(protos.official[name])
        return _message(protos, name, depth + 1)
    if f.full_name == "google.protobuf.Value.number_value":
        # JSON has no NaN or infinity: the official runtime will not write them in a Value.
        return st.floats(allow_nan=False, allow_infinity=False)
    if f.type == FD.TYPE_ENUM:
        known = [v.number for v in f.enum_type.values]
        return st.sampled_from(known) | _ints(*I32)  # proto3 enums are open
    return SCALARS[f.type]


def _message(protos: Protos, name: str, depth: int = 0) -> st.SearchStrategy[message.Message]:
    """Official ``name`` messages with any subset of fields set, defaults and oneofs included."""
    cached = protos.strategies.get((name, depth))
    if cached is not None:
        return cached
    cls = protos.official[name]
    desc = cls.DESCRIPTOR
    fields: dict[str, st.SearchStrategy[Any]] = {}
    if depth <= MAX_DEPTH:
        for f in desc.fields:
            if _is_map(f):
                key_f, value_f = f.message_type.fields
                fields[f.name] = st.dictionaries(
                    _value(protos, key_f, depth), _value(protos, value_f, depth), max_size=3
                )
            elif f.is_repeated:
                fields[f.name] = st.lists(_value(protos, f, depth), max_size=4)
            elif _real_oneof(f) is None:
                fields[f.name] = _value(protos, f, depth)
        for oneof in desc.oneofs:
            members = [f for f in oneof.fields if _real_oneof(f) is not None]
            if members:
                fields[oneof.name] = st.one_of(
                    [st.tuples(st.just(f.name), _value(protos, f, depth)) for f in members]
                )

    def build(values: dict[str, Any]) -> message.Message:
        m = cls()
        for key, value in values.items():
            if key in desc.oneofs_by_name:
                key, value = value
            _set(m, desc.fields_by_name[key], value)
        return m

    # A Value holds one of its kinds (an empty one is invalid: JSON writes it as null).
    required = {}
    if name == "google.protobuf.Value":
        required["kind"] = fields.pop("kind", st.just(("null_value", 0)))
    strategy = st.fixed_dictionaries(required, optional=fields).map(build)
    protos.strategies[(name, depth)] = strategy
    return strategy


def _set(m: message.Message, f: descriptor.FieldDescriptor, value: Any) -> None:
    if _is_map(f):
        container = getattr(m, f.name)
        for k, v in value.items():
            if f.message_type.fields_by_name["value"].type == FD.TYPE_MESSAGE:
                container[k].CopyFrom(v)
            else:
                container[k] = v
    elif f.is_repeated:
        getattr(m, f.name).extend(value)
    elif f.type == FD.TYPE_MESSAGE:
        getattr(m, f.name).CopyFrom(value)
    else:
        setattr(m, f.name, value)


# Unknown fields, as a sender with a newer schema would write them.


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


@st.composite
def _unknown_fields(draw: st.DrawFn, desc: descriptor.Descriptor) -> bytes:
    taken = {f.number for f in desc.fields}
    number_st = (st.integers(1, 60) | st.integers(1, 2**29 - 1)).filter(
        lambda n: n not in taken and not 19000 <= n <= 19999
    )
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        n = draw(number_st)
        kind = draw(st.sampled_from(["varint", "fixed64", "len", "fixed32", "group"]))
        if kind == "varint":
            parts.append(_tag(n, 0) + _varint(draw(st.integers(0, 2**64 - 1))))
        elif kind == "fixed64":
            parts.append(_tag(n, 1) + draw(st.binary(min_size=8, max_size=8)))
        elif kind == "len":
            body = draw(st.binary(max_size=20))
            parts.append(_tag(n, 2) + _varint(len(body)) + body)
        elif kind == "fixed32":
            parts.append(_tag(n, 5) + draw(st.binary(min_size=4, max_size=4)))
        else:
            parts.append(_tag(n, 3) + _tag(1, 0) + b"\x07" + _tag(n, 4))
    return b"".join(parts)


# Comparing a betterproto2 object with an official message, field by field.


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _quiet(x: float) -> float:
    """The NaN ``x`` with its quiet bit set."""
    (bits,) = struct.unpack("<Q", _bits(x))
    return float(struct.unpack("<d", struct.pack("<Q", bits | 1 << 51))[0])


def _assert_same(want: message.Message, got: Any, path: str = "") -> None:
    meta = type(got)._betterproto
    name_of = {fmeta.number: name for name, fmeta in meta.meta_by_field_name.items()}
    assert_fields(want, got, name_of, path, _assert_value)


def assert_fields(
    want: message.Message,
    got: Any,
    name_of: dict[int, str],
    path: str,
    assert_value: Callable[[descriptor.FieldDescriptor, Any, Any, str], None],
) -> None:
    """``got`` (a decoded object, its field ``number`` named ``name_of[number]``) holds what
    the official ``want`` does; ``assert_value`` compares one value."""
    desc = want.DESCRIPTOR
    assert sorted(name_of) == sorted(f.number for f in desc.fields), path
    for f in desc.fields:
        where = f"{path}.{f.name}"
        value = getattr(got, name_of[f.number])
        if _is_map(f):
            expected = getattr(want, f.name)
            assert isinstance(value, dict), where
            assert set(value) == set(expected), where
            value_f = f.message_type.fields_by_name["value"]
            for k in expected:
                assert_value(value_f, expected[k], value[k], f"{where}[{k!r}]")
        elif f.is_repeated:
            expected = list(getattr(want, f.name))
            assert isinstance(value, list) and len(value) == len(expected), where
            for i, (x, y) in enumerate(zip(expected, value, strict=True)):
                assert_value(f, x, y, f"{where}[{i}]")
        elif f.has_presence and not want.HasField(f.name):
            assert value is None, f"{where}: {value!r} where the official message has none"
        else:
            assert_value(f, getattr(want, f.name), value, where)


def _assert_value(f: descriptor.FieldDescriptor, want: Any, got: Any, where: str) -> None:
    if f.type == FD.TYPE_MESSAGE and f.message_type.full_name in UNWRAPPED:
        if "value" in want.DESCRIPTOR.fields_by_name:  # a wrapper: compare as its value
            _assert_value(want.DESCRIPTOR.fields_by_name["value"], want.value, got, where)
        else:
            assert type(got) is type(_unwrapped(want)) and got == _unwrapped(want), (where, got)
    elif f.type == FD.TYPE_MESSAGE:
        assert isinstance(got, betterproto2.Message), where
        _assert_same(want, got, where)
    elif f.type == FD.TYPE_ENUM:
        assert isinstance(got, betterproto2.Enum) and int(got) == want, (where, got, want)
    elif f.type == FD.TYPE_FLOAT and want != want:
        # upb widens a float32 NaN with a C cast, which sets the quiet bit; wire keeps it
        # clear for a signaling NaN (_canonical compares the bytes, quiet bit included).
        assert type(got) is float and _bits(_quiet(got)) == _bits(want), (where, got, want)
    elif f.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        assert type(got) is float and _bits(got) == _bits(want), (where, got, want)
    else:
        assert type(got) is type(want) and got == want, (where, got, want)


def _to_betterproto(want: message.Message, cls: type[Any]) -> Any:
    """The betterproto2 object a program would build for ``want``, with its constructor."""
    desc = want.DESCRIPTOR
    meta = cls._betterproto
    kwargs: dict[str, Any] = {}
    for name, fmeta in meta.meta_by_field_name.items():
        f = desc.fields_by_number[fmeta.number]
        if _is_map(f):
            value_f = f.message_type.fields_by_name["value"]
            sub = meta.cls_by_field.get(f"{name}.value")
            kwargs[name] = {k: _python(value_f, v, sub) for k, v in getattr(want, f.name).items()}
        elif f.is_repeated:
            sub = meta.cls_by_field.get(name)
            kwargs[name] = [_python(f, v, sub) for v in getattr(want, f.name)]
        elif not f.has_presence or want.HasField(f.name):
            kwargs[name] = _python(f, getattr(want, f.name), meta.cls_by_field.get(name))
    return cls(**kwargs)


def _unwrapped(m: message.Message) -> Any:
    """What betterproto2 holds for the official well-known message ``m``."""
    name = m.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        return m.ToDatetime(tzinfo=datetime.UTC)  # type: ignore[attr-defined]
    if name == "google.protobuf.Duration":
        return m.ToTimedelta()  # type: ignore[attr-defined]
    return m.value  # type: ignore[attr-defined]


def _python(f: descriptor.FieldDescriptor, value: Any, sub: Any) -> Any:
    if f.type == FD.TYPE_MESSAGE and f.message_type.full_name in UNWRAPPED:
        return _unwrapped(value)
    if f.type == FD.TYPE_MESSAGE:
        return _to_betterproto(value, sub)
    if f.type == FD.TYPE_ENUM:
        return sub(value)
    return value


def _as_held(m: message.Message) -> bool:
    """Makes ``m`` what betterproto2 holds of it: its unwrapped well-known messages lose what
    a Python value cannot keep (nanoseconds below a microsecond, unknown fields). False when
    one does not fit a datetime or a timedelta at all (betterproto2 cannot hold it)."""
    for f in m.DESCRIPTOR.fields:
        if f.type != FD.TYPE_MESSAGE:
            continue
        if _is_map(f):
            values = list(getattr(m, f.name).values())
            f = f.message_type.fields_by_name["value"]
            if f.type != FD.TYPE_MESSAGE:
                continue
        elif f.is_repeated:
            values = list(getattr(m, f.name))
        elif m.HasField(f.name):
            values = [getattr(m, f.name)]
        else:
            continue
        for sub in values:
            name = sub.DESCRIPTOR.full_name
            if name not in UNWRAPPED:
                if not _as_held(sub):
                    return False
                continue
            sub.DiscardUnknownFields()
            if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
                try:
                    held = _unwrapped(sub)
                except (OverflowError, ValueError):
                    return False
                if name.endswith("Timestamp"):
                    sub.FromDatetime(held)  # type: ignore[attr-defined]
                else:
                    sub.FromTimedelta(held)  # type: ignore[attr-defined]
    return True


def _canonical(m: message.Message) -> bytes:
    """Equal for equal messages, unknown fields, NaN payloads and the sign of zero included."""
    return m.SerializeToString(deterministic=True)


def _names(which: str) -> list[str]:
    return ["oracle.Kinds", "oracle.Inner"] + (V1_NAMES if which == "all" else [])


# Both directions, every message type.


@pytest.mark.parametrize("name", _names("all"))
@_examples(25)
@given(data=st.data())
def test_official_bytes_decode_to_the_same_fields_and_encode_back(
    protos: Protos, name: str, data: st.DataObject
) -> None:
    official, ours = protos.pair(name)
    original = data.draw(_message(protos, name))
    encoded = original.SerializeToString() + data.draw(_unknown_fields(original.DESCRIPTOR))
    reference = official.FromString(encoded)
    decoded = wire.decode(ours, encoded)
    _assert_same(reference, decoded)
    assert _canonical(official.FromString(wire.encode(decoded))) == _canonical(reference)


@pytest.mark.parametrize("name", _names("all"))
@_examples(25)
@given(data=st.data())
def test_betterproto_objects_encode_to_what_the_official_runtime_reads(
    protos: Protos, name: str, data: st.DataObject
) -> None:
    official, ours = protos.pair(name)
    original = data.draw(_message(protos, name))
    built = _to_betterproto(original, ours)
    parsed = official.FromString(wire.encode(built))
    assert _canonical(parsed) == _canonical(original)
    _assert_same(parsed, built)


@pytest.mark.parametrize("name", FOCUS)
@_examples(300)
@given(data=st.data())
def test_focus_messages_round_trip_both_ways(
    protos: Protos, name: str, data: st.DataObject
) -> None:
    official, ours = protos.pair(name)
    original = data.draw(_message(protos, name))
    encoded = original.SerializeToString() + data.draw(_unknown_fields(original.DESCRIPTOR))
    reference = official.FromString(encoded)
    decoded = wire.decode(ours, encoded)
    _assert_same(reference, decoded)
    assert _canonical(official.FromString(wire.encode(decoded))) == _canonical(reference)
    built = _to_betterproto(original, ours)
    assert _canonical(official.FromString(wire.encode(built))) == _canonical(original)


def _mutate(draw: st.DrawFn, data: bytes) -> bytes:
    kind = draw(st.sampled_from(["truncate", "set", "insert", "delete"]))
    at = draw(st.integers(0, len(data)))
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=6)) + data[at:]
    if kind == "delete":
        return data[:at] + data[at + draw(st.integers(1, 4)) :]
    if at == len(data):
        return data + draw(st.binary(min_size=1, max_size=2))
    return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]


@pytest.mark.parametrize("name", FOCUS)
@_examples(300)
@given(data=st.data())
def test_exactly_what_the_official_runtime_rejects_is_rejected(
    protos: Protos, name: str, data: st.DataObject
) -> None:
    official, ours = protos.pair(name)
    original = data.draw(_message(protos, name))
    encoded = original.SerializeToString() + data.draw(_unknown_fields(original.DESCRIPTOR))
    mutated = _mutate(data.draw, encoded) if encoded else data.draw(st.binary(max_size=8))
    try:
        reference = official.FromString(mutated)
    except message.DecodeError:
        with pytest.raises(wire.DecodeError):
            wire.decode(ours, mutated)
        return
    if not _as_held(reference):
        with pytest.raises(wire.DecodeError, match=r"outside the years 1 to 9999|out of range"):
            wire.decode(ours, mutated)
        return
    decoded = wire.decode(ours, mutated)
    _assert_same(reference, decoded)
    assert _canonical(official.FromString(wire.encode(decoded))) == _canonical(reference)


# The spec's corner cases, with hand-made bytes.


def _check(protos: Protos, name: str, data: bytes) -> Any:
    """``wire.decode`` of ``data`` matches the official parse (and encodes back to it)."""
    official, ours = protos.pair(name)
    reference = official.FromString(data)
    decoded = wire.decode(ours, data)
    _assert_same(reference, decoded)
    assert _canonical(official.FromString(wire.encode(decoded))) == _canonical(reference)
    return decoded


def _field(number: int, body: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(body)) + body


def test_of_two_oneof_members_on_the_wire_the_last_wins(protos: Protos) -> None:
    hello = _field(1, _field(1, b"agent-1"))
    exited = _field(4, _field(1, b"c1"))
    decoded = _check(protos, "v1.AgentMessage", hello + exited)
    assert decoded.hello is None and decoded.exited.container_id == "c1"
    decoded = _check(protos, "v1.AgentMessage", exited + hello)
    assert decoded.exited is None and decoded.hello.agent_id == "agent-1"
    # A scalar member after a message member, and back: each switch drops the other.
    text, number = _field(43, b"t"), _tag(44, 0) + _varint(5)
    decoded = _check(protos, "oracle.Kinds", _field(45, b"") + text + number)
    assert (decoded.choice_inner, decoded.choice_text, decoded.choice_i64) == (None, None, 5)
    # hello {a}, exited, hello {b}: the second hello starts afresh (it is not merged with a).
    again = _field(1, _field(2, b"host"))
    decoded = _check(protos, "v1.AgentMessage", hello + exited + again)
    assert (decoded.hello.agent_id, decoded.hello.hostname) == ("", "host")


def test_a_message_field_that_appears_twice_is_merged(protos: Protos) -> None:
    first = v1.ContainerSpec(
        image="img", bind_mounts=[v1.BindMount(host_path="/a")], labels={"a": "1", "k": "x"}
    )
    second = v1.ContainerSpec(
        force_pull=True, bind_mounts=[v1.BindMount(host_path="/b")], labels={"k": "y"}
    )
    data = _field(7, wire.encode(first)) + _field(1, b"c9") + _field(7, wire.encode(second))
    spec = _check(protos, "v1.StartContainer", data).spec
    assert (spec.image, spec.force_pull) == ("img", True)
    assert [m.host_path for m in spec.bind_mounts] == ["/a", "/b"]
    assert spec.labels == {"a": "1", "k": "y"}
    # The same, one level down and inside a oneof.
    start = _field(2, _field(7, _field(1, b"img"))) + _field(2, _field(7, _field(3, b"auth")))
    decoded = _check(protos, "v1.MasterMessage", start)
    assert decoded.start.spec is not None
    assert (decoded.start.spec.image, decoded.start.spec.registry_auth) == ("img", "auth")


def test_map_entries_merge_message_values_and_default_missing_parts(protos: Protos) -> None:
    value_1 = _field(2, _field(1, b"n"))  # value: Inner{name: "n"}
    value_2 = _field(2, _tag(2, 0) + b"\x07")  # value: Inner{count: 7}
    entries = [
        _field(37, _field(1, b"k") + value_1 + value_2),  # one entry, value given twice
        _field(37, _field(1, b"no value")),
        _field(37, value_1),  # no key: ""
        _field(38, _tag(2, 2) + b"\x01v"),  # by_i32 without key: 0
        _field(38, _tag(1, 0) + b"\x05" + _tag(1, 0) + b"\x06"),  # key twice: the last wins
        _field(39, _tag(1, 0) + b"\x03"),  # by_i64 without value: the enum's zero
        _field(40, _tag(1, 0) + b"\x01" + _tag(2, 0) + b"\x01"),  # a wrong wire type: kept
    ]
    decoded = _check(protos, "oracle.Kinds", b"".join(entries))
    assert (decoded.by_name["k"].name, decoded.by_name["k"].count) == ("n", 7)
    assert decoded.by_name["no value"] is not None
    assert decoded.by_name[""].name == "n"
    assert decoded.by_i32 == {0: "v", 6: ""}
    assert [(k, type(v)) for k, v in decoded.by_i64.items()] == [(3, type(decoded.color))]
    assert decoded.by_flag == {} and decoded._unknown_fields != b""


def test_repeated_numbers_are_read_packed_and_unpacked(protos: Protos) -> None:
    packed = _field(22, _varint(9) + b"\xff" * 9 + b"\x01")  # r_i32: 9, -1
    unpacked = _tag(22, 0) + _varint(5)
    doubles = _field(30, struct.pack("<2d", 1.5, -0.0)) + _tag(30, 1) + struct.pack("<d", 2.0)
    colors = _tag(32, 0) + b"\x02" + _field(32, b"\x01\x63")
    plain = _tag(36, 0) + b"\x04" + _field(36, b"\x05\x06")  # [packed = false], read both ways
    decoded = _check(protos, "oracle.Kinds", packed + unpacked + packed + doubles + colors + plain)
    assert decoded.r_i32 == [9, -1, 5, 9, -1]
    assert [_bits(x) for x in decoded.r_dbl] == [_bits(x) for x in (1.5, -0.0, 2.0)]
    assert decoded.r_color == [2, 1, 99]
    assert decoded.unpacked == [4, 5, 6]
    # Written packed, as proto3 does by default; a [packed = false] field too (documented).
    assert wire.encode(decoded).count(_field(36, b"\x04\x05\x06")) == 1


def test_unknown_fields_are_skipped_kept_and_written_back(protos: Protos) -> None:
    unknown = b"".join(
        [
            _tag(111, 0) + _varint(150),
            _tag(111, 1) + struct.pack("<d", 1.0),
            _field(111, b"abc"),
            _tag(111, 5) + struct.pack("<f", 1.0),
            _tag(112, 3) + _tag(1, 0) + b"\x01" + _tag(2, 3) + _tag(2, 4) + _tag(112, 4),
            _tag(2, 0) + b"\x05",  # AgentSlot.type is a string: a varint there is unknown
        ]
    )
    slot = wire.encode(v1.AgentSlot(id="j", device="n"))
    data = slot[:3] + unknown + slot[3:]
    decoded = _check(protos, "v1.AgentSlot", data)
    assert (decoded.id, decoded.type, decoded.device) == ("j", "", "n")
    official = protos.official["v1.AgentSlot"]
    assert len(UnknownFieldSet(official.FromString(wire.encode(decoded)))) == 6
    # Nested: unknown fields of a sub-message stay with it.
    nested = _field(1, _field(1, b"a") + _tag(99, 0) + b"\x01")
    hello = _check(protos, "v1.AgentMessage", nested).hello
    assert hello._unknown_fields == _tag(99, 0) + b"\x01"


def test_negative_int32_and_enums_are_ten_bytes_and_read_from_five(protos: Protos) -> None:
    official = protos.official["oracle.Kinds"]
    _, kinds = protos.pair("oracle.Kinds")
    for kwargs in [{"i32": -1}, {"i32": -(2**31)}, {"color": -1}, {"i64": -(2**63)}]:
        reference = official(**kwargs).SerializeToString()
        built = kinds(
            **{k: kinds._betterproto.cls_by_field.get(k, int)(v) for k, v in kwargs.items()}
        )
        assert wire.encode(built) == reference
        (name,) = kwargs
        number = official.DESCRIPTOR.fields_by_name[name].number
        assert len(reference) == len(_tag(number, 0)) + 10
    # Five-byte (32-bit) encodings are what some writers send; both read them as int32.
    decoded = _check(
        protos, "oracle.Kinds", b"\x08\xff\xff\xff\xff\x0f\x80\x01\xff\xff\xff\xff\x0f"
    )
    assert (decoded.i32, decoded.color) == (-1, -1)
    # Bits past the 64th are dropped; a tenth byte above 1 is still a varint.
    decoded = _check(protos, "oracle.Kinds", b"\x10" + b"\xff" * 9 + b"\x7f")
    assert decoded.i64 == -1


def test_negative_zero_is_written_like_any_other_non_default_double(protos: Protos) -> None:
    official = protos.official["oracle.Kinds"]
    _, kinds = protos.pair("oracle.Kinds")
    for kwargs in [{"dbl": -0.0}, {"flt": -0.0}, {"maybe_dbl": 0.0}, {"dbl": math.nan}]:
        assert wire.encode(kinds(**kwargs)) == official(**kwargs).SerializeToString() != b""
    assert wire.encode(kinds(dbl=0.0, flt=0.0)) == b""


# float32 NaNs (payload and signaling bit), infinities and -0.0: struct's "f" alone would
# set the quiet bit, and upb keeps the bits.
FLOAT32_BITS = [
    0x7F800001,  # signaling NaN, payload 1
    0x7FA00005,  # signaling NaN, payload 0x200005
    0x7FBFFFFF,  # signaling NaN, every payload bit
    0xFF800001,  # negative signaling NaN
    0x7FC00123,  # quiet NaN with a payload
    0xFFC00000,  # negative quiet NaN
    0x7FC00000,  # the usual NaN
    0x7F800000,  # inf
    0xFF800000,  # -inf
    0x80000000,  # -0.0
    0x3FC00000,  # 1.5
]


@pytest.mark.parametrize("bits", FLOAT32_BITS, ids=hex)
def test_float32_bits_survive_decode_and_encode(protos: Protos, bits: int) -> None:
    word = struct.pack("<I", bits)
    flt = _tag(11, 5) + word  # a singular float
    packed = _field(29, word * 2 + struct.pack("<f", 2.0))  # repeated float, packed
    unpacked = _tag(29, 5) + word  # and one element unpacked
    entry = _field(49, _field(1, b"k") + _tag(2, 5) + word)  # a map's float value
    data = flt + packed + unpacked + entry
    decoded = _check(protos, "oracle.Kinds", data)
    # The double is the float32 widened bit for bit (a NaN stays signaling if it was).
    sign, exponent, mantissa = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if exponent == 0xFF and mantissa:
        (want,) = struct.unpack("<d", struct.pack("<Q", sign << 63 | 0x7FF << 52 | mantissa << 29))
    else:
        (want,) = struct.unpack("<f", word)
    got = [decoded.flt, *decoded.r_flt, decoded.by_text["k"]]
    assert [_bits(x) for x in got] == [_bits(x) for x in [want, want, want, 2.0, want, want]]
    # Written back, the same bytes (repeated floats packed).
    expected = flt + _field(29, word * 2 + struct.pack("<f", 2.0) + word) + entry
    assert wire.encode(decoded) == expected


def test_a_nan_double_is_written_as_the_float32_nan_with_its_top_bits(protos: Protos) -> None:
    _, kinds = protos.pair("oracle.Kinds")

    def nan(bits: int) -> float:
        return float(struct.unpack("<d", struct.pack("<Q", bits))[0])

    cases = [
        (0x7FF0000020000000, 0x7F800001),  # signaling, payload in the top bits: kept
        (0xFFF4000000000000, 0xFFA00000),  # negative signaling
        (0x7FF8000000000000, 0x7FC00000),  # quiet
        (0x7FF0000000000001, 0x7FC00000),  # payload only in the low bits: quiet, not inf
        (0xFFF000001FFFFFFF, 0xFFC00000),
    ]
    for double, single in cases:
        word = struct.pack("<I", single)
        message = kinds(flt=nan(double), r_flt=[nan(double), 1.0], by_text={"k": nan(double)})
        assert wire.encode(message) == (
            _tag(11, 5)
            + word
            + _field(29, word + struct.pack("<f", 1.0))
            + _field(49, _field(1, b"k") + _tag(2, 5) + word)
        )


MALFORMED = [
    ("v1.ContainerExited", b"\x0a\x05ab", "length-delimited field runs past the end"),
    ("v1.ContainerExited", b"\x08", "truncated"),
    ("v1.ContainerExited", b"\x08\xff", "truncated varint"),
    ("v1.ContainerExited", b"\x18", "truncated input"),
    ("v1.ContainerExited", b"\x18" + b"\xff" * 10 + b"\x01", "varint longer than ten bytes"),
    ("v1.ContainerExited", b"\x29\x00\x00", "fixed-width field runs past the end"),
    ("v1.ContainerExited", b"\x69\x00\x00", "field runs past the end of its message"),
    ("v1.ContainerExited", b"\x0b", "group 1 has no end"),
    ("v1.ContainerExited", b"\x0c", "end of group 1, which was not started"),
    ("v1.ContainerExited", b"\xfb\x06\x84\x07", "group 111 ends with the end of group 112"),
    ("v1.ContainerExited", b"\x0e", "invalid wire type 6"),
    ("v1.ContainerExited", b"\x00\x01", "invalid field number 0"),
    ("v1.ContainerExited", b"\x80\x80\x80\x80\x10\x01", "field tag longer than 32 bits"),
    ("v1.ContainerExited", b"\xa0\x80\x80\x80\x80\x00\x01", "field tag longer than 32 bits"),
    ("v1.ContainerExited", b"\x0a\x01\xff", "not valid UTF-8"),
    ("v1.ContainerExited", b"\x0a\xff\xff\xff\xff\x0f", "runs past the end"),
    ("v1.GetJobsResponse", b"\x0a\x02\x0a\x05", "runs past the end"),
    ("v1.GetJobsResponse", b"\x0a\x03\x20\xff\xff\x01", "field runs past the end"),
    ("oracle.Kinds", b"\xea\x01\x03\x00\x00\x00", "packed field is not a whole number"),
    ("oracle.Kinds", b"\xb2\x01\x02\x05\xff\x01", "packed varints run past the end"),
]


@pytest.mark.parametrize(("name", "data", "reason"), MALFORMED)
def test_malformed_input_is_rejected_with_a_reason(
    protos: Protos, name: str, data: bytes, reason: str
) -> None:
    official, ours = protos.pair(name)
    with pytest.raises(message.DecodeError):
        official.FromString(data)
    short = name.split(".")[1]  # (ContainerExited: exit_code 3 is an int32, timestamp 5 a double)
    with pytest.raises(wire.DecodeError, match=f"not a valid {short}: .*{reason}"):
        wire.decode(ours, data)


# protojson against MessageToDict.


def _without_nulls(value: Any, official: Any) -> Any:
    """``protojson``'s output less its documented extra: null for unset presence fields
    (the keys that are null in ``value`` and absent from ``official``, level by level)."""
    if isinstance(value, dict) and isinstance(official, dict):
        return {
            k: _without_nulls(v, official.get(k))
            for k, v in value.items()
            if v is not None or k in official
        }
    if isinstance(value, list) and isinstance(official, list) and len(value) == len(official):
        return [_without_nulls(v, o) for v, o in zip(value, official, strict=True)]
    return value


def _whole(value: Any) -> Any:
    """Whole floats as ints: protojson writes a Struct's 100.0 as 100 (the same JSON
    number), as the Go and C++ runtimes do, where MessageToDict gives 100.0."""
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def _as_json(value: Any) -> str:
    """The JSON text a client reads (object keys are strings), in a canonical order."""
    return json.dumps(_whole(json.loads(json.dumps(value, allow_nan=False))), sort_keys=True)


@pytest.mark.parametrize("name", _names("all"))
@_examples(15)
@given(data=st.data())
def test_protojson_matches_message_to_dict(protos: Protos, name: str, data: st.DataObject) -> None:
    _, ours = protos.pair(name)
    original = data.draw(_message(protos, name))
    got = protojson.to_dict(_to_betterproto(original, ours))
    expected = json_format.MessageToDict(original, always_print_fields_with_no_presence=True)
    assert _as_json(_without_nulls(got, expected)) == _as_json(expected)
    assert set(got) == {f.json_name for f in original.DESCRIPTOR.fields}


def test_protojson_shapes(protos: Protos) -> None:
    _, kinds = protos.pair("oracle.Kinds")
    got = protojson.to_dict(
        kinds(i64=-5, u64=2**64 - 1, flt=0.1, blob=b"\xff", color=2, by_i64={3: -1})
    )
    assert (got["i64"], got["u64"], got["blob"]) == (
        "-5",
        str(2**64 - 1),
        base64.b64encode(b"\xff").decode(),
    )
    assert (got["color"], got["byI64"]) == ("COLOR_BLUE", {"3": "COLOR_NEGATIVE"})
    assert got["flt"] == 0.1  # a float32 in its shortest form, as MessageToDict writes it
    assert (got["inner"], got["maybeI32"], got["choiceText"]) == (None, None, None)
    # Keyed by the fields' own names, for the CLI's --json.
    assert protojson.to_dict(kinds(maybe_i32=3), snake=True)["maybe_i32"] == 3


UTC = datetime.UTC


def test_timestamps_a_datetime_cannot_hold_are_refused_and_nanoseconds_dropped(
    protos: Protos,
) -> None:
    official, kinds = protos.pair("oracle.Kinds")
    timestamp = protos.official["google.protobuf.Timestamp"]
    data = official(when=timestamp(seconds=5, nanos=1_999)).SerializeToString()
    assert wire.decode(kinds, data).when == datetime.datetime(1970, 1, 1, 0, 0, 5, 1, UTC)
    for seconds in (253402300800, -62135596801):
        data = official(whens=[timestamp(seconds=seconds)]).SerializeToString()
        with pytest.raises(wire.DecodeError, match=r"Timestamp .* outside the years 1 to 9999"):
            wire.decode(kinds, data)
    # A naive datetime is no instant: refused, as betterproto2 refuses it.
    with pytest.raises(ValueError, match="timezone-aware"):
        wire.encode(kinds(when=datetime.datetime(2024, 1, 1)))
    # Another timezone is the same instant.
    east = datetime.timezone(datetime.timedelta(hours=2))
    here = kinds(when=datetime.datetime(2024, 1, 1, 2, tzinfo=east))
    assert wire.decode(kinds, wire.encode(here)).when == datetime.datetime(2024, 1, 1, tzinfo=UTC)


def test_protojson_writes_well_known_types_as_the_mapping_and_determined_do(
    protos: Protos,
) -> None:
    official, kinds = protos.pair("oracle.Kinds")
    struct_cls = kinds._betterproto.cls_by_field["doc"]
    doc = {"max_trials": 100, "lr": 0.5, "big": 2.0**60, "nested": [None, True, "x", {}]}
    message = kinds(
        when=datetime.datetime(2024, 5, 1, 12, 0, 0, 250000, UTC),
        whens=[
            datetime.datetime(1, 1, 1, tzinfo=UTC),
            datetime.datetime(2024, 5, 1, 0, 0, 0, 1, UTC),
        ],
        took=datetime.timedelta(seconds=-1.5),
        w_i64=5,
        w_flt=0.1,
        doc=struct_cls.from_dict(doc),
    )
    # Through the wire, as the master's messages come: a Struct's numbers are doubles there.
    got = protojson.to_dict(wire.decode(kinds, wire.encode(message)))
    expected = json_format.MessageToDict(official.FromString(wire.encode(message)))
    assert got["when"] == expected["when"] == "2024-05-01T12:00:00.250Z"
    assert (
        got["whens"]
        == expected["whens"]
        == [
            "0001-01-01T00:00:00Z",
            "2024-05-01T00:00:00.000001Z",
        ]
    )
    assert got["took"] == expected["took"] == "-1.500s"
    assert (got["wI64"], got["wFlt"], got["wI32"]) == ("5", 0.1, None)
    assert got["doc"] == doc and type(got["doc"]["max_trials"]) is int
    assert expected["doc"]["max_trials"] == 100.0  # MessageToDict's float
    # JSON has no NaN: where the official runtime refuses to write one, it is a string.
    nan = struct_cls.from_dict({"loss": math.nan, "top": -math.inf})
    assert protojson.to_dict(kinds(doc=nan))["doc"] == {"loss": "NaN", "top": "-Infinity"}
    with pytest.raises(json_format.SerializeToJsonError, match=r"Infinity|NaN"):
        json_format.MessageToDict(official.FromString(wire.encode(kinds(doc=nan))))
