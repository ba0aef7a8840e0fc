"""Asking before something that cannot be undone: ``--yes`` goes on, a terminal is asked,
and without one (a script) the command stops, saying to pass ``--yes``."""

from __future__ import annotations

import sys

from determined.common import errors


def confirmed(yes: bool, *, what: str, question: str) -> bool:
    """Whether to go on with ``what`` ("deleting experiment 3"), asking ``question`` (which
    ends with "[y/N] ") on a terminal."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise errors.InvalidArgument(f"{what} needs confirmation; pass --yes to confirm")
    return input(question).strip().lower() in ("y", "yes")
