from __future__ import annotations

import asyncio
import json

import pytest

from determined.common import errors
from pydet.master.tasks.allocation import Allocation, Container
from pydet.master.tasks.task_list import UnknownJob


def allocation() -> Allocation:
    containers = {
        f"c{r}": Container(id=f"c{r}", agent_id=f"a{r}", slot_ids=("0",), rank=r) for r in range(2)
    }
    return Allocation(
        id="1.1.1",
        task_id="1.1",
        trial_id=1,
        token="t",
        containers=containers,
        job=UnknownJob(),
    )


async def test_allgather_returns_every_rank_in_rank_order() -> None:
    alloc = allocation()
    results = await asyncio.gather(
        *(alloc.allgather("world", 0, r, 3, f"r{r}".encode(), 5) for r in (2, 0, 1))
    )
    assert all(res == [b"r0", b"r1", b"r2"] for res in results)


async def test_successive_calls_meet_by_sequence_number() -> None:
    alloc = allocation()
    a = asyncio.gather(
        alloc.allgather("world", 0, 0, 2, b"a0", 5), alloc.allgather("world", 1, 0, 2, b"b0", 5)
    )
    b = asyncio.gather(
        alloc.allgather("world", 1, 1, 2, b"b1", 5), alloc.allgather("world", 0, 1, 2, b"a1", 5)
    )
    (a0, b0), (b1, a1) = await asyncio.gather(a, b)
    assert a0 == a1 == [b"a0", b"a1"]
    assert b0 == b1 == [b"b0", b"b1"]


async def test_a_dead_container_aborts_waiting_ranks_with_a_clear_error() -> None:
    alloc = allocation()
    waiting = asyncio.create_task(alloc.allgather("world", 0, 0, 2, b"x", 60))
    await asyncio.sleep(0.01)
    alloc.container_exited(alloc.containers["c1"], 137, "")
    with pytest.raises(errors.Aborted, match=r"rank\(s\) \[1\].*exited with code 137"):
        await waiting
    with pytest.raises(errors.Aborted):
        await alloc.allgather("world", 1, 0, 2, b"x", 60)


async def test_allgather_times_out_naming_the_missing_ranks() -> None:
    with pytest.raises(errors.DeadlineExceeded, match=r"rank\(s\) \[1\]"):
        await allocation().allgather("world", 0, 0, 2, b"x", 0.05)


async def test_preemption_long_poll_wakes_when_signalled() -> None:
    alloc = allocation()
    assert await alloc.wait_preemption(0.01) is False
    waiter = asyncio.create_task(alloc.wait_preemption(10))
    alloc.preempt.set()
    assert await waiter is True


async def test_a_retried_call_after_completion_gets_the_same_answer() -> None:
    alloc = allocation()
    first = await asyncio.gather(
        *(alloc.allgather("world", 0, r, 2, f"{r}".encode(), 5, f"id{r}") for r in (0, 1))
    )
    assert await alloc.allgather("world", 0, 1, 2, b"1", 5, "id1") == first[1]


async def test_a_new_process_reusing_a_sequence_number_starts_a_new_round() -> None:
    alloc = allocation()
    await asyncio.gather(*(alloc.allgather("world", 0, r, 2, b"old", 5, f"a{r}") for r in (0, 1)))
    second = await asyncio.gather(
        *(alloc.allgather("world", 0, r, 2, f"new{r}".encode(), 5, f"b{r}") for r in (0, 1))
    )
    assert second[0] == [b"new0", b"new1"]


# -- daemon containers -----------------------------------------------------------------------


def test_daemons_are_stopped_only_once_every_other_container_has_exited() -> None:
    alloc = allocation()
    alloc.mark_daemon("c1")
    assert alloc.daemons_to_stop() == []
    alloc.container_exited(alloc.containers["c0"], 0, "")
    assert alloc.daemons_to_stop() == [alloc.containers["c1"]]
    alloc.daemons_stopped = True
    assert alloc.daemons_to_stop() == []


def test_a_stopped_daemon_is_not_held_against_the_allocation() -> None:
    alloc = allocation()
    alloc.mark_daemon("c1")
    alloc.container_exited(alloc.containers["c0"], 0, "")
    alloc.container_exited(alloc.containers["c1"], 143, "killed")
    assert alloc.exited and alloc.succeeded
    assert alloc.first_failure() is None


def test_a_daemon_that_fails_early_ends_nothing_and_blames_nothing() -> None:
    alloc = allocation()
    alloc.mark_daemon("c1")
    alloc.container_exited(alloc.containers["c1"], 1, "")
    assert not alloc.exited
    assert alloc.daemons_to_stop() == []
    alloc.container_exited(alloc.containers["c0"], 0, "")
    assert alloc.succeeded


def test_a_failed_non_daemon_still_fails_the_allocation() -> None:
    alloc = allocation()
    alloc.mark_daemon("c1")
    alloc.container_exited(alloc.containers["c0"], 3, "")
    alloc.container_exited(alloc.containers["c1"], 143, "killed")
    assert alloc.exited and not alloc.succeeded
    failure = alloc.first_failure()
    assert failure is not None and failure.id == "c0"


def test_a_daemon_lost_with_its_agent_does_not_make_the_allocation_lost() -> None:
    alloc = allocation()
    alloc.mark_daemon("c1")
    alloc.containers["c1"].lost = True
    alloc.container_exited(alloc.containers["c1"], -1, "lost")
    alloc.container_exited(alloc.containers["c0"], 0, "")
    assert alloc.succeeded and not alloc.lost


def test_marking_is_idempotent_and_survives_the_containers_json() -> None:
    alloc = allocation()
    alloc.mark_daemon("c1")
    alloc.mark_daemon("c1")
    restored = [Container.from_json(d) for d in json.loads(alloc.containers_json())]
    assert [c.daemon for c in restored] == [False, True]


def test_marking_an_unknown_container_names_the_known_ones() -> None:
    with pytest.raises(errors.NotFound, match=r"has no resources 'c9' \(it has c0, c1\)"):
        allocation().mark_daemon("c9")


def test_marking_an_exited_container_is_refused() -> None:
    alloc = allocation()
    alloc.container_exited(alloc.containers["c1"], 2, "")
    with pytest.raises(errors.FailedPrecondition, match=r"already exited \(code 2\)"):
        alloc.mark_daemon("c1")


def test_the_last_working_container_cannot_become_a_daemon() -> None:
    alloc = allocation()
    alloc.mark_daemon("c1")
    with pytest.raises(errors.FailedPrecondition, match="at least one container must do"):
        alloc.mark_daemon("c0")
    assert not alloc.containers["c0"].daemon
