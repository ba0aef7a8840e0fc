"""The WebUI against a real cluster: what a user sees and does in the browser."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest

from tests.cluster import ACTIVE_STATES, Cluster, wait_until
from tests.webui.helpers import api, create, running_trial, screenshot

pytestmark = pytest.mark.webui

# The config editor is rendered, then enabled once the config it edits has loaded.
EDITOR_READY = "() => document.querySelector('textarea.config-editor')?.disabled === false"


@pytest.fixture(scope="module")
def running(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, int]:
    """One experiment training on the module's cluster: (experiment id, trial id)."""
    exp_id = create(cluster, tmp_path_factory.mktemp("cfg"), "webui-running")
    return exp_id, running_trial(cluster, exp_id, min_steps=3)


def base(cluster: Cluster) -> str:
    return f"http://{cluster.address}"


def test_experiments_page_lists_the_running_experiment(
    cluster: Cluster, running: tuple[int, int], page: Any
) -> None:
    exp_id, _ = running
    page.goto(f"{base(cluster)}/experiments")
    row = page.locator(f"tr[data-key='{exp_id}']")
    row.wait_for()
    assert "webui-running" in row.inner_text()
    assert row.locator(".badge").get_attribute("data-state") in ACTIVE_STATES
    assert row.locator("button.action-pause").is_visible()
    screenshot(page, "experiments")


def test_a_reload_on_a_client_route_shows_the_same_page(
    cluster: Cluster, running: tuple[int, int], page: Any
) -> None:
    exp_id, _ = running
    page.goto(f"{base(cluster)}/experiments/{exp_id}")
    page.locator("h1", has_text="webui-running").wait_for()
    page.reload()
    page.locator("h1", has_text="webui-running").wait_for()
    page.locator("pre.config", has_text="entrypoint: python3 train.py").first.wait_for()
    # The searcher-metric chart has the trial's validation points.
    page.wait_for_function(
        "() => Number(document.querySelector('section .chart')?.dataset.points || 0) > 0"
    )
    screenshot(page, "experiment")


def test_trial_page_draws_its_metric_chart(
    cluster: Cluster, running: tuple[int, int], page: Any
) -> None:
    _, trial_id = running
    page.goto(f"{base(cluster)}/trials/{trial_id}")
    chart = page.locator(".metric-panel[data-group='training'] .chart")
    chart.locator("canvas").wait_for()
    page.wait_for_function(
        "() => Number(document.querySelector(\".metric-panel[data-group='training'] .chart\")"
        "?.dataset.points || 0) >= 3"
    )
    # Something was drawn: the canvas is not blank.
    drawn = page.evaluate(
        """() => {
            const c = document.querySelector(".metric-panel[data-group='training'] canvas");
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
            return n;
        }"""
    )
    assert drawn > 100
    # Live: more points arrive without a reload.
    first = int(chart.get_attribute("data-points"))
    page.wait_for_function(
        "(n) => Number(document.querySelector(\".metric-panel[data-group='training'] .chart\")"
        ".dataset.points) > n",
        arg=first,
        timeout=30_000,
    )
    screenshot(page, "trial")


def test_trial_page_follows_its_logs(cluster: Cluster, running: tuple[int, int], page: Any) -> None:
    _, trial_id = running
    page.goto(f"{base(cluster)}/trials/{trial_id}")
    lines = page.locator(".log-line")
    lines.first.wait_for()
    last = int(lines.last.get_attribute("data-id"))
    page.wait_for_function(
        "(n) => [...document.querySelectorAll('.log-line')].some(l => Number(l.dataset.id) > n)",
        arg=last,
        timeout=30_000,
    )
    assert "[rank=0]" in lines.last.inner_text()
    # Filters run on the master: warnings only, then a text search.
    for level in ("debug", "info", "error", "critical"):
        page.locator(".logs .levels label", has_text=level).locator("input").uncheck()
    page.wait_for_function(
        "() => { const l = [...document.querySelectorAll('.log-line .lvl')];"
        " return l.length > 0 && l.every(x => x.textContent === 'WARNING'); }"
    )
    page.locator(".filter-search").fill("no line says this")
    page.locator(".notice", has_text="No log lines match").wait_for()
    screenshot(page, "trial-logs-filtered")


def test_pause_from_the_ui_pauses_the_experiment(
    cluster: Cluster, tmp_path: pathlib.Path, page: Any
) -> None:
    exp_id = create(cluster, tmp_path, "webui-pause")
    running_trial(cluster, exp_id)
    page.goto(f"{base(cluster)}/experiments/{exp_id}")
    page.locator(".page-head button.action-pause").click()
    wait_until(lambda: cluster.state(exp_id) == "PAUSED", 30, "the experiment to pause", 0.5)
    # The page follows the change live.
    page.locator(".page-head .badge[data-state='PAUSED']").wait_for()
    page.locator(".page-head button.action-activate").wait_for()
    screenshot(page, "paused")
    page.locator(".page-head button.action-activate").click()
    wait_until(lambda: cluster.state(exp_id) in ACTIVE_STATES, 30, "the experiment to resume", 0.5)
    cluster.det("experiment", "kill", str(exp_id))


def test_actions_that_fail_show_the_masters_message(cluster: Cluster, page: Any) -> None:
    page.goto(f"{base(cluster)}/experiments/999999")
    error = page.locator(".notice.error")
    error.wait_for()
    assert "experiment 999999 not found" in error.inner_text()


def test_cluster_page_shows_agents_and_slots(cluster: Cluster, page: Any) -> None:
    page.goto(f"{base(cluster)}/cluster")
    page.locator("td", has_text="agent-0").wait_for()
    slots = sum(len(a["slots"]) for a in api(cluster, "/api/v1/agents")["agents"])
    total = page.locator(".stat", has=page.locator(".label", has_text=re.compile("^slots$")))
    assert total.locator(".n").inner_text() == str(slots)
    page.locator("td", has_text="default").first.wait_for()  # the resource pool
    screenshot(page, "cluster")


def test_fork_creates_an_experiment_from_an_edited_config(
    cluster: Cluster, running: tuple[int, int], page: Any
) -> None:
    exp_id, _ = running
    page.goto(f"{base(cluster)}/experiments/{exp_id}/fork")
    editor = page.locator("textarea.config-editor")
    page.wait_for_function(EDITOR_READY)
    assert "name: Fork of webui-running" in editor.input_value()
    editor.fill(editor.input_value().replace("steps: 3000", "steps: 20"))
    page.locator(".create-form label.check input").uncheck()  # create it paused
    screenshot(page, "fork")
    page.locator(".create-form button[type=submit]").click()
    page.wait_for_url(lambda url: "/experiments/" in url and not url.endswith("/fork"))
    new_id = int(page.url.rstrip("/").rsplit("/", 1)[-1])
    assert new_id != exp_id
    detail = api(cluster, f"/api/v1/experiments/{new_id}")
    assert detail["experiment"]["forkedFrom"] == exp_id
    assert detail["experiment"]["state"] == "STATE_PAUSED"
    assert "steps: 20" in detail["experiment"]["originalConfig"]
    cluster.det("experiment", "kill", str(new_id))


def test_continue_trial_creates_an_experiment_from_its_checkpoint(
    cluster: Cluster, running: tuple[int, int], page: Any
) -> None:
    _, trial_id = running
    wait_until(
        lambda: api(cluster, f"/api/v1/trials/{trial_id}")["trial"]["latestCheckpointUuid"],
        60,
        f"trial {trial_id} to checkpoint",
        0.5,
    )
    page.goto(f"{base(cluster)}/trials/{trial_id}")
    page.locator("a", has_text="Continue trial").click()
    page.wait_for_url(f"**/trials/{trial_id}/continue")
    page.wait_for_function(EDITOR_READY)
    text = page.locator("textarea.config-editor").input_value()
    assert f"source_trial_id: {trial_id}" in text
    assert "name: single" in text
    page.locator(".create-form label.check input").uncheck()
    page.locator(".create-form button[type=submit]").click()
    page.wait_for_url(lambda url: "/experiments/" in url)
    new_id = int(page.url.rstrip("/").rsplit("/", 1)[-1])
    config = api(cluster, f"/api/v1/experiments/{new_id}")["config"]
    assert config["searcher"]["source_trial_id"] == trial_id
    assert config["searcher"]["name"] == "single"
    cluster.det("experiment", "kill", str(new_id))


def test_experiments_filter_by_name_and_sort(
    cluster: Cluster, running: tuple[int, int], page: Any
) -> None:
    page.goto(f"{base(cluster)}/experiments")
    page.locator("tbody tr[data-key]").first.wait_for()
    page.locator(".filter-name").fill("webui-running")
    page.wait_for_function(
        "() => [...document.querySelectorAll('tbody tr[data-key]')]"
        ".every(r => r.textContent.includes('webui-running'))"
    )
    page.locator(".filter-name").fill("")
    page.locator("th", has_text="ID").click()  # ascending
    page.wait_for_function(
        "() => { const ids = [...document.querySelectorAll('tbody tr[data-key]')]"
        ".map(r => Number(r.dataset.key));"
        " return ids.length > 1 && ids.every((v, i) => i === 0 || ids[i - 1] < v); }"
    )
    assert "asc=true" in page.url
