"""A path-tracking reader for untrusted config mappings.

Parsers ask a ``Section`` for typed values. Every mistake is recorded in a shared ``Problems``
list under its dotted path instead of being raised, so that a user sees all of them at once.
After recording a problem a reader hands back the caller's default so parsing can go on; the
caller raises ``InvalidConfig`` once everything has been read, so those stand-ins never escape.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
D = TypeVar("D")
S = TypeVar("S", bound=str)


class Problems:
    """Every problem found so far, in the order the config was read."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def add(self, path: str, problem: str) -> None:
        self.errors.append(f"{path}: {problem}" if path else problem)

    def __bool__(self) -> bool:
        return bool(self.errors)


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def describe(value: Any) -> str:
    """Names what a user wrote the way they wrote it (YAML spelling, short values quoted)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


# Fields that hold credentials: an error about one never repeats what was written there.
SECRET_FIELDS = frozenset(
    {"access_key", "secret_key", "connection_string", "credential", "password", "auth"}
    | {"identitytoken", "registrytoken"}
)


def as_str(problems: Problems, path: str, value: Any, *, non_empty: bool = False) -> str | None:
    if not isinstance(value, str):
        secret = path.rsplit(".", 1)[-1] in SECRET_FIELDS
        got = f"a value of type {type(value).__name__}" if secret else describe(value)
        problems.add(path, f"expected a string, got {got}")
        return None
    if non_empty and not value.strip():
        problems.add(path, "must not be empty")
        return None
    return value


def as_int(
    problems: Problems,
    path: str,
    value: Any,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    # bool is a subclass of int, but `true` for a count is a mistake, not a 1.
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(path, f"expected an integer, got {describe(value)}")
        return None
    if minimum is not None and maximum is not None and not minimum <= value <= maximum:
        problems.add(path, f"must be between {minimum} and {maximum}")
        return None
    if minimum is not None and value < minimum:
        problems.add(path, f"must be >= {minimum}")
        return None
    if maximum is not None and value > maximum:
        problems.add(path, f"must be <= {maximum}")
        return None
    return value


def as_number(
    problems: Problems, path: str, value: Any, *, above: float | None = None
) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.add(path, f"expected a number, got {describe(value)}")
        return None
    if above is not None and not value > above:
        problems.add(path, f"must be > {above}")
        return None
    return float(value)


def as_bool(problems: Problems, path: str, value: Any) -> bool | None:
    if not isinstance(value, bool):
        problems.add(path, f"expected a boolean, got {describe(value)}")
        return None
    return value


def as_choice(problems: Problems, path: str, value: Any, choices: Sequence[S]) -> S | None:
    if isinstance(value, str):
        for choice in choices:
            if value == choice:
                return choice
    problems.add(path, f"expected one of {', '.join(choices)}; got {describe(value)}")
    return None


def as_list(problems: Problems, path: str, value: Any) -> list[Any] | None:
    if not isinstance(value, list | tuple):
        problems.add(path, f"expected a list, got {describe(value)}")
        return None
    return list(value)


def as_json(problems: Problems, path: str, value: Any) -> Any:
    """Copies a free-form value, reporting anything that JSON could not carry to a task.

    The copy keeps later edits of the caller's dict from reaching a frozen config.
    """
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                problems.add(path, f"keys must be strings, got {describe(key)}")
                continue
            out[key] = as_json(problems, join(path, key), item)
        return out
    if isinstance(value, list | tuple):
        return [as_json(problems, index(path, i), item) for i, item in enumerate(value)]
    problems.add(path, f"expected a JSON value, got {describe(value)}")
    return None


class Section:
    """One mapping of the config, remembering which keys were read so leftovers are flagged.

    ``null`` and a missing key are the same thing: both give the default.
    """

    def __init__(self, problems: Problems, path: str, value: Any) -> None:
        self.problems = problems
        self.path = path
        self._raw: dict[str, Any] = {}
        self._seen: set[str] = set()
        if value is None:
            return
        if not isinstance(value, Mapping):
            problems.add(path, f"expected a mapping, got {describe(value)}")
            return
        for key, item in value.items():
            if isinstance(key, str):
                self._raw[key] = item
            else:
                problems.add(path, f"keys must be strings, got {describe(key)}")

    def keys(self) -> list[str]:
        """The keys as written, for mappings whose keys are names the user chose."""
        return list(self._raw)

    def at(self, key: str) -> str:
        return join(self.path, key)

    def has(self, key: str) -> bool:
        return self._raw.get(key) is not None

    def present(self, key: str) -> bool:
        """Whether the key was written at all, for the few places where ``null`` is a value."""
        self._seen.add(key)
        return key in self._raw

    def raw(self, key: str) -> Any:
        self._seen.add(key)
        return self._raw.get(key)

    def child(self, key: str) -> Section:
        return Section(self.problems, self.at(key), self.raw(key))

    def get(self, key: str, default: D, check: Callable[[str, Any], T | None]) -> T | D:
        value = self.raw(key)
        if value is None:
            return default
        result = check(self.at(key), value)
        return default if result is None else result

    def need(self, key: str, check: Callable[[str, Any], T | None]) -> T | None:
        value = self.raw(key)
        if value is None:
            self.problems.add(self.at(key), "required")
            return None
        return check(self.at(key), value)

    def string(self, key: str, default: D, *, non_empty: bool = False) -> str | D:
        return self.get(key, default, lambda p, v: as_str(self.problems, p, v, non_empty=non_empty))

    def required_string(self, key: str) -> str | None:
        return self.need(key, lambda p, v: as_str(self.problems, p, v, non_empty=True))

    def integer(
        self, key: str, default: D, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | D:
        return self.get(
            key, default, lambda p, v: as_int(self.problems, p, v, minimum=minimum, maximum=maximum)
        )

    def required_integer(self, key: str, *, minimum: int | None = None) -> int | None:
        return self.need(key, lambda p, v: as_int(self.problems, p, v, minimum=minimum))

    def number(self, key: str, default: D, *, above: float | None = None) -> float | D:
        return self.get(key, default, lambda p, v: as_number(self.problems, p, v, above=above))

    def required_number(self, key: str) -> float | None:
        return self.need(key, lambda p, v: as_number(self.problems, p, v))

    def boolean(self, key: str, default: D) -> bool | D:
        return self.get(key, default, lambda p, v: as_bool(self.problems, p, v))

    def choice(self, key: str, default: S, choices: Sequence[S]) -> S:
        return self.get(key, default, lambda p, v: as_choice(self.problems, p, v, choices))

    def required_choice(self, key: str, choices: Sequence[S]) -> S | None:
        return self.need(key, lambda p, v: as_choice(self.problems, p, v, choices))

    def list_of(self, key: str, check: Callable[[str, Any], T | None]) -> tuple[T, ...] | None:
        """Reads a list item by item; bad items are reported and left out."""
        items = self.get(key, None, lambda p, v: as_list(self.problems, p, v))
        if items is None:
            return None
        out: list[T] = []
        for i, item in enumerate(items):
            result = check(index(self.at(key), i), item)
            if result is not None:
                out.append(result)
        return tuple(out)

    def strings(self, key: str) -> tuple[str, ...]:
        found = self.list_of(key, lambda p, v: as_str(self.problems, p, v))
        return () if found is None else found

    def json(self, key: str) -> Any:
        return as_json(self.problems, self.at(key), self.raw(key))

    def json_mapping(self, key: str) -> dict[str, Any]:
        value = self.raw(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problems.add(self.at(key), f"expected a mapping, got {describe(value)}")
            return {}
        copied: dict[str, Any] = as_json(self.problems, self.at(key), value)
        return copied

    def json_copy(self) -> dict[str, Any]:
        """The whole mapping as JSON, every key counted as read."""
        self._seen.update(self._raw)
        return {key: as_json(self.problems, self.at(key), item) for key, item in self._raw.items()}

    def skip_rest(self) -> None:
        """Stops unknown-key reports where the keys' meaning hinges on a value already bad."""
        self._seen.update(self._raw)

    def finish(self) -> None:
        known = sorted(self._seen)
        for key in self._raw:
            if key in self._seen:
                continue
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            self.problems.add(self.at(key), f"unknown key{hint}")
