"""Checks an experiment's entrypoint against its context before anything is created: a
script or Trial module that the context lacks is said at once, not found by a trial that
fails five times. It is a warning, not a refusal, as in Determined: the image may provide
the file."""

from __future__ import annotations

import shlex
from collections.abc import Collection, Sequence

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


def warning(entrypoint: str | Sequence[str], files: Collection[str]) -> str | None:
    """What to tell the user when the entrypoint's file is not in the context, if so."""
    missing = missing_file(entrypoint, files)
    if missing is None:
        return None
    return (
        f"entrypoint: {missing} is not in the context directory; the experiment was created "
        "anyway, as the image may provide it (was it ignored by .detignore, or is the "
        "context directory wrong?)"
    )
