"""A trial's task logs, with `det trial logs`' filters."""

from __future__ import annotations

from dataclasses import dataclass

from pydet.master.store.db import Database, Row

LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


@dataclass(frozen=True)
class LogFilter:
    head: int = 0
    tail: int = 0
    rank_ids: tuple[int, ...] = ()
    levels: tuple[str, ...] = ()
    # This level and every level above it.
    min_level: str = ""
    search: str = ""
    # Only lines after this one (by id): where a follower left off.
    after_id: int = 0
    allocation_ids: tuple[str, ...] = ()
    agent_ids: tuple[str, ...] = ()
    container_ids: tuple[str, ...] = ()
    stdtypes: tuple[str, ...] = ()
    # Determined's log sources: "master" (lines the master wrote, stdtype "master") and
    # "agent" (what the task's processes wrote).
    sources: tuple[str, ...] = ()
    timestamp_before: float | None = None
    timestamp_after: float | None = None


@dataclass(frozen=True)
class LogRow:
    id: int
    trial_id: int
    task_id: str
    allocation_id: str
    agent_id: str
    container_id: str
    rank: int | None
    level: str
    stdtype: str
    timestamp: float
    message: str


async def task_logs(
    db: Database, trial_id: int, f: LogFilter, *, limit: int = 0, task_id: str = ""
) -> list[LogRow]:
    """The trial's lines (or, given ``task_id``, the task's) that pass ``f``, oldest first;
    at most ``limit`` when no head or tail is asked for."""
    where = ["task_id = ?" if task_id else "trial_id = ?", "id > ?"]
    params: list[object] = [task_id or trial_id, f.after_id]
    if f.rank_ids:
        where.append(f"rank IN ({','.join('?' * len(f.rank_ids))})")
        params.extend(f.rank_ids)
    levels = list(f.levels)
    if f.min_level and f.min_level.upper() in LEVELS:
        levels += LEVELS[LEVELS.index(f.min_level.upper()) :]
    if levels:
        where.append(f"level IN ({','.join('?' * len(levels))})")
        params.extend(level.upper() for level in levels)
    if f.search:
        where.append("instr(message, ?) > 0")
        params.append(f.search)
    for column, values in (
        ("allocation_id", f.allocation_ids),
        ("agent_id", f.agent_ids),
        ("container_id", f.container_ids),
        ("stdtype", f.stdtypes),
    ):
        if values:
            where.append(f"{column} IN ({','.join('?' * len(values))})")
            params.extend(values)
    if f.sources:
        chosen = {"master", "agent"} & set(f.sources)
        if chosen == {"master"}:
            where.append("stdtype = 'master'")
        elif chosen == {"agent"}:
            where.append("stdtype != 'master'")
        elif not chosen:
            where.append("1 = 0")
    if f.timestamp_before is not None:
        where.append("timestamp < ?")
        params.append(f.timestamp_before)
    if f.timestamp_after is not None:
        where.append("timestamp > ?")
        params.append(f.timestamp_after)
    sql = f"SELECT * FROM task_logs WHERE {' AND '.join(where)}"
    if f.tail and not f.after_id:
        rows = await db.fetch_all(f"{sql} ORDER BY id DESC LIMIT ?", [*params, f.tail])
        return [_row(r) for r in reversed(rows)]
    n = f.head or limit
    if n:
        return [_row(r) for r in await db.fetch_all(f"{sql} ORDER BY id LIMIT ?", [*params, n])]
    return [_row(r) for r in await db.fetch_all(f"{sql} ORDER BY id", params)]


def _row(r: Row) -> LogRow:
    return LogRow(
        id=r["id"],
        trial_id=r["trial_id"] or 0,
        task_id=r["task_id"],
        allocation_id=r["allocation_id"],
        agent_id=r["agent_id"],
        container_id=r["container_id"],
        rank=r["rank"],
        level=r["level"],
        stdtype=r["stdtype"],
        timestamp=r["timestamp"],
        message=r["message"],
    )
