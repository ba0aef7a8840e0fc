"""A trial's task logs through `det trial logs`' filters."""

from __future__ import annotations

from pydet.master import queries
from pydet.master.db import Database
from pydet.master.queries import LogFilter


async def line(db: Database, trial_id: int, message: str, *, level: str, rank: int) -> None:
    await db.execute(
        "INSERT INTO task_logs (trial_id, task_id, allocation_id, rank, level, timestamp,"
        " message) VALUES (?, '1.1', 'a', ?, ?, 0, ?)",
        (trial_id, rank, level, message),
    )


async def messages(db: Database, f: LogFilter, limit: int = 0) -> list[str]:
    return [r.message for r in await queries.task_logs(db, 1, f, limit=limit)]


async def test_filters_select_lines_and_tail_keeps_the_last_ones_in_order(
    store: Database,
) -> None:
    levels = ["DEBUG", "INFO", "WARNING", "ERROR"]
    for i in range(8):
        await line(store, 1, f"line {i}", level=levels[i % 4], rank=i % 2)
    await line(store, 2, "another trial", level="ERROR", rank=0)

    assert await messages(store, LogFilter(tail=3)) == ["line 5", "line 6", "line 7"]
    assert await messages(store, LogFilter(head=2)) == ["line 0", "line 1"]
    assert await messages(store, LogFilter(min_level="warning")) == [
        "line 2",
        "line 3",
        "line 6",
        "line 7",
    ]
    assert await messages(store, LogFilter(rank_ids=(1,), search="line 1")) == ["line 1"]
    assert await messages(store, LogFilter(after_id=6), limit=1) == ["line 6"]
