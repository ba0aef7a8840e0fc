"""The webhook sender against real sockets on loopback: a receiver that never answers
does not hold up deliveries to others, and one that fails is retried, then given up."""

from __future__ import annotations

import asyncio
import contextlib
import time

from pydet.master.webhooks.sender import Delivery, Sender
from tests.receiver import receiver


async def test_a_receiver_that_never_answers_does_not_hold_up_the_others() -> None:
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(60)  # reads nothing, answers nothing

    black_hole = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = black_hole.sockets[0].getsockname()[1]
    sender = Sender(attempts=1, attempt_timeout=30)
    with receiver() as r:
        running = asyncio.create_task(sender.run())
        try:
            for n in range(12):
                assert sender.send(Delivery(f"http://127.0.0.1:{port}/", {"n": n}, f"dead {n}"))
            assert sender.send(Delivery(r.url("/ok"), {"hello": 1}, "good"))
            start = time.monotonic()
            while not r.accepted("/ok") and time.monotonic() - start < 10:
                await asyncio.sleep(0.05)
            assert r.accepted("/ok") == [{"hello": 1}]
            assert time.monotonic() - start < 5
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            black_hole.close()


async def test_a_failing_receiver_is_retried_then_given_up() -> None:
    sender = Sender(attempts=3, first_backoff=0.05)
    with receiver(fail_first=10) as r:
        running = asyncio.create_task(sender.run())
        try:
            sender.send(Delivery(r.url("/x"), {"a": 1}, "event"))
            deadline = time.monotonic() + 10
            while sender.failed == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert [p.status for p in r.all("/x")] == [500, 500, 500]
            assert sender.failed == 1 and sender.delivered == 0
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
