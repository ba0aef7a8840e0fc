"""Reading an experiment config file for `det experiment create`.

The CLI validates with the same parser the master uses before it packs or uploads anything,
so a typo costs milliseconds and every problem is listed at once, each under its path, with
the file named so the user knows what to edit.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from determined.common import errors, expconf


class ConfigFileError(errors.InvalidArgument):
    """Every problem of one config file, printed one per line under a header naming it."""

    def __init__(self, path: str, problems: Sequence[str]) -> None:
        self.path = path
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"invalid experiment config {path}:\n{lines}")


@dataclasses.dataclass(frozen=True)
class Override:
    """One `--config a.b=value`: a dotted key path and the value YAML reads from the text."""

    keys: tuple[str, ...]
    value: Any
    text: str


def parse_override(text: str) -> Override:
    """argparse `type=` for `--config`, so a malformed override is a usage error (exit 2)."""
    key, sep, raw = text.partition("=")
    keys = tuple(key.strip().split("."))
    if not sep or not all(keys):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not key=value (nested keys joined by dots, e.g. "
            "resources.slots_per_trial=2)"
        )
    try:
        value = expconf.safe_load_yaml(raw)
    except expconf.InvalidConfig as e:
        raise argparse.ArgumentTypeError(f"{text!r}: the value is not valid YAML: {e}") from None
    return Override(keys, value, text)


def add_override_argument(parser: argparse.ArgumentParser) -> None:
    """``--config KEY=VALUE`` (repeatable), collected in ``args.config_overrides``."""
    parser.add_argument(
        "--config",
        dest="config_overrides",
        type=parse_override,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, nested keys joined by dots (repeatable)",
    )


def apply_overrides(config: dict[str, Any], overrides: Sequence[Override]) -> dict[str, Any]:
    """A copy of `config` with each override set, creating intermediate mappings as needed."""
    result = copy.deepcopy(config)
    for o in overrides:
        node = result
        for depth, key in enumerate(o.keys[:-1]):
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            elif not isinstance(child, dict):
                where = ".".join(o.keys[: depth + 1])
                raise errors.InvalidArgument(
                    f"--config {o.text}: {where} is {type(child).__name__}, not a mapping"
                )
            node = child
        node[o.keys[-1]] = o.value
    return result


# The master fills in its default checkpoint storage, so a config may give only retention
# settings (`checkpoint_storage: {save_trial_best: 2}`); validate as if a default existed.
STAND_IN_DEFAULTS = {"checkpoint_storage": {"type": "shared_fs", "host_path": "/"}}


def read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise errors.InvalidArgument(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise errors.InvalidArgument(f"config file {path} is a directory") from None
    except UnicodeDecodeError:
        raise errors.InvalidArgument(f"config file {path} is not UTF-8 text") from None
    except OSError as e:
        raise errors.InvalidArgument(f"cannot read config file {path}: {e.strerror}") from None


def load(path: str, overrides: Sequence[Override] = (), template: str | None = None) -> str:
    """Read, override and validate a config file; return the YAML text to submit.

    Without overrides the user's text is sent as written (comments and all), which is what
    the master stores as the original config. ``template`` (``--template``) sets the
    config's ``template:``; a config with a template is validated by the master, after it
    merged the template in (here the template's settings are not known).

    Raises:
        errors.InvalidArgument: the file is missing or unreadable, or an override clashes.
        ConfigFileError: the config is not valid, with every problem found.
    """
    text = read_text(path)
    try:
        data = expconf.load_yaml(text)
        if overrides:
            data = apply_overrides(data, overrides)
            text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
        if template is not None:
            data["template"] = template
            text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
        if data.get("template") is None:
            expconf.parse_experiment_config(data, STAND_IN_DEFAULTS)
    except expconf.InvalidConfig as e:
        raise ConfigFileError(path, e.errors) from None
    return text
