"""DistributedContext: construction, launcher environments, and collectives via the master."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from determined import core
from determined.common import errors


class FakeMaster:
    """The master's all-gather barrier, in memory: each (group, seq) round waits for all."""

    def __init__(self) -> None:
        self.allocation_id = f"alloc-{uuid.uuid4()}"
        self.cond = threading.Condition()
        self.rounds: dict[tuple[str, int], dict[int, bytes]] = {}
        self.calls: list[tuple[str, int, int, int]] = []
        self.fail_with: errors.DetError | None = None

    def all_gather(
        self, *, group: str, seq: int, rank: int, size: int, data: bytes, timeout: float
    ) -> list[bytes]:
        with self.cond:
            self.calls.append((group, seq, rank, size))
            if self.fail_with is not None:
                raise self.fail_with
            contributions = self.rounds.setdefault((group, seq), {})
            contributions[rank] = data
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: len(contributions) == size, timeout=10):
                raise errors.DeadlineExceeded("timed out")
            return [contributions[r] for r in range(size)]

    def close(self) -> None:
        pass


def run_ranks(
    master: FakeMaster,
    layout: list[tuple[int, int, int]],
    body: Callable[[core.DistributedContext], Any],
) -> list[Any]:
    """Run ``body`` once per (rank, local_rank, cross_rank) in threads; return results."""
    size = len(layout)
    cross_size = len({c for _, _, c in layout})
    local_size = size // cross_size
    results: list[Any] = [None] * size

    def worker(rank: int, local_rank: int, cross_rank: int) -> None:
        dist = core.DistributedContext(
            rank=rank,
            size=size,
            local_rank=local_rank,
            local_size=local_size,
            cross_rank=cross_rank,
            cross_size=cross_size,
        )
        dist._attach(master)
        try:
            results[rank] = body(dist)
        except Exception as e:
            results[rank] = e

    threads = [threading.Thread(target=worker, args=spec) for spec in layout]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


TWO_NODES = [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)]


def test_constructor_checks_ranks_and_says_how_to_fix_the_call() -> None:
    with pytest.raises(ValueError, match="0 <= rank < size"):
        core.DistributedContext(
            rank=2, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1
        )
    with pytest.raises(TypeError, match="must be an int"):
        core.DistributedContext(
            rank="0",  # type: ignore[arg-type]
            size=1,
            local_rank=0,
            local_size=1,
            cross_rank=0,
            cross_size=1,
        )
    with pytest.raises(TypeError):
        core.DistributedContext(0, 1, 0, 1, 0, 1)  # type: ignore[call-arg]


def test_getters_match_attributes_and_ports_are_accepted() -> None:
    dist = core.DistributedContext(
        rank=5,
        size=8,
        local_rank=1,
        local_size=4,
        cross_rank=1,
        cross_size=2,
        chief_ip="10.0.0.1",
        pub_port=1234,
        pull_port=1235,
    )
    assert (dist.get_rank(), dist.get_size(), dist.get_local_rank()) == (5, 8, 1)
    assert (dist.get_local_size(), dist.get_cross_rank(), dist.get_cross_size()) == (4, 1, 2)
    assert dist.get_num_agents() == 2


def test_single_worker_collectives_need_no_master() -> None:
    dist = core.DummyDistributedContext()
    assert dist.allgather({"a": 1}) == [{"a": 1}]
    assert dist.gather(3) == [3]
    assert dist.broadcast("x") == "x"
    assert dist.allgather_local(1) == [1]
    assert dist.gather_local(1) == [1]
    assert dist.broadcast_local(2) == 2


TORCH_ENV = {
    "RANK": "3",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1",
    "GROUP_WORLD_SIZE": "2",
}


def test_from_torch_distributed_reads_torchrun_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in TORCH_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DET_CHIEF_IP", "10.1.1.1")
    dist = core.DistributedContext.from_torch_distributed()
    assert (dist.rank, dist.size, dist.local_rank, dist.local_size) == (3, 4, 1, 2)
    assert (dist.cross_rank, dist.cross_size) == (1, 2)
    assert dist._chief_ip == "10.1.1.1"


def test_from_torch_distributed_names_the_missing_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in TORCH_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    with pytest.raises(RuntimeError, match="LOCAL_WORLD_SIZE is not set") as info:
        core.DistributedContext.from_torch_distributed()
    assert "determined.launch.torch_distributed" in str(info.value)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    with pytest.raises(RuntimeError, match="LOCAL_WORLD_SIZE='two' is not an integer"):
        core.DistributedContext.from_torch_distributed()


def test_from_deepspeed_reads_deepspeed_then_openmpi_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in [*TORCH_ENV, "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"]:
        monkeypatch.delenv(key, raising=False)
    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_SIZE": "4"}
    env |= {"CROSS_RANK": "1", "CROSS_SIZE": "2"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    dist = core.DistributedContext.from_deepspeed()
    assert (dist.rank, dist.size, dist.local_size, dist.cross_rank, dist.cross_size) == (
        5,
        8,
        4,
        1,
        2,
    )
    for key in env:
        monkeypatch.delenv(key)
    ompi = {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_SIZE": "8"}
    ompi |= {"OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    for key, value in ompi.items():
        monkeypatch.setenv(key, value)
    dist = core.DistributedContext.from_deepspeed()
    assert (dist.rank, dist.local_rank, dist.cross_rank, dist.cross_size) == (6, 2, 1, 2)
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE")
    with pytest.raises(RuntimeError, match=r"WORLD_SIZE \(or OMPI_COMM_WORLD_SIZE\) is not set"):
        core.DistributedContext.from_deepspeed()


def test_from_horovod_asks_the_module() -> None:
    class Hvd:
        def rank(self) -> int:
            return 1

        def size(self) -> int:
            return 2

        def local_rank(self) -> int:
            return 1

        def local_size(self) -> int:
            return 2

        def cross_rank(self) -> int:
            return 0

        def cross_size(self) -> int:
            return 1

    dist = core.DistributedContext.from_horovod(Hvd())
    assert (dist.rank, dist.size, dist.local_rank, dist.cross_size) == (1, 2, 1, 1)


def test_collectives_across_two_nodes() -> None:
    master = FakeMaster()

    def body(dist: core.DistributedContext) -> Any:
        return (
            dist.allgather(dist.rank * 10),
            dist.gather({"r": dist.rank}),
            dist.broadcast(f"from {dist.rank}"),
            dist.allgather_local(dist.rank),
            dist.gather_local(dist.rank),
            dist.broadcast_local(f"local chief of node {dist.cross_rank} is {dist.rank}"),
        )

    results = run_ranks(master, TWO_NODES, body)
    for rank, (allg, gath, bcast, allg_l, gath_l, bcast_l) in enumerate(results):
        node = rank // 2
        assert allg == [0, 10, 20, 30]
        assert gath == ([{"r": 0}, {"r": 1}, {"r": 2}, {"r": 3}] if rank == 0 else None)
        assert bcast == "from 0"
        assert allg_l == [2 * node, 2 * node + 1]
        assert gath_l == ([2 * node, 2 * node + 1] if rank % 2 == 0 else None)
        assert bcast_l == f"local chief of node {node} is {2 * node}"
    groups = {(group, rank, size) for group, _, rank, size in master.calls}
    assert ("world", 3, 4) in groups
    assert ("local.1", 1, 2) in groups  # local forms use local ranks within the node's group


def test_sequence_numbers_count_calls_per_group() -> None:
    master = FakeMaster()

    def body(dist: core.DistributedContext) -> None:
        dist.allgather(1)
        dist.allgather_local(1)
        dist.broadcast(1)

    run_ranks(master, TWO_NODES, body)
    world = sorted({seq for group, seq, _, _ in master.calls if group == "world"})
    local = sorted({seq for group, seq, _, _ in master.calls if group == "local.0"})
    assert world == [0, 1]
    assert local == [0]


def test_a_new_context_continues_the_sequence() -> None:
    # A closed-and-recreated DistributedContext must not reuse numbers the master has seen.
    master = FakeMaster()
    run_ranks(master, [(0, 0, 0), (1, 1, 0)], lambda d: d.allgather(1))
    run_ranks(master, [(0, 0, 0), (1, 1, 0)], lambda d: d.allgather(2))
    assert sorted({seq for _, seq, _, _ in master.calls}) == [0, 1]


def test_aborted_collective_names_the_collective_and_group() -> None:
    master = FakeMaster()
    master.fail_with = errors.Aborted("container 2 of the allocation exited")
    results = run_ranks(master, [(0, 0, 0), (1, 1, 0)], lambda d: d.broadcast(None))
    for error in results:
        assert isinstance(error, core.CollectiveError)
        assert isinstance(error, RuntimeError)
        assert "broadcast()" in str(error) and "'world'" in str(error)
        assert "container 2 of the allocation exited" in str(error)
        assert error.group == "world"


def test_collective_timeout_is_an_error_not_a_hang() -> None:
    master = FakeMaster()
    master.fail_with = errors.DeadlineExceeded("not all ranks arrived")
    [error, _] = run_ranks(master, [(0, 0, 0), (1, 1, 0)], lambda d: d.allgather(1))
    assert isinstance(error, core.CollectiveError)
    assert "not every worker joined" in str(error)


def test_collectives_off_cluster_with_many_workers_are_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DET_ALLOCATION_ID", raising=False)
    dist = core.DistributedContext(
        rank=0, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1
    )
    with pytest.raises(RuntimeError, match="not a pydet task"):
        dist.allgather(1)


def test_unpicklable_object_is_refused_before_any_exchange() -> None:
    master = FakeMaster()
    dist = core.DistributedContext(
        rank=0, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1
    )
    dist._attach(master)
    with pytest.raises(TypeError, match="picklable"):
        dist.allgather(lambda: None)
    assert master.calls == []


def test_closed_context_refuses_collectives() -> None:
    dist = core.DistributedContext(
        rank=0, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1
    )
    dist.close()
    dist.close()
    with pytest.raises(RuntimeError, match="after close"):
        dist.broadcast(1)


def test_should_preempt_is_a_collective_answered_by_the_chief() -> None:
    master = FakeMaster()

    def body(dist: core.DistributedContext) -> bool:
        preempt = core.DummyPreemptContext(dist)
        return preempt.should_preempt()

    assert run_ranks(master, TWO_NODES, body) == [False] * 4
    assert {group for group, *_ in master.calls} == {"world"}


def test_searcher_ops_reach_every_worker() -> None:
    master = FakeMaster()

    def body(dist: core.DistributedContext) -> list[int]:
        lengths = []
        for op in core.DummySearcherContext(dist, length=7).operations():
            lengths.append(op.length)
            if dist.rank == 0:
                op.report_completed(0.5)
            else:
                with pytest.raises(RuntimeError, match="only the chief"):
                    op.report_completed(0.5)
        return lengths

    assert run_ranks(master, [(0, 0, 0), (1, 1, 0)], body) == [[7], [7]]
