"""PULLING, as Determined shows it while an agent pulls a trial's image: the agent reports
the pull before the container starts, and the master shows the trial and its experiment
PULLING until the container has started.

The real master runs; the agent is scripted over the real agent stream (its messages made by
the agent's own ``wire`` code), because only the docker runtime pulls images and there is no
Docker here (the docker runtime's pull is in tests/docker).
"""

from __future__ import annotations

import asyncio
import pathlib
import time
from collections.abc import Iterator

import pytest

from determined.common import client
from pydet.agent import wire
from pydet.agent.connection import open_stream
from pydet.agent.runtime import Exited, Pulling, Started
from pydet.agent.slots import artificial
from tests.cluster import Cluster, running
from tests.integration.test_search import make_context

CONFIG = """
entrypoint: python3 train.py
searcher: {name: single, metric: x, max_length: 1}
environment: {image: example.org/team/trainer:1}
max_restarts: 0
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("pulling-cluster"))
    yield from running(c, Cluster.start_master)


def shown(cluster: Cluster, exp_id: int) -> tuple[str, str]:
    trials = cluster.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]
    return cluster.state(exp_id), str(trials[0]["state"]).removeprefix("STATE_")


async def scripted_agent(cluster: Cluster, exp_id: int) -> list[tuple[str, str]]:
    """Connect as a docker agent, take the trial's start order, report a pull, then the
    start and the exit; returns what the master showed after each report."""
    channel = client.open_channel(cluster.address)
    seen: list[tuple[str, str]] = []

    async def observe() -> None:
        await asyncio.sleep(0.5)  # the master handles the report before it is read back
        seen.append(await asyncio.to_thread(shown, cluster, exp_id))

    try:
        token = cluster.agent_token_file.read_text().strip()
        async with open_stream(channel, client.metadata(token)) as stream:
            await stream.send_message(
                wire.hello(
                    agent_id="puller",
                    hostname="puller",
                    address="127.0.0.1",
                    slots=artificial(1),
                    resource_pool="default",
                    version="0.1.0",
                    runtime="docker",
                    running=[],
                    clock=time.time(),
                )
            )
            start = None
            async with asyncio.timeout(60):
                while start is None:
                    msg = await stream.recv_message()
                    assert msg is not None, "the master closed the agent stream"
                    start = msg.start
            assert start.spec is not None and start.spec.image == "example.org/team/trainer:1"
            cid, aid = start.container_id, start.allocation_id
            await observe()  # placed: STARTING
            await stream.send_message(wire.event_message(Pulling(cid, aid, "img", time.time())))
            await observe()
            await stream.send_message(wire.event_message(Started(cid, aid, 4242, time.time())))
            await observe()
            await stream.send_message(wire.event_message(Exited(cid, aid, 1, "", time.time())))
            final = await asyncio.to_thread(cluster.wait_state, exp_id, "ERROR", timeout=30)
            seen.append((final, final))
            await stream.cancel()
    finally:
        channel.close()
    return seen


def test_a_trial_is_pulling_while_its_agent_pulls_the_image(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = make_context(tmp_path, "pull", "print('never run: the agent is scripted')\n", CONFIG)
    exp_id = cluster.create(cfg, tmp_path / "pull")
    seen = asyncio.run(scripted_agent(cluster, exp_id))
    assert seen == [
        ("STARTING", "STARTING"),
        ("PULLING", "PULLING"),
        ("RUNNING", "RUNNING"),
        ("ERROR", "ERROR"),
    ]
