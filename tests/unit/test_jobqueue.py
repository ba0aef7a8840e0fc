from __future__ import annotations

import pytest

from determined.common import errors
from pydet.master.config import PoolConfig
from pydet.master.jobs.ordering import (
    STATE_QUEUED,
    STATE_SCHEDULED,
    JobUpdate,
    QueuedJob,
    ahead_of,
    apply_updates,
    behind_of,
    queue_rows,
)

POOLS = (PoolConfig("default"), PoolConfig("fair", scheduler="fair_share"), PoolConfig("a100"))


def listed(jobs: list[QueuedJob], pool: str = "default", scheduler: str = "priority") -> list[str]:
    return [row.job.job_id for row in queue_rows(jobs, resource_pool=pool, scheduler=scheduler)]


def apply(jobs: list[QueuedJob], changes: list[QueuedJob]) -> list[QueuedJob]:
    by_id = {j.job_id: j for j in changes}
    return [by_id.get(j.job_id, j) for j in jobs]


def fifo(*ids: str, resource_pool: str = "default") -> list[QueuedJob]:
    return [
        QueuedJob(job_id, order=float(i), resource_pool=resource_pool)
        for i, job_id in enumerate(ids, 1)
    ]


def test_queue_lists_by_priority_then_position() -> None:
    jobs = [
        QueuedJob("late-urgent", priority=1, order=3),
        QueuedJob("first", order=1),
        QueuedJob("second", order=2),
    ]
    assert listed(jobs) == ["late-urgent", "first", "second"]


def test_queue_shows_scheduled_and_queued_jobs_and_drops_ended_ones() -> None:
    jobs = [
        QueuedJob("running", order=1, scheduled=True),
        QueuedJob("done", order=2, ended=True),
        QueuedJob("waiting", order=3),
        QueuedJob("elsewhere", order=4, resource_pool="a100"),
    ]
    rows = queue_rows(jobs, resource_pool="default", scheduler="priority")
    assert [(r.position, r.job.job_id, r.state) for r in rows] == [
        (0, "running", STATE_SCHEDULED),
        (1, "waiting", STATE_QUEUED),
    ]


def test_fair_share_queue_is_in_submission_order() -> None:
    jobs = [QueuedJob("urgent", priority=1, order=2), QueuedJob("first", order=1)]
    assert listed(jobs, scheduler="fair_share") == ["first", "urgent"]


def test_ahead_of_puts_the_job_immediately_before_the_other() -> None:
    jobs = fifo("a", "b", "c", "d")
    assert listed(apply(jobs, ahead_of(jobs, "d", "b"))) == ["a", "d", "b", "c"]
    assert listed(apply(jobs, ahead_of(jobs, "c", "a"))) == ["c", "a", "b", "d"]


def test_behind_of_puts_the_job_immediately_after_the_other() -> None:
    jobs = fifo("a", "b", "c", "d")
    assert listed(apply(jobs, behind_of(jobs, "a", "c"))) == ["b", "c", "a", "d"]
    assert listed(apply(jobs, behind_of(jobs, "a", "d"))) == ["b", "c", "d", "a"]


def test_moving_next_to_a_job_of_another_priority_takes_its_priority() -> None:
    jobs = [*fifo("a", "b"), QueuedJob("urgent", priority=5, order=3)]
    (moved,) = ahead_of(jobs, "b", "urgent")
    assert moved.priority == 5
    assert listed(apply(jobs, [moved])) == ["b", "urgent", "a"]


def test_a_job_already_in_place_is_left_alone() -> None:
    jobs = fifo("a", "b", "c")
    assert ahead_of(jobs, "a", "b") == []
    assert behind_of(jobs, "c", "b") == []


def test_repeated_moves_into_one_gap_keep_the_order_exact() -> None:
    jobs = fifo("a", "b", *(f"j{i}" for i in range(200)))
    # Each job goes right behind "a", halving the gap each time until floats run out.
    for i in range(200):
        jobs = apply(jobs, behind_of(jobs, f"j{i}", "a"))
    assert listed(jobs) == ["a", *(f"j{i}" for i in reversed(range(200))), "b"]


def test_the_documented_workflow() -> None:
    jobs = [
        QueuedJob("0d714127", order=1, scheduled=True),
        QueuedJob("73853c5c", order=2),
    ]
    jobs = apply(jobs, apply_updates(jobs, [JobUpdate("73853c5c", ahead_of="0d714127")], POOLS))
    assert listed(jobs) == ["73853c5c", "0d714127"]
    batch = [JobUpdate("73853c5c", priority=1), JobUpdate("0d714127", priority=1)]
    jobs = apply(jobs, apply_updates(jobs, batch, POOLS))
    assert [(j.job_id, j.priority) for j in jobs] == [("0d714127", 1), ("73853c5c", 1)]
    assert listed(jobs) == ["73853c5c", "0d714127"]


def test_a_batch_sees_the_updates_before_it() -> None:
    jobs = fifo("a", "b", "c")
    batch = [JobUpdate("a", priority=10), JobUpdate("c", ahead_of="a")]
    changed = {j.job_id: j for j in apply_updates(jobs, batch, POOLS)}
    assert changed["c"].priority == 10
    assert listed(apply(jobs, list(changed.values()))) == ["c", "a", "b"]


def test_a_batch_with_one_bad_update_changes_nothing() -> None:
    jobs = fifo("a", "b")
    batch = [JobUpdate("a", priority=10), JobUpdate("nope", priority=1)]
    with pytest.raises(errors.NotFound, match="job nope not found"):
        apply_updates(jobs, batch, POOLS)


def test_unknown_anchor_is_named() -> None:
    with pytest.raises(errors.NotFound, match="job ghost"):
        apply_updates(fifo("a"), [JobUpdate("a", behind_of="ghost")], POOLS)


def test_ended_jobs_cannot_be_updated() -> None:
    jobs = [QueuedJob("old", ended=True)]
    with pytest.raises(errors.NotFound, match="job old"):
        apply_updates(jobs, [JobUpdate("old", priority=3)], POOLS)


def test_a_job_cannot_move_relative_to_itself() -> None:
    with pytest.raises(errors.InvalidArgument, match="itself"):
        apply_updates(fifo("a"), [JobUpdate("a", ahead_of="a")], POOLS)


def test_jobs_are_only_ordered_within_one_pool() -> None:
    jobs = [QueuedJob("a"), QueuedJob("b", resource_pool="a100", order=1)]
    with pytest.raises(errors.InvalidArgument, match="only ordered within one pool"):
        apply_updates(jobs, [JobUpdate("a", ahead_of="b")], POOLS)


def test_priority_applies_only_under_the_priority_scheduler() -> None:
    jobs = fifo("a", resource_pool="fair")
    with pytest.raises(errors.FailedPrecondition, match=r"fair_share scheduler.*weight instead"):
        apply_updates(jobs, [JobUpdate("a", priority=3)], POOLS)


def test_weight_applies_only_under_the_fair_share_scheduler() -> None:
    with pytest.raises(errors.FailedPrecondition, match="weight applies only under the fair"):
        apply_updates(fifo("a"), [JobUpdate("a", weight=2.0)], POOLS)
    (changed,) = apply_updates(fifo("a", resource_pool="fair"), [JobUpdate("a", weight=2)], POOLS)
    assert changed.weight == 2


def test_ahead_of_and_behind_of_apply_only_under_the_priority_scheduler() -> None:
    jobs = fifo("a", "b", resource_pool="fair")
    for update in (JobUpdate("b", ahead_of="a"), JobUpdate("a", behind_of="b")):
        with pytest.raises(errors.FailedPrecondition, match="queue position"):
            apply_updates(jobs, [update], POOLS)


def test_only_experiments_change_resource_pool() -> None:
    (moved,) = apply_updates(fifo("exp"), [JobUpdate("exp", resource_pool="a100")], POOLS)
    assert moved.resource_pool == "a100"
    shell = [QueuedJob("sh", type="TYPE_SHELL")]
    with pytest.raises(errors.FailedPrecondition, match="only experiments"):
        apply_updates(shell, [JobUpdate("sh", resource_pool="a100")], POOLS)


def test_moving_to_an_unknown_pool_names_the_pools() -> None:
    with pytest.raises(errors.InvalidArgument, match=r"'gpu' .*a100, default, fair"):
        apply_updates(fifo("a"), [JobUpdate("a", resource_pool="gpu")], POOLS)


def test_out_of_range_priority_and_weight_are_rejected() -> None:
    with pytest.raises(errors.InvalidArgument, match="between 1 and 99"):
        apply_updates(fifo("a"), [JobUpdate("a", priority=0)], POOLS)
    with pytest.raises(errors.InvalidArgument, match="greater than 0"):
        apply_updates(fifo("a", resource_pool="fair"), [JobUpdate("a", weight=0)], POOLS)


def test_an_update_sets_exactly_one_thing() -> None:
    with pytest.raises(errors.InvalidArgument, match=r"exactly one.*got priority, ahead-of"):
        apply_updates(fifo("a", "b"), [JobUpdate("a", priority=3, ahead_of="b")], POOLS)
    with pytest.raises(errors.InvalidArgument, match="exactly one"):
        apply_updates(fifo("a"), [JobUpdate("a")], POOLS)
