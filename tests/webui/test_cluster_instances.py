"""The cluster page shows an elastic pool's instances beside the agents: a real master
whose pool's command provider launches instances that the test cloud boots as hosts, where
real agents start (tests/elastic)."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cloud import CommandCloud, default_env
from tests.cluster import Cluster, wait_until
from tests.elastic.conftest import (
    context as train_context,
)
from tests.elastic.conftest import (
    elastic_cluster,
    experiment,
    instances,
    master_config,
    up,
)
from tests.multihost.conftest import network  # noqa: F401  (the hosts' network)
from tests.netns import Network
from tests.webui.conftest import watched
from tests.webui.helpers import screenshot, sign_in

pytestmark = [pytest.mark.webui, pytest.mark.timeout(300)]


@pytest.fixture
def elastic(tmp_path: pathlib.Path, network: Network) -> Iterator[Cluster]:  # noqa: F811
    (tmp_path / "cluster").mkdir()
    env = default_env({"PYDET_AGENT_ROOT": str(tmp_path / "agents")})
    with CommandCloud(tmp_path / "books", network, tmp_path / "hosts", env=env) as cloud:
        provider = {
            "type": "command",
            "launch": [str(cloud.command("launch"))],
            "terminate": [str(cloud.command("terminate"))],
            "list": [str(cloud.command("list"))],
            "max_instances": 1,
            "max_idle_agent_period": "10m",
        }
        c = elastic_cluster(tmp_path, network, master_config("burst", provider))
        c.master_env = cloud.env()
        with up(c):
            yield c


def test_the_cluster_page_shows_an_elastic_pools_instances(
    context: Any, elastic: Cluster, tmp_path: pathlib.Path, request: pytest.FixtureRequest
) -> None:
    c = elastic
    exp = c.create(experiment(tmp_path, pool="burst"), train_context(tmp_path))
    assert c.wait_state(exp, "COMPLETED", timeout=120) == "COMPLETED"
    (instance,) = wait_until(lambda: instances(c, "burst") or None, 30, "the instance")
    sign_in(context, c, c.login())
    with contextlib.contextmanager(watched)(context.new_page(), request) as page:
        page.goto(f"http://{c.address}/cluster")
        section = page.locator("section", has=page.locator("h2", has_text="Instances"))
        section.locator("td", has_text=instance["id"]).wait_for()
        row = section.locator("tr", has_text=instance["id"])
        assert instance["agentId"] in row.inner_text()
        row.locator(".badge", has_text="idle").wait_for()
        text = section.inner_text()
        assert "Pool burst: command provider, 0 to 1 instances." in text
        assert "launching 1 instance: 1 slot queued in pool burst" in text
        screenshot(page, "cluster-instances")
