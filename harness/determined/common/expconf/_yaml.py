"""Reading YAML that users wrote, with bounds on what it may cost to read.

YAML anchors and aliases (``&a`` / ``*a``) let a few hundred bytes describe a structure of
billions of nodes (the "billion laughs"): PyYAML builds it cheaply by sharing objects, but
anything that walks or copies it afterwards (merging defaults, validating, ``json.dumps``)
does the expansion. So the document's size *with every alias expanded* is counted on the
parser's events, before any Python object is built, and a document over ``MAX_NODES`` is refused;
so is one over ``MAX_TEXT_BYTES`` of text.
"""

from __future__ import annotations

from typing import Any

import yaml

from determined.common.expconf._errors import InvalidConfig
from determined.common.expconf._reader import describe

# An experiment config is a few kilobytes and a few hundred values; these leave room for large
# `data` sections and long categorical lists while keeping what one config can make a reader
# allocate to a few megabytes (about 400 bytes per value once built).
MAX_TEXT_BYTES = 1024 * 1024
MAX_NODES = 20_000
# Deeper nesting than this is refused before the composer, which recurses, sees it.
MAX_DEPTH = 64

# The pure-Python loader, not libyaml's: its error messages are the same on every machine,
# and configs are small enough that speed does not matter.
_Loader = yaml.SafeLoader


class _Recursive(Exception):
    """An alias inside the node its anchor names: a structure with no finite expansion."""


class _TooLarge(Exception):
    pass


class _TooDeep(Exception):
    pass


def _count_expanded(text: str, limit: int) -> None:
    """Counts the document's values with every alias expanded, from the parser's events
    (nothing is built), and raises ``_TooLarge`` past ``limit``.

    Each open collection is a frame ``[anchor, values so far]``; an anchor's expanded size is
    known when its value ends, and an alias adds that size wherever it is used.
    """
    sized: dict[str, int] = {}
    stack: list[list[Any]] = []
    total = 0

    def add(count: int) -> None:
        nonlocal total
        total += count
        for frame in stack:
            frame[1] += count
        if total > limit:
            raise _TooLarge

    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in sized:
                add(sized[event.anchor])
            elif any(frame[0] == event.anchor for frame in stack):
                raise _Recursive
            # An unknown anchor is a syntax error the composer reports.
        elif isinstance(event, yaml.ScalarEvent):
            add(1)
            if event.anchor is not None:
                sized[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            add(1)
            stack.append([event.anchor, 1])
            if len(stack) > MAX_DEPTH:
                raise _TooDeep
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor is not None:
                sized[anchor] = size


def _syntax_error(e: yaml.YAMLError) -> InvalidConfig:
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = e.problem or e.context or "malformed document"
        return InvalidConfig([f"invalid YAML{where}: {problem}"])
    return InvalidConfig([f"invalid YAML: {e}"])


def safe_load(text: str, *, max_nodes: int = MAX_NODES, max_bytes: int = MAX_TEXT_BYTES) -> Any:
    """Like ``yaml.safe_load``, for text from users: bounded in size and alias expansion.

    Raises ``InvalidConfig`` (one line, no traceback) for a syntax error, a document over the
    bounds, or an alias that refers to itself.
    """
    if len(text) > max_bytes:
        raise InvalidConfig(
            [f"the YAML is {len(text)} characters long, over the limit of {max_bytes}"]
        )
    try:
        _count_expanded(text, max_nodes)
        return yaml.load(text, Loader=_Loader)  # a safe loader, and bounded
    except yaml.YAMLError as e:
        raise _syntax_error(e) from None
    except _TooLarge:
        raise InvalidConfig(
            [
                f"the YAML holds more than {max_nodes} values once its aliases (*name) are "
                "replaced by what their anchors (&name) mark; write less, or use fewer "
                "nested aliases"
            ]
        ) from None
    except _Recursive:
        raise InvalidConfig(
            ["the YAML has an alias (*name) inside the value its anchor (&name) marks"]
        ) from None
    except (_TooDeep, RecursionError):
        raise InvalidConfig([f"the YAML nests more than {MAX_DEPTH} levels deep"]) from None


def load_yaml(text: str) -> dict[str, Any]:
    """Parses YAML that must hold a mapping; an empty document is an empty mapping.

    Syntax errors become ``InvalidConfig`` naming the line and column, so the CLI can show a
    one-line message instead of PyYAML's traceback; see ``safe_load`` for the bounds.
    """
    data = safe_load(text)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidConfig(
            [f"the config must be a mapping at the top level, got {describe(data)}"]
        )
    return data
