"""The ``Pagination`` an API list answers with: how a list of ``total`` was cut."""

from __future__ import annotations

from determined.api.gen import v1


def pagination(total: int, offset: int = 0, limit: int = 0) -> v1.Pagination:
    """How a list of ``total`` was cut by ``offset`` and ``limit`` (0: no limit), as
    Determined's API reports it: what was returned is ``[start_index, end_index)``."""
    start = min(max(offset, 0), total)
    end = total if limit <= 0 else min(start + limit, total)
    return v1.Pagination(offset=offset, limit=limit, start_index=start, end_index=end, total=total)
