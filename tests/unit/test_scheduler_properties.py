"""Invariants every decision keeps, on random pools, queues and policies."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pydet.master.scheduler import Decision, PoolPolicy, Request, decide
from tests.unit.test_scheduler import Pool

JOB = st.fixed_dictionaries(
    {
        "priority": st.sampled_from([1, 42, 42, 60]),
        "order": st.integers(0, 5).map(float),
        "weight": st.sampled_from([1.0, 2.0, 0.5]),
        "max_slots": st.one_of(st.none(), st.integers(1, 12)),
    }
)


@st.composite
def scenario(draw: st.DrawFn) -> tuple[Pool, list[Request], PoolPolicy]:
    sizes = draw(st.lists(st.integers(0, 8), min_size=1, max_size=5))
    pool = Pool(*sizes)
    jobs: dict[str, dict[str, Any]] = {f"j{i}": draw(JOB) for i in range(draw(st.integers(1, 5)))}
    for i in range(draw(st.integers(0, 8))):
        agent = f"a{draw(st.integers(0, len(sizes) - 1))}"
        n = draw(st.integers(1, 8))
        if len(pool.free[agent]) >= n:
            job = draw(st.sampled_from(sorted(jobs)))
            preempting = draw(st.booleans()) and draw(st.booleans())
            pool.run(
                f"r{i}",
                {agent: n},
                job_id=job,
                started=float(i),
                preempting=preempting,
                **jobs[job],
            )
    for agent in list(pool.free):
        pool.set(
            agent,
            enabled=draw(st.booleans()) or draw(st.booleans()),
            draining=not draw(st.integers(0, 4)),
        )
    pending = []
    for i in range(draw(st.integers(0, 10))):
        job = draw(st.sampled_from(sorted(jobs)))
        slots = draw(st.integers(0, 10))
        pending.append(
            Request(f"q{i}", slots, job_id=job, single_node=draw(st.booleans()), **jobs[job])
        )
    policy = PoolPolicy(
        draw(st.sampled_from(["priority", "fair_share"])),
        draw(st.sampled_from(["best", "worst"])),
        preemption=draw(st.booleans()),
    )
    return pool, pending, policy


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_decisions_only_use_free_slots_and_respect_every_limit(
    case: tuple[Pool, list[Request], PoolPolicy],
) -> None:
    pool, pending, policy = case
    agents = pool.agents()
    decision: Decision = decide(policy, agents, pool.running, pending)
    schedulable = {a.id for a in agents if a.schedulable}
    free = {(a.id, s) for a in agents if a.schedulable for s in a.free_slots}
    by_id = {r.id: r for r in pending}

    placed_ids = [p.request_id for p in decision.placements]
    assert len(placed_ids) == len(set(placed_ids)) and set(placed_ids) <= set(by_id)
    used = [(a, s) for p in decision.placements for a, slots in p.containers for s in slots]
    assert len(used) == len(set(used)) and set(used) <= free
    held = Counter({a.job: 0 for a in pool.running})
    for alloc in pool.running:
        held[alloc.job] += alloc.slots
    for p in decision.placements:
        request = by_id[p.request_id]
        assert {a for a, _ in p.containers} <= schedulable
        assert sum(len(s) for _, s in p.containers) == request.slots  # gang: all or nothing
        if request.single_node or request.slots == 0:
            assert len(p.containers) == 1
        held[request.job] += request.slots
        if request.slots and request.max_slots is not None:
            assert held[request.job] <= request.max_slots

    running = {a.id: a for a in pool.running}
    assert len(decision.preemptions) == len(set(decision.preemptions))
    for alloc_id in decision.preemptions:
        victim = running[alloc_id]
        assert not victim.preempting
        assert {a for a, _ in victim.containers} <= schedulable  # draining work is untouched
        if policy.scheduler == "priority":
            assert policy.preemption
            assert any(
                (victim.priority, victim.order) > (r.priority, r.order) for r in pending if r.slots
            )


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_preempting_makes_room_the_next_pass_uses(
    case: tuple[Pool, list[Request], PoolPolicy],
) -> None:
    pool, pending, _ = case
    policy = PoolPolicy(preemption=True)
    decision = decide(policy, pool.agents(), pool.running, pending)
    if not decision.preemptions:
        return
    pool.place(decision, pending)
    for alloc in [a for a in pool.running if a.preempting or a.id in decision.preemptions]:
        pool.exit(alloc.id)
    placed = {p.request_id for p in decision.placements}
    still_pending = [r for r in pending if r.id not in placed]
    after = decide(policy, pool.agents(), pool.running, still_pending)
    started = {p.request_id for p in after.placements}
    assert any(r.slots for r in still_pending if r.id in started)
