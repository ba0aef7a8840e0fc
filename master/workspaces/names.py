"""The names workspaces and projects may have, and projects' keys (as Determined's)."""

from __future__ import annotations

import re
import secrets
import string

from determined.common import errors

# Determined's longest workspace or project name.
MAX_NAME = 80
MAX_DESCRIPTION = 4096
# A project's key: 1 to 5 letters and digits, stored upper case; a generated one starts
# with up to 3 characters of the project's name.
MAX_KEY = 5
MAX_KEY_PREFIX = 3
_KEY = re.compile(r"^[A-Za-z0-9]{1,5}$")
_KEY_ALPHABET = string.ascii_uppercase + string.digits


def check_name(kind: str, name: str) -> str:
    """``name`` if a workspace or project (``kind``) may have it, else InvalidArgument."""
    if not name.strip():
        raise errors.InvalidArgument(f"{kind} name: must contain a non-whitespace character")
    if len(name) > MAX_NAME:
        raise errors.InvalidArgument(
            f"{kind} name {name[:20]!r}...: at most {MAX_NAME} characters, got {len(name)}"
        )
    return name


def check_description(description: str) -> str:
    if len(description) > MAX_DESCRIPTION:
        raise errors.InvalidArgument(f"description: at most {MAX_DESCRIPTION} characters")
    return description


def check_key(key: str) -> str:
    """A project key as stored (upper case), or InvalidArgument saying what keys are."""
    if not _KEY.match(key):
        raise errors.InvalidArgument(
            f"project key {key!r}: 1 to {MAX_KEY} letters and digits (A-Z, 0-9)"
        )
    return key.upper()


def generated_key(name: str) -> str:
    """A key for a project named ``name``: its first letters and digits, then random ones."""
    prefix = "".join(c for c in name.upper() if c in _KEY_ALPHABET)[:MAX_KEY_PREFIX]
    suffix = "".join(secrets.choice(_KEY_ALPHABET) for _ in range(MAX_KEY - len(prefix)))
    return prefix + suffix
