"""Workspaces, projects and the model registry in the WebUI against a real cluster: the
sidebar, a project's page (its experiments only, filtered by label, its notes), the model
registry, and the "Move to project" and "Register checkpoint" actions."""

from __future__ import annotations

import json
import pathlib
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from tests.cluster import Cluster, wait_until
from tests.webui.helpers import CTX, api

pytestmark = [pytest.mark.webui, pytest.mark.timeout(240)]


@dataclass
class Team:
    workspace_id: int
    project_id: int
    labelled: int
    plain: int
    elsewhere: int


def call(cluster: Cluster, path: str, method: str, body: Any) -> Any:
    with urllib.request.urlopen(cluster.request(path, method=method, body=body), timeout=10) as r:
        return json.load(r)


def quick(cluster: Cluster, tmp: pathlib.Path, name: str, labels: list[str]) -> int:
    """A finished experiment of 12 steps (a checkpoint at step 10) with ``labels``."""
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nentrypoint: python3 train.py\n"
        "hyperparameters: {lr: 0.1, steps: 12}\n"
        "searcher: {name: single, metric: validation_loss, max_length: 12}\n"
        f"max_restarts: 0\nlabels: {json.dumps(labels)}\n"
    )
    return cluster.create(path, CTX)


@pytest.fixture(scope="module")
def team(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Team:
    tmp = tmp_path_factory.mktemp("team")
    ws = call(cluster, "/api/v1/workspaces", "POST", {"name": "team-ws"})["workspace"]["id"]
    proj = call(cluster, f"/api/v1/workspaces/{ws}/projects", "POST", {"name": "vision"})
    pid = proj["project"]["id"]
    ids = [quick(cluster, tmp, f"q-{n}", labels) for n, labels in enumerate([["alpha"], [], []])]
    for exp_id in ids:
        assert cluster.wait_state(exp_id, "COMPLETED", timeout=120) == "COMPLETED"
    for exp_id in ids[:2]:
        call(cluster, f"/api/v1/experiments/{exp_id}/move", "POST", {"destinationProjectId": pid})
    return Team(ws, pid, ids[0], ids[1], ids[2])


def base(cluster: Cluster) -> str:
    return f"http://{cluster.address}"


def rows(page: Any) -> set[int]:
    """The experiment ids the list shows (read at once: the table is rebuilt as it refreshes)."""
    keys = page.eval_on_selector_all(
        "#page table.table tbody tr[data-key]", "trs => trs.map(tr => tr.dataset.key)"
    )
    return {int(k) for k in keys}


def test_the_sidebar_lists_workspaces_and_their_projects(
    cluster: Cluster, team: Team, page: Any
) -> None:
    page.goto(f"{base(cluster)}/experiments")
    default = page.locator(".sidebar-workspace[data-workspace='Uncategorized']")
    default.locator("li[data-project='Uncategorized']").wait_for()
    project = page.locator(".sidebar-workspace[data-workspace='team-ws'] li[data-project='vision']")
    project.wait_for()
    assert project.locator(".count").inner_text() == "2"
    project.locator("a").click()
    page.wait_for_url(f"**/projects/{team.project_id}")
    page.locator("h1", has_text="vision").wait_for()


def test_a_project_page_shows_its_experiments_and_filters_them_by_label(
    cluster: Cluster, team: Team, page: Any
) -> None:
    page.goto(f"{base(cluster)}/projects/{team.project_id}")
    page.locator(f"tr[data-key='{team.plain}']").wait_for()
    assert rows(page) == {team.labelled, team.plain}
    page.fill("input.filter-label", "alpha")
    wait_until(lambda: rows(page) == {team.labelled}, 10, "the label filter")
    assert "label=alpha" in page.url
    page.fill("input.filter-label", "no-such-label")
    page.locator("td.empty").wait_for()
    page.fill("input.filter-label", "")
    page.fill("input.filter-user", "admin")
    wait_until(lambda: rows(page) == {team.labelled, team.plain}, 10, "the user filter")


def test_a_projects_owner_edits_its_notes(cluster: Cluster, team: Team, page: Any) -> None:
    page.goto(f"{base(cluster)}/projects/{team.project_id}")
    page.click("button.notes-edit")
    page.fill("input.notes-name", "Readme")
    page.fill("textarea.notes-text", "## Plan\n\n- **train** the <b>model</b>\n")
    page.click("button.notes-save")
    note = page.locator(".note[data-note='Readme']")
    note.locator("strong", has_text="train").wait_for()
    # Markup in a note is text, never HTML.
    assert note.locator("b").count() == 0
    assert "<b>model</b>" in note.inner_text()
    saved = api(cluster, f"/api/v1/projects/{team.project_id}")["project"]["notes"]
    assert saved == [{"name": "Readme", "contents": "## Plan\n\n- **train** the <b>model</b>\n"}]


def test_the_model_registry_shows_a_registered_version(
    cluster: Cluster, team: Team, page: Any
) -> None:
    (ckpt,) = api(cluster, f"/api/v1/experiments/{team.plain}/checkpoints")["checkpoints"]
    call(cluster, "/api/v1/models", "POST", {"name": "resnet", "description": "a classifier"})
    body = {"checkpointUuid": ckpt["uuid"], "name": "first", "labels": ["prod"], "notes": "ok"}
    call(cluster, "/api/v1/models/resnet/versions", "POST", body)
    page.goto(f"{base(cluster)}/models")
    row = page.locator("tr[data-key='resnet']")
    row.wait_for()
    assert "a classifier" in row.inner_text()
    row.locator("a", has_text="resnet").click()
    version = page.locator("tr[data-key='1']")
    version.wait_for()
    text = version.inner_text()
    assert ckpt["uuid"] in text and "first" in text and "prod" in text
    assert "validation_loss" in text
    version.locator("a", has_text=ckpt["uuid"]).click()
    page.wait_for_url(f"**/trials/{ckpt['training']['trialId']}")


def test_move_to_project_moves_an_experiment(cluster: Cluster, team: Team, page: Any) -> None:
    page.goto(f"{base(cluster)}/experiments/{team.elsewhere}")
    page.click("button.action-move")
    page.locator("select.move-workspace option", has_text="team-ws").wait_for(state="attached")
    page.select_option("select.move-workspace", label="team-ws")
    page.locator("select.move-project option", has_text="vision").wait_for(state="attached")
    page.select_option("select.move-project", label="vision")
    page.click("button.move-confirm")
    page.locator("dialog.modal").wait_for(state="detached")
    moved = api(cluster, f"/api/v1/experiments/{team.elsewhere}")["experiment"]
    assert moved["projectId"] == team.project_id
    page.goto(f"{base(cluster)}/projects/{team.project_id}")
    page.locator(f"tr[data-key='{team.elsewhere}']").wait_for()


def test_register_checkpoint_makes_a_new_models_first_version(
    cluster: Cluster, team: Team, page: Any
) -> None:
    page.goto(f"{base(cluster)}/experiments/{team.labelled}")
    page.click("button.action-register")
    page.locator("select.register-model option", has_text="New model").wait_for(state="attached")
    page.select_option("select.register-model", label="New model…")
    page.fill("input.register-new-name", "from-ui")
    page.fill("input.register-labels", "a, b")
    page.click("button.register-confirm")
    page.locator(".notice.info", has_text="version 1 of model from-ui").wait_for()
    (version,) = api(cluster, "/api/v1/models/from-ui/versions")["modelVersions"]
    assert version["labels"] == ["a", "b"]
    assert version["checkpoint"]["training"]["experimentId"] == team.labelled
