"""Owners in the WebUI: the experiments list, an experiment's page and the job queue show
who submitted each experiment, and a user who neither owns it nor may update others' is told so
when trying to steer it, while their own experiments obey them."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import ACTIVE_STATES, Cluster, wait_until
from tests.webui.helpers import CTX, api, config, screenshot, sign_in

pytestmark = pytest.mark.webui

BOB_PASSWORD = "bob-has-a-long-password"

# The text of a row's cell under the column titled `title` (textContent: the header is
# upper-cased by CSS only).
CELL = """(row, title) => {
    const table = row.closest("table");
    const i = [...table.querySelectorAll("thead th")].findIndex((th) => th.textContent === title);
    return row.cells[i].textContent;
}"""


def create_as_bob(cluster: Cluster, tmp: pathlib.Path, name: str) -> int:
    env = {**cluster.env, "DET_USER": "bob", "DET_PASS": BOB_PASSWORD}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pydet.cli",
            "experiment",
            "create",
            str(config(tmp, name)),
            str(CTX),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(proc.stdout.strip().splitlines()[-1].split()[-1])


@pytest.fixture(scope="module")
def experiments(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, int]]:
    """(the admin's experiment, bob's), both running."""
    tmp = tmp_path_factory.mktemp("owners")
    cluster.det("user", "create", "bob", "--password", BOB_PASSWORD)
    admins = cluster.create(config(tmp, "admins-experiment"), CTX)
    bobs = create_as_bob(cluster, tmp, "bobs-experiment")
    for exp_id in (admins, bobs):
        cluster.wait_state(exp_id, "RUNNING")
    yield admins, bobs
    for exp_id in (admins, bobs):
        cluster.det("experiment", "kill", str(exp_id))


@pytest.fixture
def bob_page(context: Any, cluster: Cluster, anonymous_page: Any) -> Any:
    sign_in(context, cluster, cluster.login("bob", BOB_PASSWORD))
    return anonymous_page


def test_lists_and_pages_show_each_experiments_owner(
    cluster: Cluster, experiments: tuple[int, int], bob_page: Any
) -> None:
    page = bob_page
    admins, bobs = experiments
    page.goto(f"http://{cluster.address}/experiments")
    page.locator("header .user-name", has_text="bob").wait_for()
    for exp_id, owner in ((admins, "admin"), (bobs, "bob")):
        row = page.locator(f"tr[data-key='{exp_id}']")
        row.wait_for()
        assert row.evaluate(CELL, "User") == owner
    screenshot(page, "owners-experiments")

    page.goto(f"http://{cluster.address}/experiments/{admins}")
    user = page.locator("dl.summary div", has=page.locator("dt", has_text="User")).locator("dd")
    user.wait_for()
    assert user.text_content() == "admin"

    jobs = {e: api(cluster, f"/api/v1/experiments/{e}")["experiment"]["jobId"] for e in experiments}
    page.goto(f"http://{cluster.address}/jobs")
    for exp_id, owner in ((admins, "admin"), (bobs, "bob")):
        row = page.locator(f"tr[data-key='{jobs[exp_id]}']")
        row.wait_for()
        assert row.evaluate(CELL, "User") == owner
    screenshot(page, "owners-jobs")


def test_only_the_owner_or_an_admin_may_steer_an_experiment(
    cluster: Cluster, experiments: tuple[int, int], bob_page: Any
) -> None:
    page = bob_page
    admins, bobs = experiments
    page.goto(f"http://{cluster.address}/experiments")
    page.locator(f"tr[data-key='{admins}'] button.action-pause").click()
    error = page.locator(".notice.error")
    error.wait_for()
    assert (
        f"only the owner of experiment {admins} (admin) or a user with"
        " PERMISSION_TYPE_UPDATE_EXPERIMENT may pause it"
    ) in error.inner_text()
    screenshot(page, "owners-refused")
    assert cluster.state(admins) in ACTIVE_STATES

    page.locator(f"tr[data-key='{bobs}'] button.action-pause").click()
    wait_until(lambda: cluster.state(bobs) == "PAUSED", 30, "bob's experiment to pause", 0.5)
    page.locator(f"tr[data-key='{bobs}'] .badge[data-state='PAUSED']").wait_for()
