"""Layering the master's defaults under a user's experiment config, by Determined's rules."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from determined.common.expconf._log_policies import merge_log_policies

# Fields every variant of a union shares: they still come from the defaults when the user
# picks another variant (another storage type, another searcher).
_STORAGE_COMMON = ("save_experiment_best", "save_trial_best", "save_trial_latest")
_SEARCHER_COMMON = (
    "metric",
    "smaller_is_better",
    "source_trial_id",
    "source_checkpoint_uuid",
    "source_experiment_id",
)


def merge_defaults(user: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Fills what the user left out (or set to ``null``) from ``defaults``.

    Mappings merge key by key and the user's value wins everywhere else, with these
    exceptions, which follow Determined:

    - a ``checkpoint_storage`` (or ``tensorboard_storage``) of another ``type``, or a
      ``searcher`` of another ``name``, keeps only the defaults' shared fields (the ``save_*``
      counts; ``metric``, ``smaller_is_better`` and the source trial or checkpoint): an s3
      bucket must not inherit a shared_fs ``host_path``; a ``data_layer`` of another type
      replaces the default whole;
    - ``bind_mounts`` and ``resources.devices``: the defaults' entries are added after the
      user's unless the user uses the same container path;
    - ``hyperparameters``: a declared hyperparameter (a mapping with ``type``) or a constant
      is taken whole, ``null`` included (a constant ``null``); only two nested groups merge;
    - ``log_policies``: the defaults' policies, then the user's (policies with the same name
      and pattern become one when the config is parsed).

    Nothing is validated here; the merged result is parsed as a whole.
    """
    merged: dict[str, Any] = _merge(user, defaults, ())
    return merged


def _merge(user: Any, default: Any, path: tuple[str, ...]) -> Any:
    special = _SPECIAL.get(path)
    if special is not None and user is not None and default is not None:
        return special(user, default)
    if user is None:
        return copy.deepcopy(default)
    if not isinstance(user, Mapping) or not isinstance(default, Mapping):
        return copy.deepcopy(user)
    return _merge_keys(user, default, path)


def _merge_keys(user: Mapping[Any, Any], default: Mapping[Any, Any], path: tuple[str, ...]) -> Any:
    out: dict[Any, Any] = {}
    for key, value in user.items():
        out[key] = _merge(value, default.get(key), (*path, str(key)))
    for key, value in default.items():
        if key not in out:
            out[key] = copy.deepcopy(value)
    return out


def _union(tag: str, common: tuple[str, ...], path: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    """Merges a union keyed by ``tag``: same variant (or none named) merges key by key; another
    variant keeps the user's fields plus the defaults' ``common`` ones."""

    def merge(user: Any, default: Any) -> Any:
        if not isinstance(user, Mapping) or not isinstance(default, Mapping):
            return copy.deepcopy(user)
        if user.get(tag) in (None, default.get(tag)):
            return _merge_keys(user, default, path)
        out = copy.deepcopy(dict(user))
        for key in common:
            if out.get(key) is None and default.get(key) is not None:
                out[key] = copy.deepcopy(default[key])
        return out

    return merge


def _by_container_path(key: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    def merge(user: Any, default: Any) -> Any:
        if not isinstance(user, list) or not isinstance(default, list):
            return copy.deepcopy(user)
        taken = {key(m) for m in user}
        return copy.deepcopy(user + [m for m in default if key(m) not in taken])

    return merge


def _mount_target(mount: Any) -> Any:
    return mount.get("container_path") if isinstance(mount, Mapping) else None


def _device_target(device: Any) -> Any:
    if isinstance(device, str):  # host[:container[:mode]]
        parts = device.split(":")
        return parts[1] if len(parts) > 1 else parts[0]
    return _mount_target(device)


def _is_group(value: Any) -> bool:
    return isinstance(value, Mapping) and "type" not in value


def _merge_hyperparameters(user: Any, default: Any) -> Any:
    if not _is_group(user) or not _is_group(default):
        return copy.deepcopy(user)
    out: dict[Any, Any] = {}
    for key, value in user.items():
        other = default.get(key)
        both_groups = key in default and _is_group(value) and _is_group(other)
        out[key] = _merge_hyperparameters(value, other) if both_groups else copy.deepcopy(value)
    for key, value in default.items():
        if key not in out:
            out[key] = copy.deepcopy(value)
    return out


def _replace_other_type(user: Any, default: Any) -> Any:
    if isinstance(user, Mapping) and isinstance(default, Mapping):
        if user.get("type") in (None, default.get("type")):
            return _merge_keys(user, default, ("data_layer",))
    return copy.deepcopy(user)


_SPECIAL: dict[tuple[str, ...], Callable[[Any, Any], Any]] = {
    ("checkpoint_storage",): _union("type", _STORAGE_COMMON, ("checkpoint_storage",)),
    ("tensorboard_storage",): _union("type", _STORAGE_COMMON, ("tensorboard_storage",)),
    ("searcher",): _union("name", _SEARCHER_COMMON, ("searcher",)),
    ("data_layer",): _replace_other_type,
    ("bind_mounts",): _by_container_path(_mount_target),
    ("resources", "devices"): _by_container_path(_device_target),
    ("hyperparameters",): _merge_hyperparameters,
    ("log_policies",): merge_log_policies,
}
