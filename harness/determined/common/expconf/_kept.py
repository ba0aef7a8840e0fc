"""Sections of Determined's experiment config that pydet validates and keeps as written.

``slurm``, ``pbs``, ``security``, ``data_layer`` and ``internal`` configure Determined
features pydet does not have (HPC launchers, Kerberos, the data layer cache, native
experiments); ``integrations`` (Pachyderm, webhooks) and ``retention_policy`` (log retention)
name services pydet does not run. Configs written for Determined carry them, so they are
checked the way Determined checks them and handed to tasks unchanged; the master notes which
of them an experiment sets (``IGNORED_SECTIONS``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from determined.common.expconf._mounts import as_abs_path
from determined.common.expconf._reader import Problems, Section, as_int, as_str

IGNORED_SECTIONS = (
    "slurm",
    "pbs",
    "security",
    "data_layer",
    "internal",
    "integrations",
    "retention_policy",
)

DATA_LAYER_TYPES = ("shared_fs", "s3", "gcs")


def _strings(sec: Section, key: str) -> list[str] | None:
    found = sec.list_of(key, lambda p, v: as_str(sec.problems, p, v))
    return None if found is None else list(found)


def _read(problems: Problems, path: str, value: Any, read: Callable[[Section], None]) -> Any:
    """Checks ``value`` with ``read`` and keeps a JSON copy of it; ``None`` stays ``None``."""
    if value is None:
        return None
    sec = Section(problems, path, value)
    read(sec)
    sec.finish()
    return sec.json_copy()


def _slurm(sec: Section) -> None:
    sec.integer("slots_per_node", None, minimum=1)
    sec.string("gpu_type", None)
    _strings(sec, "sbatch_args")


def _pbs(sec: Section) -> None:
    sec.integer("slots_per_node", None, minimum=1)
    _strings(sec, "pbsbatch_args")


def _security(sec: Section) -> None:
    kerberos = sec.child("kerberos")
    kerberos.string("config_file", None)
    kerberos.finish()


def _abs_path(sec: Section, key: str) -> str | None:
    return sec.get(key, None, lambda p, v: as_abs_path(sec.problems, p, v))


def _data_layer(sec: Section) -> None:
    kind = sec.required_choice("type", DATA_LAYER_TYPES)
    if kind is None:
        sec.skip_rest()
    elif kind == "shared_fs":
        _abs_path(sec, "host_storage_path")
        _abs_path(sec, "container_storage_path")
    else:
        sec.string("bucket", None)
        sec.string("bucket_directory_path", None)
        host = _abs_path(sec, "local_cache_host_path")
        container = _abs_path(sec, "local_cache_container_path")
        if host is not None and container is None:
            sec.problems.add(
                sec.at("local_cache_container_path"), "required when local_cache_host_path is set"
            )
        if container is not None and host is None:
            sec.problems.add(
                sec.at("local_cache_host_path"), "required when local_cache_container_path is set"
            )
        if kind == "s3":
            sec.string("access_key", None)
            sec.string("secret_key", None)
            sec.string("endpoint_url", None)


def _internal(sec: Section) -> None:
    for key in sec.keys():
        sec.raw(key)  # Determined's own bookkeeping (native, ...): kept as written.


def _address(sec: Section) -> None:
    sec.string("host", None)
    sec.integer("port", None, minimum=1, maximum=65535)


def _integrations(sec: Section) -> None:
    if sec.has("pachyderm"):
        pachyderm = sec.child("pachyderm")
        for key in ("pachd", "proxy"):
            address = pachyderm.child(key)
            if key == "proxy":
                address.string("scheme", None)  # http or https, as Determined's schema has it
            _address(address)
            address.finish()
        dataset = pachyderm.child("dataset")
        for key in ("project", "repo", "commit", "branch", "token"):
            dataset.string(key, None)
        dataset.finish()
        pachyderm.finish()
    if sec.has("webhooks"):
        webhooks = sec.child("webhooks")
        webhooks.list_of("webhook_id", lambda p, v: as_int(sec.problems, p, v))
        _strings(webhooks, "webhook_name")
        webhooks.boolean("exclude", False)
        webhooks.finish()


def _retention_policy(sec: Section) -> None:
    sec.integer("log_retention_days", None, minimum=-1, maximum=32767)


_READERS: dict[str, Callable[[Section], None]] = {
    "slurm": _slurm,
    "pbs": _pbs,
    "security": _security,
    "data_layer": _data_layer,
    "internal": _internal,
    "integrations": _integrations,
    "retention_policy": _retention_policy,
}


# What Determined fills in for an absent data_layer.
_DEFAULT_DATA_LAYER = {
    "type": "shared_fs",
    "host_storage_path": None,
    "container_storage_path": None,
}


def default_kept() -> dict[str, Any]:
    """The kept sections of a config that sets none of them."""
    return {**{key: None for key in _READERS}, "data_layer": dict(_DEFAULT_DATA_LAYER)}


def parse_kept(sec: Section) -> dict[str, Any]:
    """Every kept section of the top-level config, checked, as JSON (absent ones as ``None``,
    but for data_layer, which has Determined's default)."""
    kept = {
        key: _read(sec.problems, sec.at(key), sec.raw(key), read) for key, read in _READERS.items()
    }
    if kept["data_layer"] is None:
        kept["data_layer"] = dict(_DEFAULT_DATA_LAYER)
    return kept
