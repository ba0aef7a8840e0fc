"""Host directories mounted into task containers."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Literal

from determined.common.expconf._reader import Problems, Section, as_str

Propagation = Literal["rprivate", "private", "rshared", "shared", "rslave", "slave"]
PROPAGATIONS: tuple[Propagation, ...] = (
    "rprivate",
    "private",
    "rshared",
    "shared",
    "rslave",
    "slave",
)


@dataclass(frozen=True)
class BindMount:
    """A host path seen inside the container; a relative ``container_path`` is relative to the
    task's working directory."""

    host_path: str
    container_path: str
    read_only: bool = False
    propagation: Propagation = "rprivate"

    def to_dict(self) -> dict[str, Any]:
        return {
            "host_path": self.host_path,
            "container_path": self.container_path,
            "read_only": self.read_only,
            "propagation": self.propagation,
        }


def as_abs_path(problems: Problems, path: str, value: Any) -> str | None:
    text = as_str(problems, path, value, non_empty=True)
    if text is not None and not posixpath.isabs(text):
        problems.add(path, f"must be an absolute path, got {text!r}")
        return None
    return text


def parse_bind_mount(problems: Problems, path: str, value: Any) -> BindMount | None:
    sec = Section(problems, path, value)
    host_path = sec.need("host_path", lambda p, v: as_abs_path(problems, p, v))
    container_path = sec.required_string("container_path")
    read_only = sec.boolean("read_only", False)
    propagation = sec.choice("propagation", "rprivate", PROPAGATIONS)
    sec.finish()
    if host_path is None or container_path is None:
        return None
    return BindMount(host_path, container_path, read_only, propagation)


def parse_bind_mounts(sec: Section, key: str) -> tuple[BindMount, ...]:
    mounts = sec.list_of(key, lambda p, v: parse_bind_mount(sec.problems, p, v))
    return () if mounts is None else mounts
