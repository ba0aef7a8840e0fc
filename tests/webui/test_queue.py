"""The job queue page: a reorder from the UI changes what `det job list` shows."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster, wait_until
from tests.webui.helpers import (
    api,
    create,
    job_order,
    missing_browser_setup,
    screenshot,
    start_cluster,
)

pytestmark = pytest.mark.webui


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    """A cluster of one slot of this test's own (``page`` logs in to it)."""
    if missing_browser_setup():
        pytest.skip(str(missing_browser_setup()))
    (tmp_path / "cluster").mkdir()
    c = start_cluster(tmp_path / "cluster", slots=1)
    try:
        yield c
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


def listed_order(cluster: Cluster, job_ids: list[str]) -> list[str]:
    """The given jobs in the order `det job list` prints them."""
    proc = cluster.det("job", "list", check=False)
    if proc.returncode != 0 and "invalid choice" in proc.stderr:
        pytest.skip("the CLI has no `det job list` yet")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    lines = out.splitlines()
    position = {j: next(i for i, line in enumerate(lines) if j in line) for j in job_ids}
    return sorted(job_ids, key=position.__getitem__)


def test_moving_a_job_ahead_in_the_ui_changes_det_job_list(
    cluster: Cluster, tmp_path: pathlib.Path, page: Any
) -> None:
    exps = [create(cluster, tmp_path, f"queue-{name}") for name in ("a", "b", "c")]
    jobs = {e: api(cluster, f"/api/v1/experiments/{e}")["experiment"]["jobId"] for e in exps}
    a, b, c = (jobs[e] for e in exps)
    wait_until(lambda: job_order(cluster) == [a, b, c], 60, "three jobs in the queue", 0.5)
    assert listed_order(cluster, [b, c]) == [b, c]

    page.goto(f"http://{cluster.address}/jobs")
    row = page.locator(f"tr[data-key='{c}']")
    row.wait_for()
    row.locator("button.manage").click()
    dialog = page.locator("dialog.manage-dialog")
    dialog.locator("select.place").select_option(f"ahead:{b}")
    screenshot(page, "job-manage")
    dialog.locator("button.save").click()
    dialog.wait_for(state="hidden")

    wait_until(
        lambda: listed_order(cluster, [b, c]) == [c, b], 30, "det job list to show c before b", 0.5
    )
    # The page shows the new order too.
    page.wait_for_function(
        "([b, c]) => { const keys = [...document.querySelectorAll('tbody tr')]"
        ".map(r => r.dataset.key);"
        " return keys.indexOf(c) >= 0 && keys.indexOf(c) < keys.indexOf(b); }",
        arg=[b, c],
    )
    screenshot(page, "jobs")
    for e in exps:
        cluster.det("experiment", "kill", str(e))
