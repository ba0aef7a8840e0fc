from __future__ import annotations

from pydet.master.jobs import ordering as jobqueue
from pydet.master.scheduler import Decision, Request
from tests.unit.test_scheduler import Pool, placed


def test_preemption_is_off_unless_the_pool_enables_it() -> None:
    pool = Pool(4)
    pool.run("low", {"a0": 4}, priority=90)
    assert pool.decide([Request("urgent", 4, priority=1)]) == Decision()


def test_urgent_request_preempts_the_lowest_priority_allocation() -> None:
    pool = Pool(8)
    pool.run("p50", {"a0": 4}, priority=50)
    pool.run("p60", {"a0": 4}, priority=60)
    decision = pool.decide([Request("urgent", 4, priority=10)], preemption=True)
    assert decision == Decision((), ("p60",))


def test_newest_allocation_is_preempted_first_among_equals() -> None:
    pool = Pool(2)
    pool.run("older", {"a0": 1}, priority=60, started=100.0)
    pool.run("newer", {"a0": 1}, priority=60, started=200.0)
    decision = pool.decide([Request("urgent", 1, priority=10)], preemption=True)
    assert decision.preemptions == ("newer",)


def test_only_as_many_victims_as_needed() -> None:
    pool = Pool(8)
    for i in range(8):
        pool.run(f"v{i}", {"a0": 1}, priority=60, started=float(i))
    decision = pool.decide([Request("urgent", 3, priority=10)], preemption=True)
    assert decision.preemptions == ("v7", "v6", "v5")


def test_a_small_victim_is_spared_when_a_larger_one_alone_suffices() -> None:
    pool = Pool(5)
    pool.run("small", {"a0": 1}, priority=90)
    pool.run("large", {"a0": 4}, priority=80)
    decision = pool.decide([Request("urgent", 4, priority=10)], preemption=True)
    assert decision.preemptions == ("large",)


def test_single_node_request_clears_room_on_one_agent() -> None:
    pool = Pool(4, 4)
    pool.run("a0-low", {"a0": 2}, priority=90)
    pool.run("a0-mid", {"a0": 2}, priority=50)
    pool.run("a1-low", {"a1": 2}, priority=80)
    pool.run("a1-lower", {"a1": 2}, priority=85)
    request = Request("urgent", 4, priority=10, single_node=True)
    decision = pool.decide([request], preemption=True)
    # Emptying a1 costs only 80 and 85; emptying a0 would cost the 50.
    assert sorted(decision.preemptions) == ["a1-low", "a1-lower"]


def test_no_preemption_for_a_request_that_can_never_fit() -> None:
    pool = Pool(4, 4)
    pool.run("low", {"a0": 4}, priority=90)
    requests = [Request("huge", 16, priority=1), Request("wide", 6, priority=1, single_node=True)]
    assert pool.decide(requests, preemption=True) == Decision()


def test_no_preemption_when_victims_could_not_free_enough() -> None:
    pool = Pool(4)
    pool.run("same", {"a0": 2}, priority=10, order=1)
    pool.run("low", {"a0": 2}, priority=90)
    decision = pool.decide([Request("urgent", 4, priority=10, order=2)], preemption=True)
    assert decision == Decision()


def test_work_ahead_in_the_queue_is_never_preempted() -> None:
    pool = Pool(2)
    pool.run("higher", {"a0": 1}, priority=5)
    pool.run("earlier", {"a0": 1}, priority=10, order=1)
    decision = pool.decide([Request("later", 1, priority=10, order=2)], preemption=True)
    assert decision == Decision()


def test_moving_a_job_ahead_preempts_the_one_it_passed() -> None:
    # The documented workflow: one slot, first_job runs; second_job is moved ahead of it.
    queue = [
        jobqueue.QueuedJob("first_job", order=1, scheduled=True),
        jobqueue.QueuedJob("second_job", order=2),
    ]
    (moved,) = jobqueue.ahead_of(queue, "second_job", "first_job")
    pool = Pool(1)
    pool.run("first.1", {"a0": 1}, job_id="first_job", order=1)
    second = Request("second.1", 1, job_id="second_job", order=moved.order)
    decision = pool.decide([second], preemption=True)
    assert decision == Decision((), ("first.1",))

    pool.running = [a.__class__(**{**a.__dict__, "preempting": True}) for a in pool.running]
    first_again = Request("first.2", 1, job_id="first_job", order=1)
    assert pool.decide([second, first_again], preemption=True) == Decision()

    pool.exit("first.1")
    assert placed(pool.decide([second, first_again], preemption=True)) == ["second.1"]


def test_nothing_else_starts_while_a_preemption_is_pending() -> None:
    pool = Pool(4, 1)
    pool.run("low", {"a0": 4}, priority=90)
    requests = [
        Request("urgent", 4, priority=1, single_node=True),
        Request("small", 1, priority=50),
    ]
    decision = pool.decide(requests, preemption=True)
    assert decision == Decision((), ("low",))


def test_allocations_already_leaving_are_not_preempted_again_nor_replaced() -> None:
    pool = Pool(4)
    pool.run("leaving", {"a0": 2}, priority=90, preempting=True)
    pool.run("low", {"a0": 2}, priority=80)
    decision = pool.decide([Request("urgent", 2, priority=1)], preemption=True)
    assert decision == Decision()


def test_one_victim_is_not_counted_twice_for_two_requests() -> None:
    pool = Pool(4)
    pool.run("v1", {"a0": 2}, priority=90, started=1.0)
    pool.run("v2", {"a0": 2}, priority=90, started=2.0)
    requests = [Request("u1", 2, priority=1, order=1), Request("u2", 2, priority=1, order=2)]
    decision = pool.decide(requests, preemption=True)
    assert decision.preemptions == ("v2", "v1")


def test_a_capped_job_does_not_preempt() -> None:
    pool = Pool(4)
    pool.run("mine", {"a0": 2}, job_id="exp", max_slots=2, priority=1)
    pool.run("low", {"a0": 2}, priority=90)
    request = Request("more", 2, job_id="exp", max_slots=2, priority=1)
    assert pool.decide([request], preemption=True) == Decision()


def test_a_capped_job_preempts_only_for_what_its_cap_allows() -> None:
    pool = Pool(8)
    for i in range(4):
        pool.run(f"low{i}", {"a0": 2}, priority=90, started=float(i))
    trials = [Request(f"t{i}", 4, job_id="exp", max_slots=4, priority=1) for i in range(2)]
    assert pool.decide(trials, preemption=True).preemptions == ("low3", "low2")


def test_preempted_slots_go_to_the_waiting_request_on_the_next_pass() -> None:
    pool = Pool(8, 8)
    for i in range(4):
        pool.run(f"low{i}", {f"a{i % 2}": 4}, priority=60, started=float(i))
    backlog = [Request(f"more{i}", 4, priority=60, order=10 + i) for i in range(3)]
    urgent = Request("urgent", 8, priority=1, single_node=True)
    decision = pool.decide([urgent, *backlog], preemption=True)
    # a1 is emptied by the two newest and third newest; a0 would need the oldest.
    assert sorted(decision.preemptions) == ["low1", "low3"]
    for alloc_id in decision.preemptions:
        pool.exit(alloc_id)
    assert placed(pool.decide([urgent, *backlog], preemption=True)) == ["urgent"]
