"""``protojson.parse`` (how the REST API reads request bodies) held to ``json_format`` as its
oracle, with the classes and random messages of test_wire_oracle.py.

What ``MessageToDict`` writes of a random message of every ``v1`` type (keys by their JSON
names, and again by their own names), and what ``protojson.to_dict`` writes of it, is read by
``parse`` into the message ``ParseDict`` reads. Bodies that ``ParseDict``
refuses (unknown fields, wrong types, integers out of range, unknown enum names, two members
of one oneof, bad times) are refused, each with an error naming the field.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st

from determined.common import protojson, wire
from tests.unit.test_wire_oracle import (
    V1_NAMES,
    Protos,
    _canonical,
    _examples,
    _message,
    protos,
)

__all__ = ["protos"]  # the fixture, shared with test_wire_oracle.py

NAMES = ["oracle.Kinds", *V1_NAMES]


def _assert_read_as_parse_dict_reads(protos: Protos, name: str, body: Any) -> None:
    """``parse`` reads ``body`` (as a client sends it: JSON text) into what ``ParseDict``
    reads (compared as the official runtime sees their encodings)."""
    official, ours = protos.pair(name)
    body = json.loads(json.dumps(body))
    parsed = protojson.parse(ours, body)
    want = json_format.ParseDict(body, official())
    assert _canonical(official.FromString(wire.encode(parsed))) == _canonical(want)


@pytest.mark.parametrize("name", NAMES)
@_examples(15)
@given(data=st.data())
def test_what_message_to_dict_and_protojson_write_is_read_as_parse_dict_reads_it(
    protos: Protos, name: str, data: st.DataObject
) -> None:
    original = data.draw(_message(protos, name))
    ours = wire.decode(protos.pair(name)[1], original.SerializeToString())
    for by_field_names in (False, True):
        written = json_format.MessageToDict(original, preserving_proto_field_name=by_field_names)
        _assert_read_as_parse_dict_reads(protos, name, written)
        _assert_read_as_parse_dict_reads(
            protos, name, protojson.to_dict(ours, snake=by_field_names)
        )


# Bodies ParseDict refuses, and the field the error names.
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"nope": 1}, "nope: unknown field"),
    ({"inner": {"name": "x", "extra": True}}, "inner.extra: unknown field"),
    ({"i32": "seven"}, "i32: expected an integer"),
    ({"i32": 1.5}, "i32: expected an integer"),
    ({"i32": True}, "i32: expected an integer"),
    ({"i32": 2**31}, "i32: 2147483648 is out of range"),
    ({"u32": -1}, "u32: -1 is out of range"),
    ({"i64": [1]}, "i64: expected an integer"),
    ({"flag": "true"}, "flag: expected true or false"),
    ({"text": 5}, "text: expected a string"),
    ({"dbl": "fast"}, "dbl: expected a number"),
    ({"flt": 1e39}, "flt: 1e+39 is too large"),
    ({"color": "COLOR_GREEN"}, "color: expected one of COLOR_RED"),
    ({"inner": "x"}, "inner: expected an object"),
    ({"rI32": 5}, "rI32: expected an array"),
    ({"rI32": [1, "x"]}, "rI32[1]: expected an integer"),
    ({"rInner": [{"name": 5}]}, "rInner[0].name: expected a string"),
    ({"byName": []}, "byName: expected an object"),
    ({"byI32": {"x": "v"}}, "byI32['x']: expected an integer"),
    ({"choiceText": "a", "choiceI64": "1"}, "choiceI64: 'choiceText' is already given"),
    ({"maybeI32": 1, "maybe_i32": 2}, "maybe_i32: given twice"),
    ({"when": "yesterday"}, "when: expected an RFC 3339 time"),
    ({"when": "2024-02-30T00:00:00Z"}, "when: not a time"),
    ({"when": 5}, "when: expected a timestamp as text"),
    ({"took": "5 minutes"}, "took: expected a duration"),
    ({"wI32": "x"}, "wI32: expected an integer"),
    ({"doc": [1]}, "doc: expected an object"),
    ({"items": {"a": 1}}, "items: expected an array"),
]


@pytest.mark.parametrize(("body", "problem"), REFUSED, ids=[p for _, p in REFUSED])
def test_bodies_the_official_runtime_refuses_are_refused_naming_the_field(
    protos: Protos, body: dict[str, Any], problem: str
) -> None:
    official, ours = protos.pair("oracle.Kinds")
    with pytest.raises(json_format.ParseError):
        json_format.ParseDict(body, official())
    with pytest.raises(protojson.ParseError) as e:
        protojson.parse(ours, body)
    assert str(e.value).startswith(problem), str(e.value)


def test_what_the_mapping_allows_is_read(protos: Protos) -> None:
    official, ours = protos.pair("oracle.Kinds")
    body = {
        "i64": "-5",  # 64-bit integers as strings or numbers
        "i32": "7",
        "u64": 2**64 - 1,
        "dbl": "NaN",
        "flt": "-Infinity",
        "color": 2,  # an enum by number
        "maybeText": None,  # null: unset
        "inner": None,
        "byI64": {"3": "COLOR_RED"},
        "byFlag": {"true": "AQ=="},
        "when": "2024-05-01T14:00:00.25+02:00",
        "wI64": "9",
        "anyValue": None,  # a Value holds null
        "doc": {"a": [1, None, {"b": "c"}]},
    }
    got = protojson.parse(ours, body)
    want = json_format.ParseDict(body, official())
    assert _canonical(official.FromString(wire.encode(got))) == _canonical(want)
    assert got.maybe_text is None and got.inner is None


def test_deep_nesting_is_refused_before_the_stack_runs_out(protos: Protos) -> None:
    _, ours = protos.pair("oracle.Kinds")
    deep: dict[str, Any] = {}
    body: dict[str, Any] = {"inner": deep}
    for _ in range(1000):
        deep["child"] = {}
        deep = deep["child"]
    with pytest.raises(protojson.ParseError, match="nested more than 64 levels deep"):
        protojson.parse(ours, body)
    doc: Any = 1
    for _ in range(1000):
        doc = [doc]
    with pytest.raises(protojson.ParseError, match=r"^doc\['a'\]\[0\]\[0\].*nested more than"):
        protojson.parse(ours, {"doc": {"a": doc}})


def test_text_that_is_not_base64_is_refused_where_parse_dict_drops_it(protos: Protos) -> None:
    official, ours = protos.pair("oracle.Kinds")
    assert json_format.ParseDict({"blob": "***"}, official()).blob == b""
    with pytest.raises(protojson.ParseError, match="blob: not valid base64"):
        protojson.parse(ours, {"blob": "***"})
    assert protojson.parse(ours, {"blob": "_-8"}).blob == b"\xff\xef"  # the URL-safe alphabet
