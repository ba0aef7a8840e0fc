"""The scale decider of elastic pools, rule by rule, and pools driven by it through time."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from determined.common import errors
from pydet.master.provisioner import decider
from pydet.master.provisioner.decider import (
    Decision,
    Instance,
    InstanceState,
    Memory,
    Reason,
    Settings,
    Snapshot,
    decide,
    next_deadline,
)
from pydet.master.provisioner.demand import instances_wanted
from tests.unit.scale_sim import Faults, ScaleSim, Work

S = InstanceState
POOL = Settings(
    min_instances=0,
    max_instances=10,
    max_idle_agent_period=60.0,
    max_agent_starting_period=120.0,
    max_disconnect_period=30.0,
)


def pool(**changes: Any) -> Settings:
    return dataclasses.replace(POOL, **changes)


def inst(iid: str, state: InstanceState = S.RUNNING, launched: float = 0.0) -> Instance:
    return Instance(iid, state, launched, f"agent-{iid}")


def snap(
    now: float,
    instances: Sequence[Instance],
    *,
    idle: Sequence[str] = (),
    busy: Sequence[str] = (),
    wanted: int = 0,
) -> Snapshot:
    """A snapshot whose agents are those of the instances named idle or busy."""
    agents = {f"agent-{i}": True for i in idle}
    agents.update((f"agent-{i}", False) for i in busy)
    return Snapshot.of(now, instances, agents, wanted)


def ends(decision: Decision) -> dict[str, Reason]:
    return {t.instance_id: t.reason for t in decision.terminate}


def run(
    steps: Sequence[Snapshot], settings: Settings = POOL, memory: Memory = decider.EMPTY
) -> Decision:
    """Decides on each snapshot in turn, carrying the memory; the last decision."""
    decision = None
    for snapshot in steps:
        decision = decide(settings, snapshot, memory)
        memory = decision.memory
    assert decision is not None
    return decision


# -- how many to launch ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("min_instances", "max_instances", "busy", "starting", "wanted", "launch"),
    [
        (0, 10, 0, 0, 3, 3),  # queued work needs 3
        (0, 10, 0, 2, 3, 1),  # 2 of them are on their way already
        (0, 10, 0, 5, 3, 0),
        (0, 5, 4, 0, 3, 1),  # capped at max_instances
        (0, 0, 0, 0, 5, 0),
        (2, 10, 0, 0, 0, 2),  # min_instances kept with no work
        (2, 10, 1, 0, 0, 1),
        (2, 10, 0, 2, 0, 0),  # starting instances count toward the minimum
        (3, 10, 0, 1, 5, 4),  # work beyond the minimum
        (3, 10, 0, 0, 1, 3),  # the minimum beyond the work
        (4, 4, 4, 0, 9, 0),
    ],
)
def test_launch_count_follows_work_bounded_by_the_pool_size(
    min_instances: int, max_instances: int, busy: int, starting: int, wanted: int, launch: int
) -> None:
    instances = [inst(f"b{i}") for i in range(busy)]
    instances += [inst(f"s{i}", S.STARTING, launched=90.0) for i in range(starting)]
    snapshot = snap(100.0, instances, busy=[f"b{i}" for i in range(busy)], wanted=wanted)
    settings = pool(min_instances=min_instances, max_instances=max_instances)
    decision = decide(settings, snapshot)
    assert (decision.launch, decision.terminate) == (launch, ())


def test_stopped_instances_are_terminated_stopping_ones_left_alone_and_not_counted() -> None:
    instances = [inst("gone", S.TERMINATED), inst("going", S.STOPPING), inst("off", S.STOPPED)]
    decision = decide(pool(min_instances=2), snap(100.0, instances))
    assert ends(decision) == {"off": Reason.STOPPED}
    assert decision.launch == 2


# -- agents that never came or left ---------------------------------------------------------------


@pytest.mark.parametrize("state", [S.STARTING, S.RUNNING])  # STARTING: an unfilled spot request
@pytest.mark.parametrize(("now", "ended"), [(119.0, False), (120.0, True), (500.0, True)])
def test_an_instance_whose_agent_never_connects_is_terminated_after_the_starting_period(
    state: InstanceState, now: float, ended: bool
) -> None:
    decision = decide(POOL, snap(now, [inst("late", state)], wanted=1))
    assert ends(decision) == ({"late": Reason.AGENT_NEVER_CONNECTED} if ended else {})
    # While it may still come up it counts as capacity on its way; once given up, replaced.
    assert decision.launch == (1 if ended else 0)


def test_a_lost_agent_is_given_its_disconnect_period_from_when_it_was_first_missed() -> None:
    a = inst("a")
    seen = [snap(0.0, [a], busy=["a"]), snap(200.0, [a])]  # connected, then gone at 200
    assert ends(run([*seen, snap(229.0, [a])])) == {}
    assert ends(run([*seen, snap(230.0, [a])])) == {"a": Reason.AGENT_DISCONNECTED}
    # Never the starting period's rule: its agent did connect once.
    assert ends(run([*seen, snap(229.0, [a])], pool(max_agent_starting_period=1.0))) == {}


def test_an_agent_that_comes_back_starts_a_new_disconnect_period() -> None:
    a = inst("a")
    steps = [snap(0.0, [a], busy=["a"]), snap(200.0, [a]), snap(220.0, [a], idle=["a"])]
    steps.append(snap(225.0, [a]))
    assert ends(run([*steps, snap(254.0, [a])])) == {}
    assert ends(run([*steps, snap(255.0, [a])])) == {"a": Reason.AGENT_DISCONNECTED}


def test_a_lost_agent_within_its_starting_period_still_counts_as_coming() -> None:
    a = inst("a", launched=0.0)
    steps = [snap(10.0, [a], busy=["a"]), snap(20.0, [a], wanted=1)]
    assert run(steps).launch == 0
    assert run([*steps[:1], snap(130.0, [a], wanted=1)]).launch == 1


# -- idle instances -------------------------------------------------------------------------------


@pytest.mark.parametrize(("now", "ended"), [(159.0, False), (160.0, True)])
def test_an_idle_agent_is_terminated_when_its_idle_period_runs_out(now: float, ended: bool) -> None:
    a = inst("a")
    decision = run([snap(100.0, [a], idle=["a"]), snap(now, [a], idle=["a"])])
    assert ends(decision) == ({"a": Reason.IDLE} if ended else {})


def test_work_resets_the_idle_period() -> None:
    a = inst("a")
    steps = [snap(100.0, [a], idle=["a"]), snap(130.0, [a], busy=["a"])]
    steps.append(snap(140.0, [a], idle=["a"]))
    assert ends(run([*steps, snap(199.0, [a], idle=["a"])])) == {}
    assert ends(run([*steps, snap(200.0, [a], idle=["a"])])) == {"a": Reason.IDLE}


def test_idle_terminations_keep_min_instances_longest_idle_first() -> None:
    instances = [inst(i) for i in "abc"]
    steps = [
        snap(10.0, instances, idle=["b"], busy=["a", "c"]),
        snap(20.0, instances, idle=["b", "c"], busy=["a"]),
        snap(30.0, instances, idle=["a", "b", "c"]),
        snap(100.0, instances, idle=["a", "b", "c"]),
    ]
    decision = run(steps, pool(min_instances=1))
    assert [(t.instance_id, t.reason) for t in decision.terminate] == [
        ("b", Reason.IDLE),
        ("c", Reason.IDLE),
    ]
    assert decision.launch == 0


def test_a_termination_the_provider_has_not_carried_out_yet_is_repeated_not_doubled() -> None:
    instances = [inst("a"), inst("b")]
    settings = pool(min_instances=1)
    steps = [snap(10.0, instances, idle=["a"]), snap(20.0, instances, idle=["a", "b"])]
    first = run([*steps, snap(80.0, instances, idle=["a", "b"])], settings)
    assert ends(first) == {"a": Reason.IDLE}
    # The provider still lists a as running: it is asked again, and b (now the last one
    # above the minimum) stays.
    again = decide(settings, snap(90.0, instances, idle=["a", "b"]), first.memory)
    assert ends(again) == {"a": Reason.IDLE}
    assert again.launch == 0
    # Once a is going, it is forgotten.
    instances[0] = inst("a", S.STOPPING)
    assert decide(settings, snap(95.0, instances, idle=["b"]), again.memory).terminate == ()


# -- more instances than the maximum --------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_instances", "ended"),
    [
        (5, []),
        (4, ["starting"]),
        (3, ["starting", "idle"]),
        (2, ["starting", "idle", "lost"]),
        (1, ["starting", "idle", "lost", "busy-new"]),
        (0, ["starting", "idle", "lost", "busy-new", "busy-old"]),
    ],
)
def test_over_the_maximum_the_least_useful_instances_go_first(
    max_instances: int, ended: list[str]
) -> None:
    instances = [
        inst("busy-old", launched=0.0),
        inst("busy-new", launched=50.0),
        inst("idle", launched=10.0),
        inst("lost", launched=5.0),
        inst("starting", S.STARTING, launched=85.0),
    ]
    before = snap(90.0, instances, busy=["busy-old", "busy-new", "lost"], idle=["idle"])
    memory = decide(POOL, before).memory
    now = snap(100.0, instances, busy=["busy-old", "busy-new"], idle=["idle"])
    decision = decide(pool(max_instances=max_instances), now, memory)
    assert [t.instance_id for t in decision.terminate] == ended
    assert {t.reason for t in decision.terminate} <= {Reason.OVER_MAXIMUM}
    assert decision.launch == 0


# -- determinism, deadlines, settings, the log line ------------------------------------------------


def test_the_same_pool_listed_in_any_order_gets_the_same_decision() -> None:
    instances = [inst(f"i{n}", launched=float(n)) for n in range(12)]
    instances += [inst(f"s{n}", S.STARTING) for n in range(3)]
    idle = [f"i{n}" for n in range(6)]
    busy = [f"i{n}" for n in range(6, 12)]
    settings = pool(max_instances=8, min_instances=2)
    decisions = []
    for seed in range(5):
        order = random.Random(seed)
        shuffled = order.sample(instances, len(instances))
        steps = [
            snap(0.0, shuffled, idle=order.sample(idle, 6), busy=busy),
            snap(500.0, shuffled, idle=idle, busy=order.sample(busy, 6), wanted=3),
        ]
        decisions.append(run(steps, settings))
    assert all(d == decisions[0] for d in decisions)
    assert decisions[0].terminate  # something to order


def test_next_deadline_is_the_first_period_to_run_out() -> None:
    a, b = inst("a", launched=-1000.0), inst("b", launched=-1000.0)
    c = inst("c", S.STARTING, launched=90.0)

    def deadline(*steps: Snapshot) -> float | None:
        return next_deadline(POOL, steps[-1], run(steps).memory)

    first = snap(100.0, [a, b], idle=["a"], busy=["b"])
    assert deadline(first) == 160.0  # a's idle period
    # b's agent is missed at 110: its disconnect period ends at 140, before a's idle period.
    assert deadline(first, snap(110.0, [a, b], idle=["a"])) == 140.0
    assert deadline(first, snap(110.0, [a, c], idle=["a"])) == 160.0
    assert deadline(snap(110.0, [c])) == 210.0  # c's starting period
    assert deadline(snap(110.0, [a], busy=["a"])) is None


def test_the_decision_carries_the_deadline_next_deadline_gives() -> None:
    a, b = inst("a", launched=-1000.0), inst("b", launched=-1000.0)
    c = inst("c", S.STARTING, launched=90.0)
    steps = [snap(100.0, [a, b, c], idle=["a"], busy=["b"]), snap(110.0, [a, c], idle=["a"])]
    for n in range(1, len(steps) + 1):
        decision = run(steps[:n])
        assert decision.next_deadline == next_deadline(POOL, steps[n - 1], decision.memory)
    assert run(steps).next_deadline == 160.0


def test_a_steady_pool_keeps_its_memory_from_one_decision_to_the_next() -> None:
    instances = [inst("a"), inst("b"), inst("c", S.STARTING, launched=90.0), inst("d")]
    first = decide(POOL, snap(100.0, instances, idle=["a"], busy=["b"]))
    second = decide(POOL, snap(101.0, instances, idle=["a"], busy=["b"]), first.memory)
    assert second.memory.idle_since is first.memory.idle_since
    assert second.memory.gone_since is first.memory.gone_since
    assert second.memory.never is first.memory.never


def test_a_memory_made_by_hand_is_put_in_order_of_time() -> None:
    memory = Memory(idle_since={"b": 50.0, "a": 10.0, "c": 30.0})
    assert list(memory.idle_since) == ["a", "c", "b"]
    instances = [inst(i) for i in "abc"]
    decision = decide(pool(min_instances=1), snap(100.0, instances, idle=["a", "b", "c"]), memory)
    assert ends(decision) == {"a": Reason.IDLE, "c": Reason.IDLE}  # b has 10 s to go
    assert decision.next_deadline == 110.0


def test_a_snapshot_holds_each_live_instance_in_one_group_at_most() -> None:
    a, b = inst("a"), inst("b")
    with pytest.raises(ValueError, match="in one group at most"):
        Snapshot(0.0, {"a": a}, frozenset({"a"}), {"a": 0.0})
    snapshot = snap(0.0, [a, b, inst("c", S.STOPPED), inst("d", S.STOPPING)], idle=["b"])
    assert (set(snapshot.live), snapshot.idle) == ({"a", "b"}, {"b"})
    assert (dict(snapshot.agentless), snapshot.stopped) == ({"a": 0.0}, {"c"})


def test_an_idle_instance_kept_for_the_minimum_sets_no_deadline() -> None:
    settings = pool(min_instances=1)
    a = inst("a")
    decision = run([snap(0.0, [a], idle=["a"]), snap(100.0, [a], idle=["a"])], settings)
    assert decision.terminate == ()
    assert next_deadline(settings, snap(100.0, [a], idle=["a"]), decision.memory) is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"min_instances": 3, "max_instances": 2}, "max_instances 2 is below min_instances 3"),
        ({"min_instances": -1}, "min_instances -1"),
        ({"max_idle_agent_period": -1.0}, "max_idle_agent_period -1.0"),
    ],
)
def test_settings_that_cannot_work_fail_with_the_numbers(
    changes: dict[str, float], message: str
) -> None:
    with pytest.raises(errors.InvalidArgument, match=message):
        pool(**changes)


def test_summary_counts_terminations_by_reason() -> None:
    instances = [inst("a"), inst("b"), inst("c", S.STOPPED), inst("d", S.STARTING)]
    steps = [snap(0.0, instances, idle=["a", "b"]), snap(120.0, instances, idle=["a", "b"])]
    decision = run(steps, pool(min_instances=0))
    assert decision.summary == "terminate 4 (1 stopped, 1 agent never connected, 2 idle)"
    assert decide(POOL, snap(0.0, [], wanted=2)).summary == "launch 2"
    assert decide(POOL, snap(0.0, [])).summary == "no change"


# -- demand ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pending", "free", "wanted"),
    [
        ([], [], 0),
        ([1, 1, 1, 1], [], 1),
        ([1, 1, 1, 1, 1], [], 2),
        ([2, 1, 2, 1, 2], [], 2),  # first-fit decreasing: 2+2, 2+1+1
        ([3, 3, 2], [], 3),
        ([8], [], 2),  # a multi-node trial: whole instances
        ([9], [], 3),
        ([8, 1], [], 3),  # ... of its own
        ([2], [2], 0),  # fits on a connected agent
        ([2], [1, 1], 1),  # free slots are not pooled across agents
        ([4, 4], [8], 0),  # a larger static agent takes what fits
        ([0], [], 1),  # a CPU task needs somewhere to run
        ([0], [0], 0),  # ... any connected agent will do
        ([0, 2], [], 1),  # ... or the instance launched anyway
    ],
)
def test_instances_wanted(pending: list[int], free: list[int], wanted: int) -> None:
    assert instances_wanted(pending, free, 4) == wanted
    assert instances_wanted(pending[::-1], free, 4) == wanted


def test_instances_wanted_needs_an_instance_to_bring_a_slot() -> None:
    with pytest.raises(errors.InvalidArgument, match="slots_per_instance 0"):
        instances_wanted([1], [], 0)


# -- pools through time ---------------------------------------------------------------------------


def test_a_growing_queue_grows_the_pool_to_max_instances_and_no_further() -> None:
    work = [(0.0, [Work(4, 1000.0)] * 2), (100.0, [Work(4, 1000.0)] * 10)]
    sim = ScaleSim(pool(max_instances=5), work).run(until=500.0)
    assert [t for t, _ in sim.launches] == [0.0, 0.0, 100.0, 100.0, 100.0]
    assert max(s.live_after for s in sim.steps) == 5
    assert sim.terminations == []
    assert len(sim.queue) == 7  # waits; the pool does not grow past its maximum


def test_instances_idle_after_their_work_end_exactly_when_the_period_runs_out() -> None:
    work = [(0.0, [Work(4, 100.0), Work(4, 200.0), Work(4, 300.0)])]
    sim = ScaleSim(pool(min_instances=1, max_instances=5), work).run(until=2000.0)
    done = sorted(t for t, _ in sim.finished)
    assert done == [140.0, 240.0, 340.0]  # placed at 40: booted at 30, connected at 40
    # Each instance goes when its own idle period runs out, not a tick later; the last
    # stays for the minimum.
    assert [t for t, _ in sim.terminated(Reason.IDLE)] == [200.0, 300.0]
    assert len(sim.live()) == 1
    assert min(s.live_after for s in sim.steps) == 1


def test_an_instance_whose_agent_never_connects_is_replaced_while_work_waits() -> None:
    sim = ScaleSim(
        pool(max_instances=3), [(0.0, [Work(4, 50.0)])], faults=Faults(never_connect=frozenset({0}))
    ).run(until=1000.0)
    assert sim.terminations[0] == (120.0, "i000", Reason.AGENT_NEVER_CONNECTED)
    assert sim.launches[:2] == [(0.0, "i000"), (120.0, "i001")]
    assert [t for t, _ in sim.finished] == [210.0]  # on i001, connected at 160


def test_a_vanished_agent_is_replaced_at_once_and_its_instance_ended_after_the_period() -> None:
    sim = ScaleSim(
        pool(max_instances=3, max_disconnect_period=300.0),
        [(0.0, [Work(4, 500.0)])],
        faults=Faults(vanish_after={0: 100.0}),
    ).run(until=2000.0)
    assert sim.launches[:2] == [(0.0, "i000"), (140.0, "i001")]  # its work is back in line
    assert (440.0, "i000", Reason.AGENT_DISCONNECTED) in sim.terminations
    assert [t for t, _ in sim.finished] == [680.0]  # restarted on i001 at 180


def test_a_provider_that_never_boots_causes_no_launch_storm() -> None:
    sim = ScaleSim(
        pool(max_instances=5), [(0.0, [Work(4, 100.0)] * 3)], faults=Faults(never_boot=True)
    ).run(until=1200.0)
    # Three at a time (what the work needs), each batch given up after its starting period.
    assert len(sim.launches) == 3 * 11
    assert {t for t, _ in sim.launches} == {120.0 * n for n in range(11)}
    assert max(s.live_after for s in sim.steps) == 3
    for s in sim.steps:
        starting = s.live_after - s.decision.launch  # all of them, none ever boots
        assert s.decision.launch <= max(0, s.wanted - starting)


def test_min_instances_are_kept_up_with_no_work() -> None:
    sim = ScaleSim(pool(min_instances=2, max_instances=5)).run(until=10_000.0)
    assert sim.launches == [(0.0, "i000"), (0.0, "i001")]
    assert sim.terminations == []


WORK = st.builds(Work, st.integers(0, 9), st.integers(1, 400).map(float))
DEMAND = st.lists(
    st.tuples(st.integers(0, 150).map(lambda t: t * 10.0), st.lists(WORK, max_size=4)),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(
    demand_in=DEMAND,
    min_instances=st.integers(0, 3),
    extra=st.integers(0, 4),
    never_connect=st.frozensets(st.integers(0, 12), max_size=3),
    vanish=st.dictionaries(st.integers(0, 12), st.integers(1, 300).map(float), max_size=2),
)
def test_any_demand_keeps_the_pool_between_its_minimum_and_maximum(
    demand_in: list[tuple[float, list[Work]]],
    min_instances: int,
    extra: int,
    never_connect: frozenset[int],
    vanish: dict[int, float],
) -> None:
    settings = pool(min_instances=min_instances, max_instances=min_instances + extra)
    faults = Faults(never_connect=never_connect, vanish_after=vanish)
    sim = ScaleSim(settings, demand_in, faults=faults).run(until=2500.0)
    for step in sim.steps:
        assert settings.min_instances <= step.live_after <= settings.max_instances
        shrinking = [
            t for t in step.decision.terminate if t.reason in (Reason.IDLE, Reason.OVER_MAXIMUM)
        ]
        if shrinking:
            ended = sum(t.reason is not Reason.STOPPED for t in step.decision.terminate)
            assert step.live_before - ended >= settings.min_instances
