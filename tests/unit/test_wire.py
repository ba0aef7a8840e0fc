"""``determined.common.wire`` must be a drop-in for betterproto2's own encoding and parsing.

Every ``v1`` message class is fuzzed: the bytes must match ``bytes(message)`` exactly and
decoding must give what ``Message.parse`` gives, because a master and clients may disagree on
which of the two they use. ``AllKinds`` below covers the field kinds ``v1`` does not use yet
(packed numbers, zig-zag and fixed-width types, maps of messages) so they stay correct too.
"""

# ruff: noqa: RUF009 (betterproto2.field is how message dataclass fields are declared)
from __future__ import annotations

import inspect
import math
import struct
from dataclasses import dataclass
from typing import Any

import betterproto2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from determined.api.gen import v1
from determined.common import wire


class Color(betterproto2.Enum):
    UNSET = 0
    RED = 1
    BLUE = 2


@dataclass(eq=False, repr=False)
class Inner(betterproto2.Message):
    name: str = betterproto2.field(1, betterproto2.TYPE_STRING)
    count: int = betterproto2.field(2, betterproto2.TYPE_INT64)


@dataclass(eq=False, repr=False)
class AllKinds(betterproto2.Message):
    ints: list[int] = betterproto2.field(1, betterproto2.TYPE_INT32, repeated=True)
    longs: list[int] = betterproto2.field(2, betterproto2.TYPE_INT64, repeated=True)
    doubles: list[float] = betterproto2.field(3, betterproto2.TYPE_DOUBLE, repeated=True)
    flags: list[bool] = betterproto2.field(4, betterproto2.TYPE_BOOL, repeated=True)
    colors: list[Color] = betterproto2.field(5, betterproto2.TYPE_ENUM, repeated=True)
    s32: int = betterproto2.field(6, betterproto2.TYPE_SINT32)
    s64: int = betterproto2.field(7, betterproto2.TYPE_SINT64)
    u32: int = betterproto2.field(8, betterproto2.TYPE_UINT32)
    u64: int = betterproto2.field(9, betterproto2.TYPE_UINT64)
    f32: int = betterproto2.field(10, betterproto2.TYPE_FIXED32)
    sf64: int = betterproto2.field(11, betterproto2.TYPE_SFIXED64)
    flt: float = betterproto2.field(12, betterproto2.TYPE_FLOAT)
    sints: list[int] = betterproto2.field(13, betterproto2.TYPE_SINT64, repeated=True)
    fixeds: list[int] = betterproto2.field(14, betterproto2.TYPE_FIXED32, repeated=True)
    inners: dict[str, Inner] = betterproto2.field(
        15,
        betterproto2.TYPE_MAP,
        map_meta=betterproto2.map_meta(betterproto2.TYPE_STRING, betterproto2.TYPE_MESSAGE),
    )
    by_id: dict[int, str] = betterproto2.field(
        16,
        betterproto2.TYPE_MAP,
        map_meta=betterproto2.map_meta(betterproto2.TYPE_INT32, betterproto2.TYPE_STRING),
    )
    color: Color = betterproto2.field(17, betterproto2.TYPE_ENUM, default_factory=lambda: Color(0))
    maybe_color: Color | None = betterproto2.field(18, betterproto2.TYPE_ENUM, optional=True)
    inner: Inner | None = betterproto2.field(1000, betterproto2.TYPE_MESSAGE, optional=True)


V1_MESSAGES = sorted(
    (
        cls
        for _, cls in inspect.getmembers(v1, inspect.isclass)
        if issubclass(cls, betterproto2.Message) and cls.__module__ == v1.__name__
    ),
    key=lambda cls: cls.__name__,
)
ALL_MESSAGES = [*V1_MESSAGES, AllKinds, Inner]

I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)
_EDGES = [0, 1, -1, 127, 128, 300, 16383, 16384]


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.sampled_from([n for n in [*_EDGES, lo, hi] if lo <= n <= hi]) | st.integers(lo, hi)


def _scalar(ptype: str, value_cls: Any, depth: int) -> st.SearchStrategy[Any]:
    t = betterproto2
    if ptype == t.TYPE_MESSAGE:
        return _message(value_cls, depth + 1)
    if ptype == t.TYPE_ENUM:
        return st.sampled_from(list(value_cls)) | st.integers(-3, 300).map(value_cls)
    simple: dict[str, st.SearchStrategy[Any]] = {
        t.TYPE_STRING: st.text() | st.sampled_from(["", "é", "日本語", "🙂"]),
        t.TYPE_BYTES: st.binary(),
        t.TYPE_BOOL: st.booleans(),
        t.TYPE_INT32: _ints(*I32),
        t.TYPE_SINT32: _ints(*I32),
        t.TYPE_SFIXED32: _ints(*I32),
        t.TYPE_INT64: _ints(*I64),
        t.TYPE_SINT64: _ints(*I64),
        t.TYPE_SFIXED64: _ints(*I64),
        t.TYPE_UINT32: _ints(0, 2**32 - 1),
        t.TYPE_FIXED32: _ints(0, 2**32 - 1),
        t.TYPE_UINT64: _ints(0, 2**64 - 1),
        t.TYPE_FIXED64: _ints(0, 2**64 - 1),
        t.TYPE_DOUBLE: st.floats() | st.sampled_from([0.0, -0.0, 1.5, -2.0]),
        t.TYPE_FLOAT: st.floats(width=32),
    }
    return simple[ptype]


def _message(cls: type[betterproto2.Message], depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of ``cls`` with every field drawn from its kind, defaults included."""
    if depth > 2:
        return st.just(cls())
    meta = cls._betterproto
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for name, fmeta in meta.meta_by_field_name.items():
        if fmeta.map_meta:
            kmeta, vmeta = fmeta.map_meta
            value = _scalar(vmeta.proto_type, meta.cls_by_field.get(f"{name}.value"), depth)
            fields[name] = st.dictionaries(
                _scalar(kmeta.proto_type, None, depth), value, max_size=3
            )
            continue
        item = _scalar(fmeta.proto_type, meta.cls_by_field.get(name), depth)
        if fmeta.repeated:
            fields[name] = st.lists(item, max_size=4)
        elif fmeta.optional or fmeta.group or fmeta.proto_type == betterproto2.TYPE_MESSAGE:
            fields[name] = st.none() | item
        else:
            fields[name] = st.just(meta.default_gen[name]()) | item
    return st.fixed_dictionaries({}, optional=fields).map(lambda kw: cls(**kw))


def _same(a: Any, b: Any) -> bool:
    """Deep equality that also checks types and treats NaN as equal to NaN."""
    if isinstance(a, betterproto2.Message):
        return (
            type(a) is type(b)
            and all(_same(getattr(a, n), getattr(b, n)) for n in a._betterproto.meta_by_field_name)
            and a._unknown_fields == b._unknown_fields
        )
    if type(a) is not type(b) and not (a is None and b is None):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def test_every_v1_message_gets_a_plan() -> None:
    assert len(V1_MESSAGES) > 50
    for cls in ALL_MESSAGES:
        assert wire._plan(cls) is not None, cls


@pytest.mark.parametrize("cls", ALL_MESSAGES, ids=lambda c: c.__name__)
def test_defaults_encode_to_nothing(cls: type[betterproto2.Message]) -> None:
    assert wire.encode(cls()) == bytes(cls()) == b""
    assert _same(wire.decode(cls, b""), cls())


@pytest.mark.parametrize("cls", ALL_MESSAGES, ids=lambda c: c.__name__)
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_matches_betterproto(cls: type[betterproto2.Message], data: st.DataObject) -> None:
    message = data.draw(_message(cls))
    expected = bytes(message)
    assert wire.encode(message) == expected
    decoded = wire.decode(cls, expected)
    assert _same(decoded, cls.parse(expected))
    assert decoded.to_dict() == cls.parse(expected).to_dict()
    assert wire.encode(decoded) == expected


def test_hand_filled_job_round_trips() -> None:
    job = v1.Job(
        job_id="exp-1",
        type="EXPERIMENT",
        name="naïve 🙂",
        priority=-5,
        weight=1.5,
        submission_time=1700000000.125,
        acquired_slots=0,
        needed_slots=2**31 - 1,
        state="QUEUED",
        username="root",
        resource_pool="default",
        entity_id=-(2**31),
    )
    data = wire.encode(job)
    assert data == bytes(job)
    assert _same(wire.decode(v1.Job, data), job)


def test_enums_decode_to_their_class() -> None:
    request = v1.GetExperimentsRequest(states=[v1.State(1), v1.State(0), v1.State(77)])
    data = wire.encode(request)
    assert data == bytes(request)
    states = wire.decode(v1.GetExperimentsRequest, data).states
    assert [type(s) for s in states] == [v1.State] * 3
    assert states == [1, 0, 77]


def test_optional_zero_values_are_present() -> None:
    optional = [
        (cls, name, fmeta)
        for cls in V1_MESSAGES
        for name, fmeta in cls._betterproto.meta_by_field_name.items()
        if fmeta.optional and fmeta.proto_type != betterproto2.TYPE_MESSAGE
    ]
    assert optional
    for cls, name, fmeta in optional:
        zero = {"string": "", "bool": False, "double": 0.0}.get(fmeta.proto_type, 0)
        message = cls(**{name: zero})
        data = wire.encode(message)
        assert data == bytes(message) != b""
        assert getattr(wire.decode(cls, data), name) == zero
        assert getattr(wire.decode(cls, b""), name) is None


def test_oneof_members_and_empty_submessages_are_written() -> None:
    groups = [cls for cls in V1_MESSAGES if cls._betterproto.oneof_field_by_group]
    assert groups
    for cls in groups:
        for fields in cls._betterproto.oneof_field_by_group.values():
            for f in fields:
                member_cls = cls._betterproto.cls_by_field[f.name]
                message = cls(**{f.name: member_cls()})
                data = wire.encode(message)
                assert data == bytes(message) != b""
                decoded = wire.decode(cls, data)
                assert betterproto2.which_one_of(decoded, f.metadata["betterproto"].group)[0] == (
                    f.name
                )


def test_packed_and_unpacked_numbers_both_decode() -> None:
    unpacked = b"".join(
        [
            b"\x08\x05",  # ints: 5
            b"\x08" + b"\xff" * 9 + b"\x01",  # ints: -1, sign-extended
            b"\x19" + struct.pack("<d", 2.5),  # doubles: 2.5
            b"\x20\x01",  # flags: True
            b"\x28\x02",  # colors: BLUE
            b"\x68\x03",  # sints: -2 (zig-zag)
            b"\x75" + struct.pack("<I", 7),  # fixeds: 7
        ]
    )
    packed = bytes(AllKinds(ints=[9], doubles=[1.0], flags=[False], colors=[Color.RED]))
    data = packed + unpacked + packed
    decoded = wire.decode(AllKinds, data)
    assert _same(decoded, AllKinds.parse(data))
    assert decoded.ints == [9, 5, -1, 9]
    assert decoded.doubles == [1.0, 2.5, 1.0]
    assert decoded.flags == [False, True, False]
    assert decoded.colors == [Color.RED, Color.BLUE, Color.RED]
    assert decoded.sints == [-2]
    assert decoded.fixeds == [7]


def test_unknown_fields_are_skipped_and_kept() -> None:
    unknown = b"".join(
        [
            b"\xf8\x06\x96\x01",  # field 111, varint 150
            b"\xf9\x06" + struct.pack("<d", 1.0),  # field 111, fixed64
            b"\xfa\x06\x03abc",  # field 111, length-delimited
            b"\xfd\x06" + struct.pack("<f", 1.0),  # field 111, fixed32
            b"\x12\x05hello",  # Job.type is a string: a varint there is not ours
        ]
    )
    job = v1.Job(job_id="j", name="n")
    data = bytes(job)[:3] + unknown + bytes(job)[3:]
    decoded = wire.decode(v1.Job, data)
    assert (decoded.job_id, decoded.type, decoded.name) == ("j", "hello", "n")
    expected = v1.Job.parse(data)
    assert _same(decoded, expected)
    assert wire.encode(decoded) == bytes(expected)


def test_nested_unknown_fields_and_map_entries() -> None:
    entry = b"\x0a\x01k\x10\x07\x18\x09"  # key "k", value 7, an unknown field 3
    data = b"\x42" + bytes([len(entry)]) + entry + b"\x42\x00"  # and an all-default entry
    decoded = wire.decode(v1.Checkpoint, data)
    assert decoded.resources == {"k": 7, "": 0}
    assert _same(decoded, v1.Checkpoint.parse(data))


@pytest.mark.parametrize(
    "data",
    [b"\x0a\x05ab", b"\x08", b"\x08\xff", b"\x69\x00\x00", b"\x0b", b"\x0a\xff\xff\xff\xff\x0f"],
)
def test_malformed_input_raises(data: bytes) -> None:
    with pytest.raises(ValueError):
        wire.decode(v1.Job, data)


def test_codec() -> None:
    codec = wire.WireCodec()
    job = v1.Job(job_id="x", priority=3)
    assert codec.__content_subtype__ == "proto"
    assert codec.encode(job, v1.Job) == bytes(job)
    assert _same(codec.decode(bytes(job), v1.Job), job)
    with pytest.raises(TypeError):
        codec.encode(job, v1.Experiment)

    class Raw:
        def SerializeToString(self) -> bytes:
            return b"raw"

        @classmethod
        def FromString(cls, data: bytes) -> bytes:
            return data[::-1]

    assert codec.encode(Raw(), Raw) == b"raw"
    assert codec.decode(b"ab", Raw) == b"ba"
