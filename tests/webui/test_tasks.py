"""The WebUI's Tasks page: notebooks, shells, commands and TensorBoards listed with their
state, owner and slots; JupyterLab launched from its dialog, opened, its logs followed live,
and killed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster import Cluster
from tests.webui.helpers import screenshot

pytest.importorskip("jupyterlab")
pytestmark = pytest.mark.webui


def test_jupyterlab_is_launched_followed_and_killed_from_the_tasks_page(
    cluster: Cluster, page: Any
) -> None:
    cmd_id = cluster.det("cmd", "run", "-d", "sleep", "600").stdout.strip()
    page.set_default_timeout(120_000)
    page.goto(f"{cluster.url}/tasks")
    command = page.locator(f"tr[data-key='{cmd_id}']")
    command.wait_for()
    assert "Command" in command.inner_text() and "admin" in command.inner_text()

    page.locator("button.launch-jupyterlab").click()
    dialog = page.locator("dialog.launch-dialog")
    dialog.locator("input.name").fill("lab from the webui")
    dialog.locator("input.slots").fill("0")
    dialog.locator("button.launch").click()
    row = page.locator("tr", has_text="lab from the webui")
    row.locator(".badge[data-state='RUNNING']").wait_for()
    nb_id = str(row.get_attribute("data-key"))
    assert "Notebook" in row.inner_text()
    assert row.locator("a.open").get_attribute("href") == f"/proxy/{nb_id}/"

    row.locator("button.logs").click()
    page.locator(".task-logs .log-lines", has_text="JupyterLab is ready").wait_for()
    screenshot(page, "tasks")

    row.locator("button.kill").click()
    page.locator(f"tr[data-key='{nb_id}']").wait_for(state="detached")
    command.locator("button.kill").click()
    page.locator(f"tr[data-key='{cmd_id}']").wait_for(state="detached")
