from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from determined.common import errors
from pydet.master.config import PoolConfig
from pydet.master.jobs import ordering as jobqueue
from pydet.master.scheduler import (
    AgentView,
    Decision,
    Placement,
    PoolPolicy,
    Request,
    RunningAllocation,
    decide,
)


class Pool:
    """A tiny pool: agents of the given sizes, and allocations put on them by hand."""

    def __init__(self, *sizes: int) -> None:
        self.free = {f"a{i}": [str(s) for s in range(n)] for i, n in enumerate(sizes)}
        self.containers = dict.fromkeys(self.free, 0)
        self.flags: dict[str, dict[str, bool]] = {}
        self.running: list[RunningAllocation] = []

    def run(self, alloc_id: str, on: dict[str, int], **kw: Any) -> RunningAllocation:
        containers = []
        for agent_id, n in on.items():
            taken, self.free[agent_id] = self.free[agent_id][:n], self.free[agent_id][n:]
            assert len(taken) == n, f"{agent_id} has no {n} free slots"
            containers.append((agent_id, tuple(taken)))
            self.containers[agent_id] += 1
        alloc = RunningAllocation(alloc_id, containers=tuple(containers), **kw)
        self.running.append(alloc)
        return alloc

    def set(self, agent_id: str, **flags: bool) -> None:
        self.flags[agent_id] = flags

    def agents(self) -> list[AgentView]:
        return [
            AgentView(
                agent_id,
                free_slots=free,
                num_containers=self.containers[agent_id],
                **self.flags.get(agent_id, {}),
            )
            for agent_id, free in self.free.items()
        ]

    def decide(self, pending: Sequence[Request], **policy: Any) -> Decision:
        return decide(PoolPolicy(**policy), self.agents(), self.running, pending)

    def place(self, decision: Decision, pending: Sequence[Request]) -> None:
        """Apply a decision's placements as the master would (for multi-pass tests)."""
        by_id = {r.id: r for r in pending}
        for p in decision.placements:
            r = by_id[p.request_id]
            self.run(
                p.request_id,
                {agent_id: len(slots) for agent_id, slots in p.containers},
                job_id=r.job_id,
                priority=r.priority,
                order=r.order,
                weight=r.weight,
                max_slots=r.max_slots,
            )

    def exit(self, alloc_id: str) -> None:
        (alloc,) = [a for a in self.running if a.id == alloc_id]
        self.running.remove(alloc)
        for agent_id, slots in alloc.containers:
            self.free[agent_id].extend(slots)
            self.containers[agent_id] -= 1


def agents(*free: int) -> list[AgentView]:
    return Pool(*free).agents()


def first_pass(agents: Sequence[AgentView], pending: Sequence[Request]) -> list[Placement]:
    """What one pass of a default priority pool with nothing running places."""
    return list(decide(PoolPolicy(), agents, (), pending).placements)


def placed(decision: Decision) -> list[str]:
    return [p.request_id for p in decision.placements]


def test_lower_priority_number_runs_first() -> None:
    placed = first_pass(
        agents(1),
        [Request("late", 1, priority=50, order=1), Request("urgent", 1, priority=10, order=2)],
    )
    assert [p.request_id for p in placed] == ["urgent"]


def test_fifo_within_a_priority() -> None:
    placed = first_pass(agents(1), [Request("second", 1, order=2), Request("first", 1, order=1)])
    assert [p.request_id for p in placed] == ["first"]


def test_moving_a_job_ahead_changes_who_goes_next() -> None:
    queue = [jobqueue.QueuedJob("first", order=1), jobqueue.QueuedJob("second", order=2)]
    (moved,) = jobqueue.ahead_of(queue, "second", "first")
    requests = [
        Request("t1", 1, job_id="first", order=1),
        Request("t2", 1, job_id="second", order=moved.order, priority=moved.priority),
    ]
    assert placed(Pool(1).decide(requests)) == ["t2"]


def test_multi_slot_requests_are_all_or_nothing() -> None:
    assert first_pass(agents(1, 1), [Request("big", 3)]) == []


def test_a_gang_gets_every_slot_it_asked_for_on_distinct_slots() -> None:
    decision = Pool(8, 8).decide([Request(f"r{i}", n) for i, n in enumerate([4, 2, 8, 1, 1])])
    slots = [(a, s) for p in decision.placements for a, ss in p.containers for s in ss]
    assert len(slots) == len(set(slots)) == 16
    assert {p.request_id: sum(len(s) for _, s in p.containers) for p in decision.placements} == {
        "r0": 4,
        "r1": 2,
        "r2": 8,
        "r3": 1,
        "r4": 1,
    }


def test_request_spans_agents_when_no_single_agent_fits() -> None:
    (p,) = first_pass(agents(2, 2), [Request("big", 4)])
    assert sorted(agent for agent, _ in p.containers) == ["a0", "a1"]
    assert sum(len(slots) for _, slots in p.containers) == 4


def test_single_node_requests_never_span() -> None:
    assert first_pass(agents(2, 2), [Request("big", 4, single_node=True)]) == []


def test_packing_prefers_the_fullest_agent_that_fits() -> None:
    (p,) = first_pass(agents(4, 1), [Request("one", 1)])
    assert p == Placement("one", (("a1", ("0",)),))


def test_spreading_prefers_the_emptiest_agent() -> None:
    decision = Pool(2, 4, 3).decide([Request("one", 1)], fitting_policy="worst")
    assert decision.placements[0].containers == (("a1", ("0",)),)


def test_packing_fills_one_agent_before_the_next() -> None:
    decision = Pool(4, 4).decide([Request(f"r{i}", 1, order=i) for i in range(4)])
    assert {a for p in decision.placements for a, _ in p.containers} == {"a0"}


def test_spreading_puts_one_task_per_agent_first() -> None:
    requests = [Request(f"r{i}", 1, order=i) for i in range(3)]
    decision = Pool(4, 4, 4).decide(requests, fitting_policy="worst")
    assert sorted(a for p in decision.placements for a, _ in p.containers) == ["a0", "a1", "a2"]


def test_zero_slot_tasks_take_no_slot() -> None:
    placed = first_pass(agents(0), [Request("cpu-only", 0), Request("also", 0)])
    assert [p.request_id for p in placed] == ["cpu-only", "also"]
    assert all(slots == () for p in placed for _, slots in p.containers)


def test_zero_slot_tasks_spread_by_container_count() -> None:
    pool = Pool(2, 2)
    pool.run("busy", {"a0": 1})
    decision = pool.decide([Request("z1", 0, order=1), Request("z2", 0, order=2)])
    assert [p.containers[0][0] for p in decision.placements] == ["a1", "a0"]


def test_zero_slot_tasks_start_while_slot_work_is_blocked() -> None:
    pool = Pool(1)
    pool.run("holder", {"a0": 1})
    decision = pool.decide([Request("big", 1, priority=1), Request("tensorboard", 0, priority=90)])
    assert placed(decision) == ["tensorboard"]


def test_smaller_requests_fill_gaps_behind_a_blocked_one() -> None:
    placed = first_pass(agents(2), [Request("big", 4, order=1), Request("small", 2, order=2)])
    assert [p.request_id for p in placed] == ["small"]


def test_lower_priorities_wait_behind_a_blocked_request_without_preemption() -> None:
    pool = Pool(4)
    pool.run("old", {"a0": 2})
    decision = pool.decide([Request("big", 4, priority=10), Request("small", 1, priority=50)])
    assert placed(decision) == []


def test_lower_priorities_backfill_when_preemption_could_reclaim_the_slots() -> None:
    pool = Pool(4)
    pool.run("old", {"a0": 2}, priority=10)
    requests = [Request("big", 4, priority=10, order=1), Request("small", 1, priority=50)]
    decision = pool.decide(requests, preemption=True)
    assert placed(decision) == ["small"]
    assert decision.preemptions == ()


def test_request_that_can_never_fit_does_not_hold_up_the_queue() -> None:
    decision = Pool(4, 4).decide([Request("huge", 16, priority=1), Request("ok", 4, priority=50)])
    assert placed(decision) == ["ok"]


def test_max_slots_caps_a_job_across_its_trials() -> None:
    pool = Pool(8)
    pool.run("t1", {"a0": 2}, job_id="exp", max_slots=4)
    trials = [Request(f"t{i}", 2, job_id="exp", max_slots=4, order=1) for i in (2, 3, 4)]
    assert placed(pool.decide(trials)) == ["t2"]


def test_a_capped_job_does_not_hold_up_other_jobs() -> None:
    pool = Pool(8)
    pool.run("t1", {"a0": 4}, job_id="exp", max_slots=4)
    requests = [
        Request("t2", 4, job_id="exp", max_slots=4, priority=1),
        Request("other", 2, priority=60),
    ]
    assert placed(pool.decide(requests)) == ["other"]


def test_disabled_agents_get_nothing() -> None:
    pool = Pool(2)
    pool.set("a0", enabled=False)
    assert pool.decide([Request("x", 1), Request("z", 0)]).placements == ()


def test_draining_agents_get_nothing_and_keep_their_work() -> None:
    pool = Pool(4, 2)
    pool.run("low", {"a0": 2}, priority=90)
    pool.set("a0", draining=True)
    decision = pool.decide([Request("urgent", 4, priority=1)], preemption=True)
    assert decision == Decision()
    decision = pool.decide([Request("small", 1)])
    assert decision.placements[0].containers[0][0] == "a1"


def test_pool_policy_comes_from_the_pool_config() -> None:
    policy = PoolPolicy.of(PoolConfig("gpu", scheduler="fair_share", fitting_policy="worst"))
    assert policy == PoolPolicy("fair_share", "worst", preemption=False)


def test_pool_policy_rejects_an_unknown_fitting_policy() -> None:
    with pytest.raises(errors.InvalidArgument, match="fitting_policy 'tight'"):
        PoolPolicy.of(PoolConfig("gpu", fitting_policy="tight"))


def test_a_request_is_never_placed_on_an_agent_it_excludes() -> None:
    avoid = frozenset({"a1"})
    (p,) = first_pass(agents(4, 1), [Request("one", 1, excluded_agents=avoid)])
    assert p == Placement("one", (("a0", ("0",)),))  # not the fuller a1 that packing prefers
    (p,) = first_pass(agents(2, 2, 2), [Request("big", 4, excluded_agents=avoid)])
    assert sorted(agent for agent, _ in p.containers) == ["a0", "a2"]
    assert first_pass(agents(1), [Request("one", 1, excluded_agents=frozenset({"a0"}))]) == []


def test_a_request_that_excludes_agents_waits_instead_of_preempting() -> None:
    pool = Pool(1, 1)
    pool.run("low", {"a0": 1}, priority=50)
    pool.run("low2", {"a1": 1}, priority=50)
    urgent = Request("urgent", 1, priority=1, excluded_agents=frozenset({"a1"}))
    decision = pool.decide([urgent], preemption=True)
    assert decision.placements == () and decision.preemptions == ()


def test_fair_share_places_an_excluding_request_elsewhere_and_others_still_fit() -> None:
    pending = [
        Request("avoid", 2, job_id="j1", excluded_agents=frozenset({"a0"})),
        Request("other", 1, job_id="j2"),
    ]
    decision = Pool(2, 2).decide(pending, scheduler="fair_share")
    where = {p.request_id: [a for a, _ in p.containers] for p in decision.placements}
    assert where == {"avoid": ["a1"], "other": ["a0"]}
