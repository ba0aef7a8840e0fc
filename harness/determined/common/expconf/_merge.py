"""Layering the master's defaults under a user's experiment config."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def merge_defaults(user: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Fills what the user left out (or set to ``null``) from ``defaults``.

    Mappings merge key by key and the user's value wins everywhere else, with two exceptions
    that follow Determined: a ``checkpoint_storage`` of another ``type`` replaces the default
    whole (an s3 bucket must not inherit a shared_fs ``host_path``), and the master's
    ``bind_mounts`` are added after the user's unless the user mounts the same container path.
    Nothing is validated here; the merged result is parsed as a whole.
    """
    merged: dict[str, Any] = _merge(user, defaults, ())
    return merged


def _merge(user: Any, default: Any, path: tuple[str, ...]) -> Any:
    if user is None:
        return copy.deepcopy(default)
    if path == ("bind_mounts",):
        return _merge_bind_mounts(user, default)
    if not isinstance(user, Mapping) or not isinstance(default, Mapping):
        return copy.deepcopy(user)
    if path == ("checkpoint_storage",) and user.get("type") not in (None, default.get("type")):
        return copy.deepcopy(user)
    out: dict[Any, Any] = {}
    for key, value in user.items():
        out[key] = _merge(value, default.get(key), (*path, str(key)))
    for key, value in default.items():
        if key not in out:
            out[key] = copy.deepcopy(value)
    return out


def _merge_bind_mounts(user: Any, default: Any) -> Any:
    if not isinstance(user, list) or not isinstance(default, list):
        return copy.deepcopy(user)
    taken = {m.get("container_path") for m in user if isinstance(m, Mapping)}
    extra = [
        m for m in default if not (isinstance(m, Mapping) and m.get("container_path") in taken)
    ]
    return copy.deepcopy(user + extra)
