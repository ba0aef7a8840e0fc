"""How the ``determined`` harness reaches a task container: installed in it, or mounted.

Every task starts as ``python3 -m determined.exec.launch``, so the container's Python must
import ``determined``. Images built from the project's Dockerfile have it installed (and say
so with the ``ai.pydet.harness`` label); any other image with Python 3.11+ gets the agent
host's own copy of the harness and of its pure-Python dependencies, mounted read-only under
``/run/determined/pylib`` and put first on ``PYTHONPATH``. Mounting, not copying, keeps the
harness in a task the same version as the agent's, and the image untouched.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
from dataclasses import dataclass
from functools import cache

log = logging.getLogger(__name__)

# The label the project's Dockerfile sets on images that have the harness installed.
HARNESS_LABEL = "ai.pydet.harness"
PYLIB = "/run/determined/pylib"

MODES = ("auto", "image", "mount")

# What `determined` imports at run time, as top-level import names: the harness itself, its
# gRPC stack and its config parsing. Optional imports (pydantic, torch, ...) stay out: the
# image provides them or the harness does without.
HARNESS_IMPORTS = (
    "determined",
    "betterproto2",
    "grpclib",
    "h2",
    "hpack",
    "hyperframe",
    "multidict",
    "pathspec",
    "yaml",
    "dateutil",
    "six",
    "typing_extensions",
)


@dataclass(frozen=True)
class HostPath:
    """A package directory or a single-module file on the agent's host, and its name."""

    host_path: str
    name: str  # what it is called under PYLIB


@cache
def host_packages() -> tuple[HostPath, ...]:
    """Where this interpreter finds each of ``HARNESS_IMPORTS``, without importing them,
    and the metadata (``.dist-info``) of the distributions they come from: some read their
    own version with ``importlib.metadata`` when imported."""
    found = []
    for name in HARNESS_IMPORTS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin in (None, "built-in", "frozen"):
            if name == "determined":
                raise RuntimeError("the determined harness is not importable on this host")
            log.debug("harness dependency %s is not installed here; not mounting it", name)
            continue
        if spec.submodule_search_locations:
            locations = list(spec.submodule_search_locations)
            found.append(HostPath(os.path.realpath(locations[0]), name))
        else:
            assert spec.origin is not None
            path = os.path.realpath(spec.origin)
            found.append(HostPath(path, os.path.basename(path)))
    dists = importlib.metadata.packages_distributions()
    for name in HARNESS_IMPORTS[1:]:  # `determined` reads no metadata of its own
        for dist_name in dists.get(name, []):
            info = _dist_info(dist_name)
            if info is not None and all(f.host_path != info for f in found):
                found.append(HostPath(info, os.path.basename(info)))
    return tuple(found)


def _dist_info(dist_name: str) -> str | None:
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if f.parent.name.endswith(".dist-info") and f.name == "METADATA":
            return os.path.realpath(str(dist.locate_file(f.parent)))
    return None


def use_mount(mode: str, image_labels: dict[str, str] | None) -> bool:
    """Whether to mount the harness: always for ``mount``, never for ``image``, and for
    ``auto`` unless the image carries the label of an installed harness."""
    if mode == "mount":
        return True
    if mode == "image":
        return False
    return not (image_labels or {}).get(HARNESS_LABEL)
