"""Determined's ``determined.common.api`` namespace, for the names scripts import from it.

Only ``errors`` is here: the exceptions the SDK raises, under Determined's names (scripts
write ``except api.errors.NotFoundException``). pydet's SDK talks to the master through
its own client (``determined.common.client``), so Determined's generated REST ``bindings``
and its ``Session`` are not provided.
"""

from __future__ import annotations

from determined.common.api import errors

__all__ = ["errors"]
