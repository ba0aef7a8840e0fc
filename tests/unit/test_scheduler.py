from __future__ import annotations

from master.scheduler import AgentView, Placement, Request, schedule


def agents(*free: int) -> list[AgentView]:
    return [
        AgentView(id=f"a{i}", address="127.0.0.1", free_slots=[str(s) for s in range(n)])
        for i, n in enumerate(free)
    ]


def test_lower_priority_number_runs_first() -> None:
    placed = schedule(
        agents(1),
        [Request("late", 1, priority=50, order=1), Request("urgent", 1, priority=10, order=2)],
    )
    assert [p.request_id for p in placed] == ["urgent"]


def test_fifo_within_a_priority() -> None:
    placed = schedule(agents(1), [Request("second", 1, order=2), Request("first", 1, order=1)])
    assert [p.request_id for p in placed] == ["first"]


def test_multi_slot_requests_are_all_or_nothing() -> None:
    assert schedule(agents(1, 1), [Request("big", 3)]) == []


def test_request_spans_agents_when_no_single_agent_fits() -> None:
    (p,) = schedule(agents(2, 2), [Request("big", 4)])
    assert sorted(agent for agent, _ in p.containers) == ["a0", "a1"]
    assert sum(len(slots) for _, slots in p.containers) == 4


def test_single_node_requests_never_span() -> None:
    assert schedule(agents(2, 2), [Request("big", 4, single_node=True)]) == []


def test_packing_prefers_the_fullest_agent_that_fits() -> None:
    (p,) = schedule(agents(4, 1), [Request("one", 1)])
    assert p == Placement("one", (("a1", ("0",)),))


def test_zero_slot_tasks_take_no_slot() -> None:
    placed = schedule(agents(0), [Request("cpu-only", 0), Request("also", 0)])
    assert [p.request_id for p in placed] == ["cpu-only", "also"]
    assert all(slots == () for p in placed for _, slots in p.containers)


def test_smaller_requests_fill_gaps_behind_a_blocked_one() -> None:
    placed = schedule(agents(2), [Request("big", 4, order=1), Request("small", 2, order=2)])
    assert [p.request_id for p in placed] == ["small"]


def test_disabled_agents_get_nothing() -> None:
    pool = agents(2)
    pool[0].enabled = False
    assert schedule(pool, [Request("x", 1)]) == []
