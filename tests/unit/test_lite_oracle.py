"""``determined.api.lite`` (the messages tasks use) held to the official protobuf runtime.

The oracle, its classes built at test time from api/proto, and the random messages come from
test_wire_oracle.py. Every ``v1`` message type is checked both ways: official bytes (unknown
fields appended) -> ``lite`` decode, compared field by field with the official parse -> ``lite``
encode -> official parse gives the original; and mutated bytes are rejected exactly when the
official runtime rejects them.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor, message
from hypothesis import given
from hypothesis import strategies as st

from determined.api import lite
from determined.core import _rpc
from determined.core._train import MetricRecord
from tests.unit.test_wire_oracle import (
    FD,
    FOCUS,
    V1_NAMES,
    Protos,
    _bits,
    _canonical,
    _examples,
    _field,
    _message,
    _mutate,
    _tag,
    _unknown_fields,
    assert_fields,
    protos,
)

__all__ = ["protos"]  # the fixture, shared with test_wire_oracle.py

V1_FOCUS = [name for name in FOCUS if name.startswith("v1.")]


def _lite_class(name: str) -> type[lite.Message]:
    return lite.message_class(name.split(".", 1)[1])


def _assert_same(want: message.Message, got: Any, path: str = "") -> None:
    assert isinstance(got, lite.Message), path
    assert_fields(want, got, {f.number: f.name for f in got._fields}, path, _assert_value)


def _assert_value(f: descriptor.FieldDescriptor, want: Any, got: Any, where: str) -> None:
    if f.type == FD.TYPE_MESSAGE:
        _assert_same(want, got, where)
    elif f.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        assert type(got) is float and _bits(got) == _bits(want), (where, got, want)
    else:
        assert type(got) is type(want) and got == want, (where, got, want)


def _round_trip(protos: Protos, name: str, data: bytes) -> None:
    reference = protos.official[name].FromString(data)
    decoded = _lite_class(name).FromString(data)
    _assert_same(reference, decoded)
    again = protos.official[name].FromString(decoded.SerializeToString())
    # Unknown fields are skipped by lite, so compare with the reference without them.
    reference.DiscardUnknownFields()
    assert _canonical(again) == _canonical(reference)


def _draw_bytes(protos: Protos, name: str, data: st.DataObject) -> bytes:
    """A random official ``name`` message's bytes, unknown fields appended."""
    original = data.draw(_message(protos, name))
    return original.SerializeToString() + data.draw(_unknown_fields(original.DESCRIPTOR))


@pytest.mark.parametrize("name", V1_NAMES)
@_examples(25)
@given(data=st.data())
def test_official_bytes_decode_to_the_same_fields_and_encode_back(
    protos: Protos, name: str, data: st.DataObject
) -> None:
    _round_trip(protos, name, _draw_bytes(protos, name, data))


@pytest.mark.parametrize("name", V1_FOCUS)
@_examples(200)
@given(data=st.data())
def test_exactly_what_the_official_runtime_rejects_is_rejected(
    protos: Protos, name: str, data: st.DataObject
) -> None:
    encoded = _draw_bytes(protos, name, data)
    mutated = _mutate(data.draw, encoded) if encoded else data.draw(st.binary(max_size=8))
    try:
        protos.official[name].FromString(mutated)
    except message.DecodeError:
        with pytest.raises(lite.DecodeError):
            _lite_class(name).FromString(mutated)
        return
    _round_trip(protos, name, mutated)


def test_a_map_entry_with_other_fields_is_skipped_as_the_official_runtime_does(
    protos: Protos,
) -> None:
    entry = _field(1, "æ".encode()) + _tag(2048, 0) + b"\x42"  # key, then a field 2048
    kept = _field(1, b"k") + _tag(2, 0) + b"\x07"
    data = _field(5, entry) + _field(5, kept)  # v1.Checkpoint.resources
    _round_trip(protos, "v1.Checkpoint", data)
    assert _lite_class("v1.Checkpoint").FromString(data).resources == {"k": 7}


def test_a_map_value_that_runs_past_its_entry_is_rejected(protos: Protos) -> None:
    cut = _field(1, b"") + _tag(2, 0) + b"\x80"  # the value's varint goes on past the entry
    data = _field(5, cut) + _field(5, _field(1, b"1") + _tag(2, 0) + b"\x00")
    with pytest.raises(message.DecodeError):
        protos.official["v1.Checkpoint"].FromString(data)
    with pytest.raises(lite.DecodeError):
        _lite_class("v1.Checkpoint").FromString(data)


def test_metric_reports_reach_the_master_as_sent(protos: Protos) -> None:
    records = [
        MetricRecord("training", 5, '{"loss":NaN}', 1700000000.25, ""),
        MetricRecord("validation", 0, "", 0.0, ""),
        MetricRecord("custom", 2**40, '{"é":"ü"}', -1.0, '[{"loss":1}]'),
    ]
    official = protos.official["v1.ReportTrialMetricsRequest"]
    for trial_id, run_id in [(1, 1), (0, 0), (2**31 - 1, 3), (-1, -5)]:
        request = _rpc.metrics_request(trial_id, run_id, records)
        parsed = official.FromString(request.SerializeToString())
        assert (parsed.trial_id, parsed.run_id) == (trial_id, run_id)
        got = [
            (r.group, r.steps_completed, r.metrics, r.timestamp, r.batch_metrics)
            for r in parsed.reports
        ]
        assert got == [tuple(r) for r in records]


def test_two_members_of_one_oneof_cannot_be_sent() -> None:
    agent_message = lite.message_class("AgentMessage")
    both = agent_message(hello=lite.AgentHello(), exited=lite.ContainerExited())
    with pytest.raises(ValueError, match="more than one member of oneof msg"):
        both.SerializeToString()


def test_unknown_names_fail_clearly() -> None:
    with pytest.raises(TypeError, match="GetCheckpointRequest has no field 'uid'"):
        lite.GetCheckpointRequest(uid="x")
    with pytest.raises(AttributeError, match="no message 'NoSuchRequest'"):
        lite.message_class("NoSuchRequest")
    with pytest.raises(AttributeError, match="no unary or server-streaming call 'no_such_call'"):
        _ = lite.stub(object()).no_such_call
    with pytest.raises(AttributeError, match="trial_logs is a server stream"):
        _ = lite.stub(object()).trial_logs


def test_structs_and_timestamps_are_what_the_official_runtime_makes_of_them(
    protos: Protos,
) -> None:
    from google.protobuf import json_format

    doc = {"steps_completed": 5, "lr": 0.5, "tags": ["a", None, True], "nested": {"x": -1}}
    official = protos.official["google.protobuf.Struct"]
    parsed = official.FromString(lite.struct_of(doc).SerializeToString())
    assert json_format.MessageToDict(parsed) == doc
    back = lite.message_class("google.protobuf.Struct").FromString(parsed.SerializeToString())
    assert lite.plain(back) == doc and type(lite.plain(back)["steps_completed"]) is int
    stamp = protos.official["google.protobuf.Timestamp"].FromString(
        lite.timestamp(1714557600.25).SerializeToString()
    )
    assert json_format.MessageToDict(stamp) == "2024-05-01T10:00:00.250Z"
    assert lite.seconds(stamp) == 1714557600.25
    assert lite.enum_name("CheckpointState", lite.enum_value("CheckpointState", "DELETED")) == (
        "DELETED"
    )
