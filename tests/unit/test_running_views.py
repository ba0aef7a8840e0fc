"""The running allocations the task manager keeps per pool between scheduling passes: each
change (a start, an exited container, a preemption, a `det job update`, an end) is seen by
the next pass, without the pass walking every allocation."""

from __future__ import annotations

from dataclasses import dataclass

from pydet.master.tasks.allocation import Allocation, Container
from pydet.master.tasks.running_views import RunningViews


@dataclass
class FakeJob:
    """A job whose settings change in place, as an experiment's do on `det job update`."""

    job_id: str = "exp-1"
    resource_pool: str = "default"
    priority: int = 42
    weight: float = 1.0
    order: float = 1.0
    max_slots: int | None = None
    preemption_timeout: float = 30.0


def allocation(alloc_id: str, job: FakeJob, slots: int = 2) -> Allocation:
    containers = {
        f"{alloc_id}.{rank}": Container(
            id=f"{alloc_id}.{rank}", agent_id=f"a{rank}", slot_ids=(str(rank),), rank=rank
        )
        for rank in range(slots)
    }
    return Allocation(
        id=alloc_id, task_id=alloc_id, trial_id=1, token="t", containers=containers, job=job
    )


def test_a_started_allocation_is_in_its_pool_until_it_ends() -> None:
    views, job = RunningViews(), FakeJob()
    alloc = allocation("x", job)
    views.update(alloc, live=True)
    assert [a.id for a in views.pool("default")] == ["x"]
    assert views.pool("default").held_by_job == {"exp-1": 2}
    views.update(alloc, live=False)
    assert len(views.pool("default")) == 0


def test_a_priority_change_is_seen_by_the_next_pass() -> None:
    views, job = RunningViews(), FakeJob()
    views.update(allocation("x", job), live=True)
    views.update(allocation("y", job), live=True)
    job.priority, job.order = 10, 0.5
    views.refresh_jobs()
    assert {(a.priority, a.order) for a in views.pool("default")} == {(10, 0.5)}
    assert views.pool("default").most_preemptable() == (10, 0.5)


def test_a_job_moved_to_another_pool_takes_its_allocations_along() -> None:
    views, job = RunningViews(), FakeJob()
    views.update(allocation("x", job), live=True)
    job.resource_pool = "gpu"
    views.refresh_jobs()
    assert len(views.pool("default")) == 0 and [a.id for a in views.pool("gpu")] == ["x"]


def test_an_exited_container_and_a_preemption_change_the_view() -> None:
    views, job = RunningViews(), FakeJob()
    alloc = allocation("x", job)
    views.update(alloc, live=True)
    c = alloc.containers["x.1"]
    alloc.container_exited(c, 0, "")
    alloc.preempt.set()
    views.update(alloc, live=True)
    (view,) = views.pool("default")
    assert view.containers == (("a0", ("0",)),) and view.preempting
    assert set(views.pool("default").preempting) == {"x"}
