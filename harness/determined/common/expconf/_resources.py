"""What a trial asks the scheduler for: slots, pool, priority and container devices."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from determined.common.expconf._mounts import as_abs_path
from determined.common.expconf._reader import Problems, Section, as_int, as_str, describe

# A memory size as Determined reads one: a number, at most one space, then an optional unit
# (b, or k/m/g/t/p optionally followed by b or ib): "4G", "512 mb", "1.5GiB", ".5g", "1024b".
# "1 gi" (a binary prefix without its b) is not a size.
_SIZE = re.compile(r"^(?:[0-9]*\.)?[0-9]+ ?(?:[kmgtpKMGTP](?:[iI]?[bB])?|[bB])?$")
_DEVICE_MODE = re.compile(r"^[rwm]+$")


@dataclass(frozen=True)
class Device:
    """A host device node exposed in the container; ``mode`` is cgroup access (r, w, m)."""

    host_path: str
    container_path: str
    mode: str = "mrw"

    def to_dict(self) -> dict[str, Any]:
        return {
            "host_path": self.host_path,
            "container_path": self.container_path,
            "mode": self.mode,
        }


@dataclass(frozen=True, kw_only=True)
class ResourcesConfig:
    """Scheduling requests. ``slots_per_trial=0`` asks for a CPU-only task; an empty
    ``resource_pool`` means the master's default pool."""

    slots_per_trial: int = 1
    max_slots: int | None = None
    weight: float = 1.0
    priority: int | None = None
    resource_pool: str = ""
    shm_size: int | str | None = None
    devices: tuple[Device, ...] = ()
    agent_label: str = ""
    is_single_node: bool = False
    native_parallel: bool = False
    slots: int | None = None  # Determined accepts it and does nothing with it; so does pydet.

    def to_dict(self) -> dict[str, Any]:
        return {
            "slots_per_trial": self.slots_per_trial,
            "max_slots": self.max_slots,
            "weight": self.weight,
            "priority": self.priority,
            "resource_pool": self.resource_pool,
            "shm_size": self.shm_size,
            "devices": [d.to_dict() for d in self.devices],
            "agent_label": self.agent_label,
            "is_single_node": self.is_single_node,
            "native_parallel": self.native_parallel,
            "slots": self.slots,
        }


def _shm_size(problems: Problems, path: str, value: Any) -> int | str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return as_int(problems, path, value, minimum=0)
    if isinstance(value, str) and _SIZE.match(value):
        return value
    problems.add(
        path,
        "expected a size in bytes or a string like '4G', '512 MB' or '1GiB', "
        f"got {describe(value)}",
    )
    return None


def _mode(problems: Problems, path: str, value: Any) -> str | None:
    text = as_str(problems, path, value)
    if text is not None and not _DEVICE_MODE.match(text):
        problems.add(path, f"expected a combination of r, w and m, got {text!r}")
        return None
    return text


def _device(problems: Problems, path: str, value: Any) -> Device | None:
    if isinstance(value, str):
        # Docker's short form: host[:container[:mode]].
        parts = value.split(":")
        if len(parts) > 3:
            problems.add(path, f"expected 'host_path[:container_path[:mode]]', got {value!r}")
            return None
        host = as_abs_path(problems, path, parts[0])
        container = parts[1] if len(parts) > 1 else parts[0]
        mode = _mode(problems, path, parts[2]) if len(parts) > 2 else "mrw"
        if host is None or mode is None:
            return None
        return Device(host, container, mode)
    sec = Section(problems, path, value)
    host_path = sec.need("host_path", lambda p, v: as_abs_path(problems, p, v))
    container_path = sec.required_string("container_path")
    mode = sec.get("mode", "mrw", lambda p, v: _mode(problems, p, v))
    sec.finish()
    if host_path is None or container_path is None:
        return None
    return Device(host_path, container_path, mode)


def parse_resources(sec: Section) -> ResourcesConfig:
    config = ResourcesConfig(
        slots_per_trial=sec.integer("slots_per_trial", 1, minimum=0),
        max_slots=sec.integer("max_slots", None, minimum=1),
        weight=sec.number("weight", 1.0, above=0),
        priority=sec.integer("priority", None, minimum=1, maximum=99),
        resource_pool=sec.string("resource_pool", ""),
        shm_size=_shm_size(sec.problems, sec.at("shm_size"), sec.raw("shm_size")),
        devices=sec.list_of("devices", lambda p, v: _device(sec.problems, p, v)) or (),
        agent_label=sec.string("agent_label", ""),
        is_single_node=sec.boolean("is_single_node", False),
        native_parallel=sec.boolean("native_parallel", False),
        slots=sec.integer("slots", None),
    )
    sec.finish()
    return config
