"""The running set a pool keeps between passes: its sums follow every add and removal, and
a pass given one decides exactly as when given the plain list."""

from __future__ import annotations

from pydet.master.scheduler import AgentView, PoolPolicy, Request, RunningAllocation, decide
from pydet.master.scheduler.running import RunningSet


def alloc(
    id: str,
    containers: dict[str, int],
    *,
    job: str = "",
    priority: int = 42,
    order: float = 0.0,
    preempting: bool = False,
) -> RunningAllocation:
    return RunningAllocation(
        id,
        job_id=job,
        containers=tuple(
            (a, tuple(f"{a}-{id}-{i}" for i in range(n))) for a, n in containers.items()
        ),
        priority=priority,
        order=order,
        preempting=preempting,
    )


def test_sums_follow_adds_replacements_and_removals() -> None:
    running = RunningSet()
    running.add(alloc("x", {"a0": 2, "a1": 1}, job="j"))
    running.add(alloc("y", {"a0": 1}, job="j"))
    assert running.held_by_job == {"j": 4}
    assert running.held_on_agent == {"a0": 3, "a1": 1}
    # A container of x exited: its new view replaces the old one.
    running.add(alloc("x", {"a0": 2}, job="j"))
    assert running.held_by_job == {"j": 3} and running.held_on_agent == {"a0": 3}
    running.remove("x")
    running.remove("y")
    assert len(running) == 0
    assert not running.held_by_job and not running.held_on_agent


def test_most_preemptable_is_the_largest_key_of_what_holds_slots_and_is_not_leaving() -> None:
    running = RunningSet()
    assert running.most_preemptable() is None
    running.add(alloc("a", {"a0": 1}, priority=40, order=5.0))
    running.add(alloc("b", {"a0": 1}, priority=50, order=1.0))
    running.add(alloc("zero", {}, priority=99))
    running.add(alloc("leaving", {"a0": 1}, priority=90, preempting=True))
    assert running.most_preemptable() == (50, 1.0)
    assert set(running.preempting) == {"leaving"}
    # b's job was moved up (`det job update`): the view with its new priority replaces it.
    running.add(alloc("b", {"a0": 1}, priority=30, order=1.0))
    assert running.most_preemptable() == (40, 5.0)
    running.remove("a")
    assert running.most_preemptable() == (30, 1.0)


def test_a_pass_decides_the_same_from_a_kept_set_as_from_the_list() -> None:
    agents = [AgentView("a0", free_slots=("f0",)), AgentView("a1", free_slots=())]
    running = [
        alloc("low", {"a1": 2}, job="lo", priority=60),
        alloc("eq", {"a0": 1}, job="same", priority=10),
        alloc("gone", {"a1": 1}, job="lo", priority=60, preempting=True),
    ]
    pending = [Request("urgent", 3, job_id="hi", priority=10), Request("peer", 2, priority=60)]
    policy = PoolPolicy(preemption=True)
    from_list = decide(policy, agents, running, pending)
    assert from_list.preemptions == ("low",)
    assert decide(policy, agents, RunningSet.of(running), pending) == from_list


def test_requests_equal_to_everything_running_preempt_nothing() -> None:
    agents = [AgentView("a0", free_slots=())]
    running = RunningSet.of(alloc(f"t{i}", {"a0": 1}, job="exp", order=7.0) for i in range(4))
    pending = [Request("t9", 1, job_id="exp", order=7.0)]
    decision = decide(PoolPolicy(preemption=True), agents, running, pending)
    assert decision.placements == () and decision.preemptions == ()


def test_a_replaced_view_keeps_its_place() -> None:
    running = RunningSet.of(alloc(name, {"a0": 1}) for name in ("x", "y", "z"))
    running.add(alloc("x", {"a0": 1}, preempting=True))
    assert [a.id for a in running] == ["x", "y", "z"]
    assert set(running.preempting) == {"x"} and running.held_on_agent == {"a0": 3}
