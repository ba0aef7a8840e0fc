"""What the workspace and project lists share: the owner and archived filters, and one page
of rows with the count of all the filters select."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from determined.common import errors
from pydet.master.store.db import Database, Row


@dataclass(frozen=True)
class ListFilter:
    """What every list of owned things takes: archived or not, their owners (by name or
    id), an order and a page."""

    archived: bool | None = None
    users: Sequence[str] = ()
    user_ids: Sequence[int] = ()
    order_by: str = "id"
    descending: bool = False
    offset: int = 0
    # 0: all of them.
    limit: int = 0


def order(columns: dict[str, str], key: str) -> str:
    """The column ``key`` sorts by, or InvalidArgument naming the keys there are."""
    column = columns.get(key)
    if column is None:
        raise errors.InvalidArgument(f"sort_by: expected one of {', '.join(columns)}, got {key!r}")
    return column


def owned(
    alias: str, *, archived: bool | None, users: Sequence[str], user_ids: Sequence[int]
) -> tuple[list[str], list[Any]]:
    """WHERE clauses (and their parameters) for the rows of table ``alias`` archived or not
    and owned by these users (``u`` is the owners' table)."""
    where = ["1 = 1"]
    params: list[Any] = []
    if archived is not None:
        where.append(f"{alias}.archived = ?")
        params.append(int(archived))
    if users:
        where.append(f"u.username IN ({','.join('?' * len(users))})")
        params.extend(users)
    if user_ids:
        where.append(f"{alias}.user_id IN ({','.join('?' * len(user_ids))})")
        params.extend(user_ids)
    return where, params


async def page(
    db: Database,
    *,
    select: str,
    table: str,
    where: Sequence[str],
    params: Sequence[Any],
    order: str,
    descending: bool,
    offset: int,
    limit: int,
) -> tuple[list[Row], int]:
    """Rows ``offset`` to ``offset + limit`` (all with limit 0) of ``select`` in ``order``
    (ties by id), and how many ``where`` selects from ``table`` (aliased as ``select`` does,
    its owners as ``u``)."""
    clause = " AND ".join(where)
    alias = table.split()[-1]
    total = await db.fetch_one(
        f"SELECT COUNT(*) AS n FROM {table} LEFT JOIN users u ON u.id = {alias}.user_id"
        f" WHERE {clause}",
        list(params),
    )
    rows = await db.fetch_all(
        f"{select} WHERE {clause} ORDER BY {order} {'DESC' if descending else 'ASC'},"
        f" {alias}.id LIMIT ? OFFSET ?",
        [*params, limit or -1, offset],
    )
    return rows, total["n"] if total is not None else 0
