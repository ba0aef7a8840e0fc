from __future__ import annotations

from collections import Counter

from pydet.master.scheduler import Decision, Request, fair_shares
from tests.unit.test_scheduler import Pool

UNLIMITED = 1_000


def trials(
    job: str, n: int, slots: int = 1, *, weight: float = 1.0, order: float = 0.0
) -> list[Request]:
    return [Request(f"{job}.{i}", slots, job_id=job, weight=weight, order=order) for i in range(n)]


def slots_by_job(decision: Decision, pool: Pool | None = None) -> Counter[str]:
    held: Counter[str] = Counter()
    for p in decision.placements:
        held[p.request_id.split(".")[0]] += sum(len(s) for _, s in p.containers)
    for alloc in pool.running if pool else ():
        if alloc.id not in decision.preemptions:
            held[alloc.job] += alloc.slots
    return held


def test_shares_follow_weights() -> None:
    assert fair_shares(8, {"a": (UNLIMITED, 1.0), "b": (UNLIMITED, 3.0)}) == {"a": 2, "b": 6}


def test_a_job_wanting_less_than_its_share_leaves_the_rest_to_others() -> None:
    shares = fair_shares(12, {"small": (2, 1.0), "b": (UNLIMITED, 1.0), "c": (UNLIMITED, 2.0)})
    assert shares == {"small": 2, "b": 3, "c": 7}  # 10 left split 1:2, c's 6.67 rounds up
    assert fair_shares(8, {"a": (2, 1.0), "b": (UNLIMITED, 1.0)}) == {"a": 2, "b": 6}


def test_shares_are_whole_slots_that_fill_the_pool() -> None:
    shares = fair_shares(8, {"a": (UNLIMITED, 1.0), "b": (UNLIMITED, 1.0), "c": (UNLIMITED, 1.0)})
    assert sorted(shares.values()) == [2, 3, 3] and sum(shares.values()) == 8
    assert fair_shares(8, {"a": (1, 1.0), "b": (2, 1.0)}) == {"a": 1, "b": 2}


def test_fair_share_splits_slots_by_weight() -> None:
    pending = trials("a", 10, weight=1.0, order=1) + trials("b", 10, weight=3.0, order=2)
    decision = Pool(4, 4).decide(pending, scheduler="fair_share")
    assert slots_by_job(decision) == {"a": 2, "b": 6}


def test_fair_share_demand_caps_redistribute_to_others() -> None:
    pending = trials("a", 2, order=1) + trials("b", 10, order=2) + trials("c", 10, order=3)
    decision = Pool(8, 8).decide(pending, scheduler="fair_share")
    assert slots_by_job(decision) == {"a": 2, "b": 7, "c": 7}


def test_fair_share_respects_a_job_max_slots() -> None:
    pending = [Request(f"a.{i}", 1, job_id="a", max_slots=3) for i in range(10)]
    pending += trials("b", 10)
    decision = Pool(8).decide(pending, scheduler="fair_share")
    assert slots_by_job(decision) == {"a": 3, "b": 5}


def test_fair_share_ignores_priority() -> None:
    pending = trials("a", 4, order=1) + [
        Request(f"b.{i}", 1, job_id="b", priority=1, order=2) for i in range(4)
    ]
    decision = Pool(4).decide(pending, scheduler="fair_share")
    assert slots_by_job(decision) == {"a": 2, "b": 2}


def test_job_over_its_share_is_preempted_to_rebalance() -> None:
    pool = Pool(8)
    for i in range(8):
        pool.run(f"a.{i}", {"a0": 1}, job_id="a", started=float(i), order=1)
    decision = pool.decide(trials("b", 4, order=2), scheduler="fair_share")
    assert decision == Decision((), ("a.7", "a.6", "a.5", "a.4"))

    for alloc_id in decision.preemptions:
        pool.exit(alloc_id)
    pending = trials("b", 4, order=2) + [Request(f"a.{i}", 1, job_id="a") for i in range(4, 8)]
    rebalanced = pool.decide(pending, scheduler="fair_share")
    assert slots_by_job(rebalanced, pool) == {"a": 4, "b": 4}
    assert rebalanced.preemptions == ()


def test_rebalancing_never_takes_a_job_below_its_share() -> None:
    pool = Pool(8)
    pool.run("a.0", {"a0": 8}, job_id="a")
    assert pool.decide(trials("b", 4), scheduler="fair_share") == Decision()


def test_rebalancing_preempts_only_what_waiting_jobs_can_use() -> None:
    pool = Pool(8)
    for i in range(8):
        pool.run(f"a.{i}", {"a0": 1}, job_id="a", started=float(i))
    decision = pool.decide(trials("b", 1), scheduler="fair_share")
    assert decision.preemptions == ("a.7",)


def test_leftover_slots_no_share_can_use_are_lent_out() -> None:
    # b's share is 4 but it only runs 8-slot trials; rather than idle, a may use them.
    pending = trials("a", 8, order=1) + trials("b", 2, slots=8, order=2)
    decision = Pool(8).decide(pending, scheduler="fair_share")
    assert slots_by_job(decision) == {"a": 8}


def test_fair_share_draining_agents_get_nothing_and_keep_their_work() -> None:
    pool = Pool(4, 4)
    for i in range(4):
        pool.run(f"a.{i}", {"a0": 1}, job_id="a")
    pool.set("a0", draining=True)
    decision = pool.decide(trials("b", 8), scheduler="fair_share")
    assert decision.preemptions == ()
    assert {a for p in decision.placements for a, _ in p.containers} == {"a1"}
    assert slots_by_job(decision) == {"b": 4}


def test_fair_share_places_zero_slot_tasks() -> None:
    decision = Pool(0).decide([Request("tb", 0)], scheduler="fair_share")
    assert [p.request_id for p in decision.placements] == ["tb"]
