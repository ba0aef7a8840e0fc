"""Reading a config file's text."""

from __future__ import annotations

from typing import Any

import yaml

from determined.common.expconf._errors import InvalidConfig
from determined.common.expconf._reader import describe


def load_yaml(text: str) -> dict[str, Any]:
    """Parses YAML that must hold a mapping; an empty document is an empty mapping.

    Syntax errors become ``InvalidConfig`` naming the line and column, so the CLI can show a
    one-line message instead of PyYAML's traceback.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = e.problem or e.context or "malformed document"
        raise InvalidConfig([f"invalid YAML{where}: {problem}"]) from None
    except yaml.YAMLError as e:
        raise InvalidConfig([f"invalid YAML: {e}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidConfig(
            [f"the config must be a mapping at the top level, got {describe(data)}"]
        )
    return data
