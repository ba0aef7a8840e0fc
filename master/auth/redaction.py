"""Secrets in experiment configs: what callers are shown instead, and how a fork gets them
back. The stored config and the task's own DET_EXPERIMENT_CONFIG keep them; everything a
caller reads (describe, the WebUI, checkpoint storage, validation errors) goes through here.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from typing import Any

import yaml

from determined.common import expconf

# Shown instead of a secret, as Determined shows the fields its configs never print.
REDACTED = "********"
# Where configs hold credentials (Determined's secret fields): a mapping's path, its keys.
_STORAGE_SECRETS = frozenset(
    {"access_key", "secret_key", "connection_string", "credential", "password"}
)
_SECRETS: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = (
    (("checkpoint_storage",), _STORAGE_SECRETS),
    (
        ("environment", "registry_auth"),
        frozenset({"password", "auth", "identitytoken", "registrytoken"}),
    ),
)


def _secret_spots(cfg: Any, secrets: Any = _SECRETS) -> Iterator[tuple[dict[str, Any], str]]:
    """(mapping, key) for each secret set in a parsed config."""
    for path, keys in secrets:
        for node in _at(cfg, path):
            for key in sorted(keys):
                if node.get(key) not in (None, "", REDACTED):
                    yield node, key


def _at(cfg: Any, path: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    node = cfg
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        yield node


def redacted(cfg: Any) -> Any:
    """A copy of a parsed config with every secret replaced by ``REDACTED``."""
    out = copy.deepcopy(cfg)
    for node, key in _secret_spots(out):
        node[key] = REDACTED
    return out


# Configs never change once stored, and every GetExperiment (a CLI or WebUI polling one)
# redacts both: the YAML parse was a tenth of the master's CPU while a search ran.
@functools.lru_cache(maxsize=256)
def redacted_json(text: str, *, storage: bool = False) -> str:
    """A JSON config (or, with ``storage``, a checkpoint's storage section) as callers may
    see it; the text as it was when it holds no secret."""
    try:
        cfg = json.loads(text)
    except ValueError:
        return text
    spots = list(_secret_spots(cfg, (((), _STORAGE_SECRETS),) if storage else _SECRETS))
    if not spots:
        return text
    for node, key in spots:
        node[key] = REDACTED
    return json.dumps(cfg)


@functools.lru_cache(maxsize=256)
def redacted_yaml(text: str) -> str:
    """The config a user wrote, without its secrets; their formatting and comments stay
    when each secret can be found, once, as written."""
    try:
        cfg = expconf.safe_load_yaml(text)
    except expconf.InvalidConfig:
        return text
    spots = list(_secret_spots(cfg))
    if not spots:
        return text
    out = text
    for node, key in spots:
        written = str(node[key])
        if isinstance(node[key], (dict, list)) or out.count(written) != 1:
            break
        at = out.index(written)
        # A plain "********" would be a YAML alias: quote it unless the value was quoted.
        quoted = out[at - 1 : at] in ("'", '"')
        out = out[:at] + (REDACTED if quoted else f'"{REDACTED}"') + out[at + len(written) :]
    else:
        try:
            if not list(_secret_spots(expconf.safe_load_yaml(out))):
                return out
        except expconf.InvalidConfig:
            pass
    return str(yaml.safe_dump(redacted(cfg), sort_keys=False, default_flow_style=False))


def scrubbed(message: str, config_text: str) -> str:
    """An error message about a config with the config's secrets taken out: validation
    errors quote the values they refuse (a password written as a number, say)."""
    try:
        cfg = expconf.safe_load_yaml(config_text)
    except expconf.InvalidConfig:
        return message
    for node, key in _secret_spots(cfg):
        value = node[key]
        if isinstance(value, str):
            forms = [repr(value), repr(value[:37] + "..."), value]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            forms = [f"({value})", str(value)]
        else:
            continue
        for form in forms:
            if len(form) >= 3:
                message = message.replace(form, REDACTED)
    return message


def restore_secrets(text: str, parent_config: str) -> str:
    """A fork's config with each ``REDACTED`` secret (as the parent's config was shown)
    given back the parent's value; the text as it was when there is none to give back."""
    try:
        cfg = expconf.safe_load_yaml(text)
        parent = json.loads(parent_config)
    except (expconf.InvalidConfig, ValueError):
        return text
    restored = False
    for path, keys in _SECRETS:
        mine, theirs = list(_at(cfg, path)), list(_at(parent, path))
        if not mine or not theirs:
            continue
        for key in keys:
            if mine[0].get(key) == REDACTED and theirs[0].get(key) not in (None, REDACTED):
                mine[0][key] = theirs[0][key]
                restored = True
    if not restored:
        return text
    return str(yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False))
