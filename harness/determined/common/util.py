"""Small helpers that user code and Determined's test fixtures import from
``determined.common.util``: the names of the two built-in metric groups, the master address
and credentials from the environment, and a few general utilities.
"""

from __future__ import annotations

import datetime
import functools
import os
import pathlib
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, TypeVar, overload

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# The metric groups that have their own Core API calls (report_training_metrics,
# report_validation_metrics); any other name is a custom group for report_metrics.
_LEGACY_TRAINING = "training"
_LEGACY_VALIDATION = "validation"


@overload
def chunks(lst: str, chunk_size: int) -> Iterator[str]: ...


@overload
def chunks(lst: Sequence[T], chunk_size: int) -> Iterator[Sequence[T]]: ...


def chunks(lst: str | Sequence[T], chunk_size: int) -> Iterator[str] | Iterator[Sequence[T]]:
    """Consecutive slices of ``chunk_size`` items; the last may be shorter
    (``chunks("ABCDEFG", 3)`` gives ``ABC``, ``DEF``, ``G``)."""
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")
    pieces: Iterator[Any] = (lst[i : i + chunk_size] for i in range(0, len(lst), chunk_size))
    return pieces


def sizeof_fmt(val: int | float) -> str:
    """A byte count for people: ``1536`` is ``1.5KB``."""
    size = float(val)
    for unit in ("", "K", "M", "G", "T", "P", "E", "Z"):
        if abs(size) < 1024.0:
            return f"{size:3.1f}{unit}B"
        size /= 1024.0
    return f"{size:.1f}YB"


def get_default_master_address() -> str:
    """``DET_MASTER``, else ``DET_MASTER_ADDR``, else ``localhost:8080``."""
    return os.environ.get("DET_MASTER") or os.environ.get("DET_MASTER_ADDR") or "localhost:8080"


def get_det_username_from_env() -> str | None:
    """``DET_USER``, if set."""
    return os.environ.get("DET_USER")


def get_det_password_from_env() -> str | None:
    """``DET_PASS``, if set."""
    return os.environ.get("DET_PASS")


def get_det_user_token_from_env() -> str | None:
    """``DET_USER_TOKEN``, if set."""
    return os.environ.get("DET_USER_TOKEN")


def debug_mode() -> bool:
    """Whether ``DET_DEBUG`` asks for debugging output (``true``, ``1`` or ``yes``)."""
    return os.environ.get("DET_DEBUG", "").lower() in ("true", "1", "yes")


def preserve_random_state(fn: F) -> F:
    """Decorate ``fn`` so that it leaves Python's ``random`` state as it found it."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        state = random.getstate()
        try:
            return fn(*args, **kwargs)
        finally:
            random.setstate(state)

    return wrapped  # type: ignore[return-value]  # functools.wraps keeps fn's signature


def is_overridden(full_method: Any, parent_class: type) -> bool:
    """Whether the bound method ``full_method`` is not ``parent_class``'s own (a subclass
    overrides it)."""
    name = getattr(full_method, "__name__", None)
    if name is None:
        return False
    own = getattr(parent_class, name, None)
    return getattr(full_method, "__func__", full_method) is not own


def parse_protobuf_timestamp(ts: str) -> datetime.datetime:
    """An RFC 3339 timestamp (``2024-01-02T03:04:05Z``) as an aware datetime."""
    if ts.endswith("Z"):
        ts = ts[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(ts)


def get_config_path() -> pathlib.Path:
    """Where the CLI and SDK keep their files: ``$XDG_CONFIG_HOME/pydet``, by default
    ``~/.config/pydet`` (``DET_DEBUG_CONFIG_PATH`` overrides it)."""
    override = os.environ.get("DET_DEBUG_CONFIG_PATH")
    if override:
        return pathlib.Path(override)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return pathlib.Path(base) / "pydet"


def safe_load_yaml_with_exceptions(yaml_file: IO[Any] | str) -> Any:
    """Parse YAML text or an open file; on a syntax error print where it is and exit 1,
    so that the user sees the problem and not a traceback."""
    import yaml

    try:
        return yaml.safe_load(yaml_file)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        where = f"\n{mark}" if mark is not None else ""
        print(f"Error: invalid experiment config file.\n{type(e).__name__}: {problem}{where}")
        sys.exit(1)
