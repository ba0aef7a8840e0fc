"""The gateway's edges: API messages to JSON (protobuf's JSON mapping, as Determined's REST
API writes it: ``determined.common.protojson``) and query strings and bodies to typed values,
with errors that name the offending parameter."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

import betterproto2
from grpclib.const import Status
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from determined.api.gen import v1
from determined.common import errors, protojson

M = TypeVar("M", bound=betterproto2.Message)


def to_dict(message: betterproto2.Message) -> dict[str, Any]:
    return protojson.to_dict(message)


def message(message: betterproto2.Message) -> JSONResponse:
    return JSONResponse(to_dict(message))


def messages(items: Sequence[betterproto2.Message]) -> JSONResponse:
    return JSONResponse([to_dict(m) for m in items])


def error_body(message: str, grpc_status: str) -> dict[str, Any]:
    """An error as Determined's gateway writes it: ``{"error": {"code": 5, "reason":
    "NotFound", "error": "experiment 9 not found"}}`` (the gRPC code, its name, the message)."""
    code = Status[grpc_status] if grpc_status in Status.__members__ else Status.UNKNOWN
    reason = "".join(word.capitalize() for word in code.name.split("_"))
    return {"error": {"code": code.value, "reason": reason, "error": message}}


def error(message: str, http_status: int, grpc_status: str) -> JSONResponse:
    return JSONResponse(error_body(message, grpc_status), status_code=http_status)


def stream_line(value: Any) -> str:
    """One JSON document of a newline-delimited stream (Determined's streaming routes)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False) + "\n"


def stream(batches: AsyncIterator[Sequence[betterproto2.Message]]) -> StreamingResponse:
    """Determined's stream of a server-streaming call: one ``{"result": <message>}`` a line;
    a failure after the stream began is its last line, ``{"error": {...}}`` (as grpc-gateway
    ends a stream that fails)."""

    async def lines() -> AsyncIterator[str]:
        try:
            async for batch in batches:
                yield "".join(stream_line({"result": to_dict(x)}) for x in batch)
        except errors.DetError as e:
            yield stream_line(error_body(e.message, e.grpc_status))

    return StreamingResponse(lines(), media_type="application/json")


def json_text(text: str) -> Response:
    """A JSON document the Service already encoded."""
    return Response(text, media_type="application/json")


def _raw(request: Request, name: str) -> str | None:
    """A path or query parameter, by its own name or its JSON name (``after_id`` or
    ``afterId``), as Determined's gateway takes either."""
    value = request.path_params.get(name)
    if value is not None:
        return str(value)
    value = request.query_params.get(name)
    return request.query_params.get(protojson.json_name(name)) if value is None else value


def query(request: Request, name: str, default: str = "") -> str:
    """A query parameter as text, by either of its names."""
    value = _raw(request, name)
    return default if value is None else value


def integer(request: Request, name: str, default: int = 0, *, minimum: int | None = 0) -> int:
    raw = _raw(request, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise errors.InvalidArgument(f"{name}: expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise errors.InvalidArgument(f"{name}: must be >= {minimum}, got {value}")
    return value


def integers(request: Request, name: str) -> list[int]:
    """Repeated (``?rank_ids=0&rank_ids=1``) or comma-separated (``?rank_ids=0,1``)."""
    values: list[int] = []
    for raw in _repeated(request, name):
        try:
            values.append(int(raw))
        except ValueError:
            raise errors.InvalidArgument(f"{name}: expected integers, got {raw!r}") from None
    return values


def strings(request: Request, name: str) -> list[str]:
    return _repeated(request, name)


def _repeated(request: Request, name: str) -> list[str]:
    camel = protojson.json_name(name)
    given = request.query_params.getlist(name)
    if camel != name:
        given += request.query_params.getlist(camel)
    return [part.strip() for raw in given for part in raw.split(",") if part.strip()]


def boolean(request: Request, name: str) -> bool | None:
    raw = _raw(request, name)
    if raw is None or raw == "":
        return None
    lowered = raw.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise errors.InvalidArgument(f"{name}: expected true or false, got {raw!r}")


def states(request: Request, name: str) -> list[v1.State]:
    found: list[v1.State] = []
    for raw in strings(request, name):
        key = raw.upper().removeprefix("STATE_")
        try:
            found.append(v1.State[key])
        except KeyError:
            raise errors.InvalidArgument(f"{name}: unknown state {raw!r}") from None
    return found


async def json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw or b"null")
    except ValueError as e:
        raise errors.InvalidArgument(f"request body: not valid JSON ({e})") from None
    except RecursionError:
        # 200,000 nested arrays: Python's parser gives up before its stack does.
        raise errors.InvalidArgument("request body: JSON nested too deeply") from None


async def body(request: Request, cls: type[M], *, path: str = "") -> M:
    """The request's JSON body read as the message ``cls``, as Determined's gateway reads it:
    fields by their JSON names or their own, anything unknown or of the wrong type refused
    naming the field (``path`` prefixes its name)."""
    raw = await json_body(request)
    if raw is None:
        raw = {}
    try:
        return protojson.parse(cls, raw, path=path)  # type: ignore[no-any-return]
    except protojson.ParseError as e:
        raise errors.InvalidArgument(str(e)) from None


def query_message(request: Request, cls: type[M]) -> M:
    """The request's query parameters read as the message ``cls`` (``protojson.parse_query``:
    as Determined's gateway reads a GET's parameters); those naming no field are left for
    the route to read."""
    params = {key: request.query_params.getlist(key) for key in request.query_params}
    try:
        return protojson.parse_query(cls, params)  # type: ignore[no-any-return]
    except protojson.ParseError as e:
        raise errors.InvalidArgument(str(e)) from None


def field(body: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    """A field of a JSON object body by its own name or its JSON name (``parent_id`` or
    ``parentId``), type-checked (``bool`` is not accepted as ``int``)."""
    value = body.get(name, body.get(protojson.json_name(name), default))
    if value is None:
        return default
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise errors.InvalidArgument(f"{name}: expected {kind.__name__}, got {value!r}")
    return value
