"""google.protobuf.Struct (and ListValue) to and from plain Python values.

A Struct holds every number as a double; read back, a whole one is an ``int`` again (``1``,
not ``1.0``), as Determined's REST API gives it to scripts (Go writes it that way)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined.api.gen.google.protobuf import ListValue, Struct


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def to_dict(struct: Struct | None) -> dict[str, Any] | None:
    """A Struct's object (None for an unset one)."""
    if struct is None:
        return None
    value = _plain(struct.to_dict())
    return value if isinstance(value, dict) else {}


def to_list(values: ListValue | None) -> list[Any] | None:
    """A ListValue's list (None for an unset one)."""
    if values is None:
        return None
    value = _plain(values.to_dict())
    return value if isinstance(value, list) else []


def from_dict(value: dict[str, Any] | None) -> Struct | None:
    from determined.api.gen.google.protobuf import Struct

    return None if value is None else Struct.from_dict(value)


def from_list(values: list[Any] | None) -> ListValue | None:
    from determined.api.gen.google.protobuf import ListValue

    return None if values is None else ListValue.from_dict(values)
