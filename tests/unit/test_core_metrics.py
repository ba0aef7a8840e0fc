"""Metric reports: queued by the training loop, shipped in batches by the session's loop."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any

import grpclib.const
import grpclib.exceptions
import pytest

from determined import core
from determined.common import errors
from determined.core import _metrics, _rpc, _session, _train
from determined.core._train import MetricRecord


class FakeTransport:
    """The two RPCs the shipper makes, recorded; a gate can hold a batch in flight."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.batches: list[list[MetricRecord]] = []
        self.progress: list[float] = []
        self.failures: list[Exception] = []
        self.delay = 0.0
        self.gate: asyncio.Event | None = None
        self.in_flight = threading.Event()
        self.encode = False

    def hold(self) -> None:
        self.gate = asyncio.Event()

    def release(self) -> None:
        gate = self.gate
        assert gate is not None
        self.loop.call_soon_threadsafe(gate.set)

    async def send(self, records: list[MetricRecord]) -> None:
        self.in_flight.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.encode:
            _rpc.metrics_request(1, 1, records).SerializeToString()
        if self.failures:
            raise self.failures.pop(0)
        self.batches.append(list(records))

    async def send_progress(self, progress: float) -> None:
        self.progress.append(progress)


@pytest.fixture
def session() -> Iterator[_session.Session]:
    # No RPC is made, so the session never opens a connection.
    s = _session.Session("127.0.0.1:1", "token")
    yield s
    s.close()


@pytest.fixture
def transport(session: _session.Session) -> FakeTransport:
    return FakeTransport(session.loop)


def shipper(
    session: _session.Session, transport: FakeTransport, max_batch: int = 5000
) -> _metrics.MetricShipper:
    return _metrics.MetricShipper(
        session, transport.send, transport.send_progress, max_batch=max_batch
    )


def record(step: int, group: str = "training") -> MetricRecord:
    return MetricRecord(group, step, f'{{"loss":{step}}}', time.time(), "")


def steps(batches: list[list[MetricRecord]]) -> list[int]:
    return [r.steps_completed for batch in batches for r in batch]


def test_reports_queued_during_a_batch_go_out_together_next(
    session: _session.Session, transport: FakeTransport
) -> None:
    s = shipper(session, transport)
    transport.hold()
    s.put(record(0))
    assert transport.in_flight.wait(5)
    for step in range(1, 1000):
        s.put(record(step))
    transport.release()
    s.close()
    assert [len(b) for b in transport.batches] == [1, 999]
    assert steps(transport.batches) == list(range(1000))


def test_reports_soon_after_a_batch_wait_for_the_interval_to_go_out_together(
    session: _session.Session, transport: FakeTransport
) -> None:
    s = _metrics.MetricShipper(session, transport.send, transport.send_progress, interval=0.3)
    s.put(record(0))  # the first after a quiet spell: at once
    assert transport.in_flight.wait(5)
    for step in range(1, 5):
        time.sleep(0.01)
        s.put(record(step))
    time.sleep(0.1)
    assert [len(b) for b in transport.batches] == [1]
    deadline = time.monotonic() + 5
    while len(transport.batches) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [len(b) for b in transport.batches] == [1, 4]
    s.close()


def test_a_flush_does_not_wait_out_the_interval(
    session: _session.Session, transport: FakeTransport
) -> None:
    s = _metrics.MetricShipper(session, transport.send, transport.send_progress, interval=30)
    s.put(record(0))
    assert transport.in_flight.wait(5)
    s.put(record(1))
    started = time.monotonic()
    s.flush()
    assert time.monotonic() - started < 5
    assert steps(transport.batches) == [0, 1]
    s.put(record(2))  # and after a flush, a report soon after it waits again
    time.sleep(0.2)
    assert steps(transport.batches) == [0, 1]
    s.close()
    assert steps(transport.batches) == [0, 1, 2]


def test_a_batch_holds_at_most_max_batch_reports_in_order(
    session: _session.Session, transport: FakeTransport
) -> None:
    s = shipper(session, transport, max_batch=100)
    transport.hold()
    for step in range(1050):
        s.put(record(step))
    transport.release()
    s.close()
    assert max(len(b) for b in transport.batches) == 100
    assert steps(transport.batches) == list(range(1050))


def test_close_delivers_everything_reported_before_it(
    session: _session.Session, transport: FakeTransport
) -> None:
    transport.delay = 0.01
    s = shipper(session, transport)
    for step in range(20000):
        s.put(record(step))
        if step % 5000 == 0:
            time.sleep(0.005)
    s.close()
    assert steps(transport.batches) == list(range(20000))
    with pytest.raises(RuntimeError, match=r"after core\.Context\.close"):
        s.put(record(1))
    s.close()  # idempotent


def test_a_failed_batch_is_raised_by_the_next_report(
    session: _session.Session, transport: FakeTransport
) -> None:
    transport.failures.append(errors.InvalidArgument("trial 7 is not running"))
    s = shipper(session, transport)
    transport.hold()
    s.put(record(10))
    assert transport.in_flight.wait(5)
    transport.release()
    raised = None
    step = 11
    deadline = time.monotonic() + 5
    while raised is None and time.monotonic() < deadline:
        try:
            s.put(record(step))
            step += 1
        except core.ReportError as e:
            raised = e
        time.sleep(0.001)
    assert raised is not None
    assert "1 metric reports (training; steps_completed 10..10)" in str(raised)
    assert "were not recorded by the master: trial 7 is not running" in str(raised)
    # Raised once; later reports are shipped again.
    s.put(record(step))
    s.close()
    assert steps(transport.batches) == list(range(11, step + 1))


def test_a_failed_batch_is_raised_at_close(
    session: _session.Session, transport: FakeTransport
) -> None:
    transport.failures.append(errors.Unavailable("the master at x is unavailable"))
    s = shipper(session, transport)
    s.put(record(1))
    with pytest.raises(core.ReportError, match="unavailable"):
        s.close()


def test_only_the_latest_progress_is_shipped(
    session: _session.Session, transport: FakeTransport
) -> None:
    s = shipper(session, transport)
    transport.hold()
    s.put(record(0))
    assert transport.in_flight.wait(5)
    for p in (0.1, 0.2, 0.3):
        s.put_progress(p)
    transport.release()
    s.close()
    assert transport.progress == [0.3]


def test_fifty_thousand_training_reports_all_arrive_in_order(
    session: _session.Session, transport: FakeTransport
) -> None:
    transport.encode = True  # the real transport's cost, on the shipping thread
    train = _train.TrainContext(
        distributed=core.DummyDistributedContext(),
        trial_id=1,
        run_id=1,
        experiment_id=1,
        shipper=shipper(session, transport),
        client=None,  # type: ignore[arg-type]
    )
    # How fast this is: bench/core_api.py. Here: every report arrives, in order.
    n = 50000
    for step in range(n):
        train.report_training_metrics(step, {"loss": 0.5, "accuracy": 0.25})
    train._close()
    assert steps(transport.batches) == list(range(n))


def test_only_the_chief_may_report(session: _session.Session, transport: FakeTransport) -> None:
    dist = core.DistributedContext(
        rank=2, size=4, local_rank=0, local_size=2, cross_rank=1, cross_size=2
    )
    train = _train.TrainContext(
        distributed=dist,
        trial_id=1,
        run_id=1,
        experiment_id=1,
        shipper=shipper(session, transport),
        client=None,  # type: ignore[arg-type]
    )
    message = "only the chief (rank 0) may report training metrics; this is rank 2"
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        train.report_training_metrics(1, {"loss": 1.0})
    with pytest.raises(RuntimeError, match="may report validation metrics; this is rank 2"):
        train.report_validation_metrics(1, {"loss": 1.0})
    with pytest.raises(RuntimeError, match="may report progress; this is rank 2"):
        train.report_progress(0.5)
    with pytest.raises(RuntimeError, match="may report an early exit; this is rank 2"):
        train.report_early_exit(core.EarlyExitReason.INVALID_HP)
    dummy = core.DummyTrainContext(dist)
    with pytest.raises(RuntimeError, match="this is rank 2"):
        dummy.report_metrics("custom", 1, {"x": 1})


def test_session_retries_an_unreachable_master(session: _session.Session) -> None:
    attempts = []

    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionRefusedError("refused")
        return "ok"

    assert session.run(session.call("ping", flaky)) == "ok"
    assert len(attempts) == 3


def test_session_gives_up_and_translates_errors(session: _session.Session) -> None:
    async def down() -> None:
        raise ConnectionRefusedError("refused")

    with pytest.raises(errors.Unavailable, match="ping: cannot reach the master"):
        session.run(session.call("ping", down, retry_for=0.3))

    calls = []

    async def missing() -> None:
        calls.append(1)
        raise grpclib.exceptions.GRPCError(grpclib.const.Status.NOT_FOUND, "no checkpoint x")

    with pytest.raises(errors.NotFound, match="get: no checkpoint x"):
        session.run(session.call("get", missing))
    assert calls == [1]  # answers of the master are not retried

    async def slow() -> None:
        raise TimeoutError

    with pytest.raises(errors.DeadlineExceeded):
        session.run(session.call("wait", slow))


def test_session_close_cancels_its_tasks_and_joins_its_thread() -> None:
    session = _session.Session("127.0.0.1:1", "")
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    session.spawn(forever, name="forever")
    session.close()
    session.close()
    assert cancelled.is_set()
    assert not session._thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        session.submit(asyncio.sleep(0))


def test_a_task_spawned_just_before_close_ends_cancelled_not_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # core.init() spawns its background tasks without waiting for the loop; when init then
    # fails (a bad config), close() follows at once and a task's first call meets it.
    def poll(session: _session.Session) -> Coroutine[Any, Any, object]:
        return session.call("poll", lambda: session.stub.get_master(None))

    for _ in range(20):
        session = _session.Session("127.0.0.1:1", "")
        session.spawn(functools.partial(poll, session), name="poll")
        session.close()
    assert "background task" not in caplog.text
