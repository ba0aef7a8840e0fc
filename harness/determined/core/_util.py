"""Small helpers shared by the Core API contexts: JSON encoding and the chief-only rule."""

from __future__ import annotations

import json
import numbers
from typing import Any, Protocol


class _HasRank(Protocol):
    @property
    def rank(self) -> int: ...


def _to_json_value(value: Any) -> Any:
    """``json`` fallback for framework scalars and arrays (numpy, torch) and paths."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            # A numpy scalar or a one-element tensor; a multi-element tensor refuses.
            return item()
        except (ValueError, RuntimeError):
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    if hasattr(value, "__fspath__"):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


_encode = json.JSONEncoder(allow_nan=True, default=_to_json_value, separators=(",", ":")).encode


def dumps(value: Any, *, what: str) -> str:
    """``value`` as compact JSON, or a ``TypeError`` that names the offending key.

    NaN and the infinities are kept, written the way JavaScript and Python's ``json`` read
    them (``NaN``, ``Infinity``, ``-Infinity``), so a diverging loss is stored as reported.
    """
    try:
        return _encode(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} must be JSON-serializable: {_locate(value, e)}") from None


def _locate(value: Any, error: Exception) -> str:
    if isinstance(value, dict):
        for key, item in value.items():
            try:
                _encode(item)
            except (TypeError, ValueError) as e:
                return f"the value of {key!r}: {e}"
    return str(error)


def check_int(value: Any, *, what: str, minimum: int = 0) -> int:
    """``value`` as an ``int`` (numpy integers welcome), else a ``TypeError``/``ValueError``."""
    if type(value) is int and value >= minimum:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, not {type(value).__name__} ({value!r})")
    out = int(value)
    if out < minimum:
        raise ValueError(f"{what} must be >= {minimum}, not {out}")
    return out


def check_metrics(metrics: Any, *, what: str) -> None:
    if type(metrics) is not dict and not isinstance(metrics, dict):
        raise TypeError(
            f"{what} must be a dict of metric name to value, not {type(metrics).__name__}"
        )


def require_chief(dist: _HasRank, action: str) -> None:
    """Raise unless this process is the chief: only rank 0 may report to the master."""
    if dist.rank != 0:
        raise RuntimeError(f"only the chief (rank 0) may {action}; this is rank {dist.rank}")
