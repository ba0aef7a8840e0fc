from __future__ import annotations

import asyncio
import time

from pydet.agent.outbox import Batch, Outbox
from pydet.agent.runtime import Exited, LogLine, Output, Started


def started(cid: str) -> Started:
    return Started(cid, f"alloc-{cid}", 100, 1.0)


def output(cid: str, *texts: str) -> Output:
    return Output(cid, f"alloc-{cid}", tuple(LogLine(2.0, "stdout", t) for t in texts))


def exited(cid: str, code: int = 0) -> Exited:
    return Exited(cid, f"alloc-{cid}", code, "", 3.0)


async def take(box: Outbox, timeout: float = 2.0) -> Batch:
    async with asyncio.timeout(timeout):
        batch = await box.take()
    assert batch is not None
    box.commit(batch)
    return batch


def texts(batch: Batch) -> list[str]:
    assert isinstance(batch.item, Output)
    return [line.text for line in batch.item.lines]


async def test_events_come_out_in_order_with_lines_grouped() -> None:
    box = Outbox()
    box.put(started("a"))
    box.put(output("a", "1", "2", "3"))
    box.put(output("a", "4", "5"))
    box.put(exited("a", 7))
    assert (await take(box)).item == started("a")
    assert texts(await take(box)) == ["1", "2", "3", "4", "5"]
    assert (await take(box)).item == exited("a", 7)
    assert box.empty() and box.line_count == 0


async def test_a_lone_batch_of_lines_waits_at_most_the_flush_interval() -> None:
    box = Outbox(flush_interval=0.05)
    box.put(output("a", "x"))
    began = time.monotonic()
    batch = await take(box)
    waited = time.monotonic() - began
    assert texts(batch) == ["x"]
    assert 0.03 <= waited < 0.5


async def test_full_batches_go_at_once_and_batches_never_exceed_the_limit() -> None:
    box = Outbox(batch_lines=3, flush_interval=10)
    box.put(output("a", *"abcdefg"))
    assert texts(await take(box, timeout=0.5)) == ["a", "b", "c"]
    assert texts(await take(box, timeout=0.5)) == ["d", "e", "f"]
    box.put(exited("a"))  # something behind the last batch: it cannot grow, so it goes
    assert texts(await take(box, timeout=0.5)) == ["g"]


async def test_batches_are_also_bounded_by_size() -> None:
    box = Outbox(batch_bytes=10, flush_interval=0)
    box.put(output("a", "123456", "123456", "1"))
    assert texts(await take(box)) == ["123456"]
    assert texts(await take(box)) == ["123456", "1"]


async def test_lines_of_different_containers_are_not_mixed() -> None:
    box = Outbox(flush_interval=0)
    box.put(output("a", "a1"))
    box.put(output("b", "b1"))
    box.put(output("a", "a2"))
    got = [(b.item.container_id, texts(b)) for b in [await take(box) for _ in range(3)]]
    assert got == [("a", ["a1"]), ("b", ["b1"]), ("a", ["a2"])]


async def test_oldest_lines_are_dropped_over_the_limit_with_one_notice() -> None:
    box = Outbox(max_lines=5, flush_interval=0)
    box.put(started("a"))
    box.put(output("a", "0", "1", "2", "3"))
    box.put(output("a", "4", "5", "6", "7"))
    assert box.line_count == 5
    assert (await take(box)).item == started("a")
    lines = texts(await take(box))
    assert "3 earlier log line(s) were dropped" in lines[0]
    assert lines[1:] == ["3", "4", "5", "6", "7"]
    box.put(output("a", "8"))
    assert texts(await take(box)) == ["8"]  # the notice is given once


async def test_a_drop_notice_comes_before_the_exit_even_when_no_line_is_left() -> None:
    box = Outbox(max_lines=2, flush_interval=0)
    box.put(started("a"))
    box.put(output("a", "a1", "a2", "a3"))
    box.put(exited("a", 1))
    box.put(started("b"))
    box.put(output("b", "b1", "b2"))
    assert (await take(box)).item == started("a")
    notice = await take(box)
    assert notice.item.container_id == "a"
    assert "3 earlier log line(s) were dropped" in texts(notice)[0]
    assert (await take(box)).item == exited("a", 1)
    assert (await take(box)).item == started("b")
    assert texts(await take(box)) == ["b1", "b2"]


async def test_a_batch_that_could_not_be_sent_goes_first_next_time() -> None:
    box = Outbox(flush_interval=0)
    box.put(output("a", "1", "2"))
    batch = await box.take()
    assert batch is not None
    box.put(output("a", "3"))
    box.restore(batch)
    assert box.line_count == 3
    assert texts(await take(box)) == ["1", "2"]
    assert texts(await take(box)) == ["3"]


async def test_exits_are_kept_until_acknowledged_and_resent_only_once_sent() -> None:
    box = Outbox()
    box.put(exited("a", 3))
    box.put(exited("b", 4))
    assert box.unacked_count == 2
    assert box.unacked_sent() == []  # still queued: they go out in order anyway
    first = await box.take()
    assert first is not None
    box.restore(first)  # the send failed
    assert box.unacked_sent() == []
    await take(box)
    assert box.unacked_sent() == [exited("a", 3)]
    await take(box)
    box.ack("a")
    assert box.unacked_sent() == [exited("b", 4)]
    box.ack("b")
    box.ack("never-heard-of")
    assert box.unacked_count == 0
    async with asyncio.timeout(0.1):
        await box.wait_all_acked()


async def test_wake_flushes_everything_then_returns_none() -> None:
    box = Outbox(flush_interval=60)
    box.put(output("a", "x"))
    box.wake()
    assert texts(await take(box, timeout=0.5)) == ["x"]
    async with asyncio.timeout(0.5):
        assert await box.take() is None


async def test_take_waits_for_something_to_send() -> None:
    box = Outbox(flush_interval=0)
    waiter = asyncio.create_task(box.take())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    box.put(started("a"))
    async with asyncio.timeout(1):
        batch = await waiter
    assert batch is not None and batch.item == started("a")


async def test_sent_lines_are_reported_with_their_last_timestamp_only_once_sent() -> None:
    sent: list[tuple[str, float]] = []
    box = Outbox(flush_interval=0, on_sent=lambda cid, ts: sent.append((cid, ts)))
    event = output("c", "a", "b")
    box.put(event)
    batch = await box.take()
    assert batch is not None
    box.restore(batch)  # could not be sent: nothing to report
    assert sent == []
    await take(box)  # taken and sent
    assert sent == [("c", event.lines[-1].timestamp)]
    box.put(exited("c"))
    await take(box)  # an exit is not a line
    assert len(sent) == 1
