"""The config of a command, notebook or shell (Determined's command config): what it runs,
where (resources, environment, bind mounts) and when it is ended for being idle."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from determined.common.expconf._config import _entrypoint, top_section
from determined.common.expconf._environment import EnvironmentConfig, parse_environment
from determined.common.expconf._errors import InvalidConfig
from determined.common.expconf._mounts import BindMount, parse_bind_mounts
from determined.common.expconf._reader import Problems, describe
from determined.common.expconf._resources import ResourcesConfig, parse_resources

NOTEBOOK_IDLE_TYPES = ("kernels_or_terminals", "kernel_connections", "activity")
# Go's durations, as Determined reads ``idle_timeout``: "30m", "1h30m", "90s", "1.5h".
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# Read for Determined's configs, unused by pydet.
_KEPT = ("pbs", "slurm")


def parse_duration(text: str) -> float | None:
    """Seconds in a Go duration ("30m", "1h30m", "2.5s"); None if ``text`` is not one."""
    text = text.strip()
    pos, total = 0, 0.0
    for found in _DURATION_PART.finditer(text):
        if found.start() != pos:
            return None
        total += float(found.group(1)) * _UNIT_SECONDS[found.group(2)]
        pos = found.end()
    return total if text and pos == len(text) else None


@dataclass(frozen=True, kw_only=True)
class CommandConfig:
    description: str | None = None
    entrypoint: str | tuple[str, ...] | None = None
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    bind_mounts: tuple[BindMount, ...] = ()
    # As written ("30m"), and in seconds.
    idle_timeout: str | None = None
    idle_timeout_seconds: float | None = None
    notebook_idle_type: str = NOTEBOOK_IDLE_TYPES[0]
    work_dir: str | None = None
    debug: bool = False
    tensorboard_args: tuple[str, ...] = ()
    kept: Mapping[str, Any] | None = None

    @property
    def slots(self) -> int:
        """``resources.slots``: 1 unless set (0 is a CPU-only task)."""
        return 1 if self.resources.slots is None else self.resources.slots

    def to_dict(self) -> dict[str, Any]:
        entrypoint = self.entrypoint
        resources = self.resources.to_dict()
        resources["slots"] = self.slots
        resources.pop("slots_per_trial", None)
        return {
            "description": self.description or "",
            "entrypoint": (
                None
                if entrypoint is None
                else entrypoint
                if isinstance(entrypoint, str)
                else list(entrypoint)
            ),
            "resources": resources,
            "environment": self.environment.to_dict(),
            "bind_mounts": [m.to_dict() for m in self.bind_mounts],
            "idle_timeout": self.idle_timeout,
            "notebook_idle_type": self.notebook_idle_type,
            "work_dir": self.work_dir,
            "debug": self.debug,
            "tensorboard_args": list(self.tensorboard_args),
            **dict(self.kept or {}),
        }


def _idle_timeout(problems: Problems, path: str, value: Any) -> tuple[str, float] | None:
    if isinstance(value, str):
        seconds = parse_duration(value)
        if seconds is not None and seconds > 0:
            return value, seconds
    problems.add(path, f"expected a duration such as '30m', '1h' or '90s', got {describe(value)}")
    return None


def parse_command_config(
    raw: Mapping[str, Any], defaults: Mapping[str, Any] | None = None, *, entrypoint: bool = False
) -> CommandConfig:
    """Validates a command's config over the master's ``defaults``, reporting every problem;
    ``entrypoint`` says one is required (a command's; a notebook or shell runs its own).

    Raises ``InvalidConfig`` listing all problems, each as ``"<path>: <problem>"``.
    """
    sec = top_section(raw, defaults)
    problems = sec.problems
    description = sec.string("description", None)
    command = _entrypoint(sec) if entrypoint or sec.has("entrypoint") else sec.raw("entrypoint")
    resources = parse_resources(sec.child("resources"))
    if resources.slots is not None and resources.slots < 0:
        problems.add("resources.slots", f"must be at least 0 (0: no GPU), got {resources.slots}")
    environment = parse_environment(sec.child("environment"))
    bind_mounts = parse_bind_mounts(sec, "bind_mounts")
    idle = sec.get("idle_timeout", None, lambda p, v: _idle_timeout(problems, p, v))
    idle_type = sec.choice("notebook_idle_type", NOTEBOOK_IDLE_TYPES[0], NOTEBOOK_IDLE_TYPES)
    work_dir = sec.string("work_dir", None) or None
    debug = sec.boolean("debug", False)
    tensorboard_args = sec.strings("tensorboard_args")
    kept = {key: sec.raw(key) for key in _KEPT if sec.raw(key) is not None}
    sec.finish()
    if problems or (entrypoint and command is None):
        raise InvalidConfig(problems.errors or ["entrypoint: required"])
    return CommandConfig(
        description=description,
        entrypoint=command,
        resources=resources,
        environment=environment,
        bind_mounts=bind_mounts,
        idle_timeout=idle[0] if idle else None,
        idle_timeout_seconds=idle[1] if idle else None,
        notebook_idle_type=idle_type,
        work_dir=work_dir,
        debug=debug,
        tensorboard_args=tensorboard_args,
        kept=kept,
    )
