"""JSON objects that callers send as text (a template's config, a trial's metadata): parsed
with a size limit, anything else refused naming the field."""

from __future__ import annotations

import json
from typing import Any

from determined.common import errors


def json_object(text: str, *, field: str, limit: int) -> dict[str, Any]:
    """A JSON object a caller sent as text in ``field`` (``{}`` for none), at most ``limit``
    bytes; anything else is refused naming the field."""
    if len(text) > limit:
        raise errors.InvalidArgument(f"{field}: {len(text)} bytes of JSON, more than {limit}")
    try:
        value = json.loads(text or "{}")
    except ValueError as e:
        raise errors.InvalidArgument(f"{field}: not JSON: {e}") from None
    if not isinstance(value, dict):
        raise errors.InvalidArgument(f"{field}: expected a JSON object (a mapping)")
    return value
