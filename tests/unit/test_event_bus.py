"""The master's event bus: what each subscriber is handed."""

from __future__ import annotations

import asyncio

from pydet.master.events import EventBus


async def test_a_subscriber_of_some_kinds_gets_only_those() -> None:
    bus = EventBus()
    experiments = bus.subscribe(kinds=["experiment"])
    everything = bus.subscribe()
    first_experiment = asyncio.ensure_future(anext(experiments))
    first_any = asyncio.ensure_future(anext(everything))
    await asyncio.sleep(0)  # both subscriptions register

    bus.publish("trial", id=4, state="ACTIVE")
    bus.publish("experiment", id=1, state="COMPLETED")

    event = await first_experiment
    assert (event.kind, event.data) == ("experiment", {"id": 1, "state": "COMPLETED"})
    assert (await first_any).kind == "trial"
    assert (await anext(everything)).kind == "experiment"
    await experiments.aclose()
    await everything.aclose()
    assert not bus._subscribers
