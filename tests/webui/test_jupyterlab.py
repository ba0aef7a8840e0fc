"""JupyterLab through the master's proxy in headless Chromium, as a user opens it: with the
WebUI's session cookie, a new notebook from the launcher, a cell run in its kernel over the
proxy's WebSockets, and its output on the page."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.webui.helpers import screenshot, sign_in

pytest.importorskip("jupyterlab")
pytestmark = pytest.mark.webui


def test_a_cell_runs_in_jupyterlab_through_the_proxy(context: Any, cluster: Cluster) -> None:
    out = cluster.det("notebook", "start", "--no-browser", timeout=300).stdout
    found = re.search(r"Launched notebook \(id: ([0-9a-f-]{36})", out)
    assert found is not None, out
    nb_id = found.group(1)
    sign_in(context, cluster, cluster.login())
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{cluster.url}/proxy/{nb_id}/lab")
        page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
        # The kernel has started and its WebSocket answers.
        page.get_by_text("Python 3 (ipykernel) | Idle").wait_for()
        editor = page.locator(".jp-Notebook .jp-Cell .cm-content").first
        editor.click()
        page.keyboard.type("6 * 7")
        page.keyboard.press("Shift+Enter")
        output = page.locator(".jp-OutputArea-output").first
        output.wait_for()
        assert output.inner_text().strip() == "42"
        screenshot(page, "jupyterlab-cell")
    finally:
        page.close()
        cluster.det("notebook", "kill", nb_id)
