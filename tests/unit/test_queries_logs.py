"""A trial's task logs through `det trial logs`' filters."""

from __future__ import annotations

from pydet.master import queries
from pydet.master.queries import LogFilter
from pydet.master.store.db import Database


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


async def test_lines_are_selected_by_where_and_when_they_were_written(store: Database) -> None:
    for i, (alloc, agent, container, stdtype) in enumerate(
        [
            ("1.1.1", "a0", "c0", "stdout"),
            ("1.1.1", "a1", "c1", "stderr"),
            ("1.1.2", "a0", "c2", "stdout"),
        ]
    ):
        await store.execute(
            "INSERT INTO task_logs (trial_id, task_id, allocation_id, agent_id, container_id,"
            " stdtype, level, timestamp, message) VALUES (1, '1.1', ?, ?, ?, ?, 'INFO', ?, ?)",
            (alloc, agent, container, stdtype, float(10 * i), f"line {i}"),
        )
    assert await messages(store, LogFilter(allocation_ids=("1.1.2",))) == ["line 2"]
    assert await messages(store, LogFilter(agent_ids=("a0",))) == ["line 0", "line 2"]
    assert await messages(store, LogFilter(container_ids=("c1", "c2"))) == ["line 1", "line 2"]
    assert await messages(store, LogFilter(stdtypes=("stderr",))) == ["line 1"]
    assert await messages(store, LogFilter(timestamp_before=10.0)) == ["line 0"]
    assert await messages(store, LogFilter(timestamp_after=0.0, timestamp_before=20.0)) == [
        "line 1"
    ]
