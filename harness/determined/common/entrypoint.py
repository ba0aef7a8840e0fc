"""Checks that an experiment's entrypoint can run from its context, before anything is
created: a script or Trial module that is not in the context is a submission error, not a
trial that fails five times."""

from __future__ import annotations

import shlex
from collections.abc import Collection, Sequence

from determined.common import errors

_PYTHONS = {"python", "python3"}


def missing_file(entrypoint: str | Sequence[str], files: Collection[str]) -> str | None:
    """The context-relative file the entrypoint needs but the context lacks, if any."""
    if isinstance(entrypoint, str):
        if ":" in entrypoint and " " not in entrypoint.strip():
            module = entrypoint.split(":", 1)[0]
            path = module.replace(".", "/")
            if f"{path}.py" in files or f"{path}/__init__.py" in files:
                return None
            return f"{path}.py"
        try:
            argv = shlex.split(entrypoint)
        except ValueError:
            return None
    else:
        argv = list(entrypoint)
    # Only the plain `python3 script.py ...` form can be checked without running anything.
    if len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] in _PYTHONS and argv[1].endswith(".py"):
        script = argv[1].removeprefix("./")
        if not script.startswith("/") and script not in files:
            return script
    return None


def check(entrypoint: str | Sequence[str], files: Collection[str]) -> None:
    missing = missing_file(entrypoint, files)
    if missing is not None:
        raise errors.InvalidArgument(
            f"entrypoint: {missing} is not in the context directory (was it ignored by "
            ".detignore, or is the context directory wrong?)"
        )
