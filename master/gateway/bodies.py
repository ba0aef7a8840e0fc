"""Request bodies and query strings read as API messages, for the routes that take
Determined's request messages whole (workspaces, projects, models): protobuf's JSON mapping,
keys by their JSON names (``workspaceId``) or their own (``workspace_id``), enums by name
with or without their prefix."""

from __future__ import annotations

import enum
from typing import Any, TypeVar

import betterproto2
from starlette.requests import Request

from determined.common import errors
from pydet.master.gateway import codec

M = TypeVar("M", bound=betterproto2.Message)
E = TypeVar("E", bound=enum.Enum)


def parsed(cls: type[M], raw: Any, where: str = "request body") -> M:
    """``raw`` (a decoded JSON object) as a ``cls``; InvalidArgument saying what is wrong."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise errors.InvalidArgument(f"{where}: expected a JSON object")
    try:
        message = cls.from_dict(raw)
        bytes(message)  # a value of the wrong type fails here
    except KeyError as e:
        raise errors.InvalidArgument(f"{where}: {e.args[0] if e.args else e}") from None
    except (TypeError, ValueError, AttributeError, OverflowError) as e:
        raise errors.InvalidArgument(
            f"{where}: a field has a value of the wrong type ({e})"
        ) from None
    return message


async def body(request: Request, cls: type[M]) -> M:
    return parsed(cls, await codec.json_body(request))


def enum_param(request: Request, name: str, kind: type[E], prefix: str, default: E) -> E:
    """An enum query parameter by its name (``SORT_BY_NAME``) or without its prefix
    (``name``)."""
    raw = request.query_params.get(name)
    if raw is None:
        camel = name.split("_")[0] + "".join(p.title() for p in name.split("_")[1:])
        raw = request.query_params.get(camel)
    if not raw:
        return default
    key = raw.upper().removeprefix(prefix)
    try:
        return kind[key]
    except KeyError:
        choices = ", ".join(f"{prefix}{m.name}" for m in kind if m.name != "UNSPECIFIED")
        raise errors.InvalidArgument(f"{name}: unknown {raw!r} (one of {choices})") from None


def text(request: Request, name: str) -> str:
    return request.query_params.get(name, "")
