"""The experiment page's TensorBoard button, in Chromium against a real cluster: it starts
a TensorBoard task and opens TensorBoard's own page through the master's proxy, where the
browser's session cookie lets the user in."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest

from tests.cluster import Cluster, wait_until
from tests.webui.helpers import api, create

pytestmark = [pytest.mark.webui, pytest.mark.slow]


def test_the_tensorboard_button_opens_tensorboard_through_the_master(
    cluster: Cluster, page: Any, tmp_path: pathlib.Path
) -> None:
    pytest.importorskip("tensorboard")
    exp_id = create(cluster, tmp_path, "webui-tensorboard")
    wait_until(
        lambda: api(cluster, f"/api/v1/experiments/{exp_id}/trials")["trials"], 60, "a trial"
    )
    page.goto(f"http://{cluster.address}/experiments/{exp_id}")
    button = page.locator('.page-head button[data-action="tensorboard"]')
    with page.context.expect_page(timeout=20_000) as opened:
        button.click()
    board = opened.value
    # TensorBoard's own script may add a fragment (#timeseries) once its page has loaded.
    board.wait_for_url(re.compile(r"/proxy/[0-9a-f-]+/(#.*)?$"), timeout=120_000)
    board.wait_for_load_state()
    assert board.title() == "TensorBoard"
    (tb,) = api(cluster, "/api/v1/tensorboards")["tensorboards"]
    assert tb["experimentIds"] == [exp_id] and tb["state"] == "STATE_RUNNING"
    assert board.url.split("#", 1)[0].endswith(tb["serviceAddress"])
    # A second click opens the same TensorBoard rather than starting another.
    with page.context.expect_page(timeout=20_000) as again:
        button.click()
    again.value.wait_for_url(
        re.compile(re.escape(tb["serviceAddress"]) + "(#.*)?$"), timeout=60_000
    )
    assert len(api(cluster, "/api/v1/tensorboards")["tensorboards"]) == 1
    cluster.det("tensorboard", "kill", tb["id"])
