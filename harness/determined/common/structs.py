"""Free-form documents (configs, hyperparameters, metrics, metadata) as the API carries them,
``google.protobuf.Struct``, and back to plain Python data.

``struct`` builds one from a mapping (JSON-like values; a tuple is a list). ``python`` gives
the mapping back, whole numbers as ``int`` (a Struct holds every number as a double, and a
config's ``max_trials: 100`` should read back as 100, not 100.0), as the gateway's JSON writes
them. Both are quicker than betterproto2's own ``from_dict`` and ``to_dict``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.api.gen.google import protobuf as wkt
from determined.common import _protojson_wkt


def struct(value: Mapping[str, Any] | None) -> wkt.Struct:
    """``value`` as a Struct (an empty one for None)."""
    return wkt.Struct(fields={str(k): _value(v) for k, v in (value or {}).items()})


def _value(v: Any) -> wkt.Value:
    if v is None:
        return wkt.Value(null_value=wkt.NullValue.NULL_VALUE)
    if isinstance(v, bool):
        return wkt.Value(bool_value=v)
    if isinstance(v, int | float):
        return wkt.Value(number_value=float(v))
    if isinstance(v, str):
        return wkt.Value(string_value=v)
    if isinstance(v, Mapping):
        return wkt.Value(struct_value=struct(v))
    if isinstance(v, list | tuple):
        return wkt.Value(list_value=wkt.ListValue(values=[_value(x) for x in v]))
    raise TypeError(f"not a JSON value: {v!r}")


def python(value: wkt.Struct | None) -> dict[str, Any]:
    """The mapping a Struct holds ({} for None)."""
    return {} if value is None else _protojson_wkt.struct_json(value, plain=True)


def to_dict(value: wkt.Struct | None) -> dict[str, Any] | None:
    """The mapping a Struct holds; None for an unset one (a field that may be absent)."""
    return None if value is None else python(value)


def to_list(values: wkt.ListValue | None) -> list[Any] | None:
    """A ListValue's list, whole numbers as ``int``; None for an unset one."""
    if values is None:
        return None
    return list(python(wkt.Struct(fields={"v": wkt.Value(list_value=values)}))["v"])


def from_dict(value: Mapping[str, Any] | None) -> wkt.Struct | None:
    """``value`` as a Struct; None stays unset."""
    return None if value is None else struct(value)


def from_list(values: list[Any] | None) -> wkt.ListValue | None:
    """``values`` as a ListValue; None stays unset."""
    return None if values is None else _value(values).list_value
