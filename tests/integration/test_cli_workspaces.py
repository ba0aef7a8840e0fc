"""`det workspace|w` and `det project|p`, and experiments placed in and moved between
projects, against a real master: every command once, and the one-line error each kind of bad
input gets."""

from __future__ import annotations

import json
import pathlib
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster, cluster_fixture


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("cluster"))


def config(tmp: pathlib.Path, name: str, **extra: str) -> pathlib.Path:
    path = tmp / f"{name}.yaml"
    lines = [
        f"name: {name}",
        "entrypoint: python3 -c pass",
        "searcher: {name: single, metric: x, max_length: 1}",
        *(f"{k}: {v}" for k, v in extra.items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def created(out: str) -> int:
    return int(out.split("Created experiment ")[1].split()[0])


def error(cluster: Cluster, *args: str) -> str:
    proc = cluster.det(*args, check=False)
    assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    return lines[0]


def experiments_in(cluster: Cluster, project_id: int) -> list[int]:
    out = cluster.det("experiment", "list", "--all", "--project_id", str(project_id), "--json")
    return [int(e["id"]) for e in json.loads(out.stdout)]


def test_workspaces_and_projects_from_creation_to_deletion(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    # The default workspace and project hold what names none.
    listed = cluster.det("workspace", "list").stdout
    assert "Uncategorized" in listed
    team = json.loads(cluster.det("w", "create", "team", "--json").stdout)
    assert team["name"] == "team" and team["username"] == "admin"
    assert "a workspace named 'team' exists" in error(cluster, "w", "create", "team")
    assert "workspace 'nope' not found" in error(cluster, "workspace", "describe", "nope")
    assert "team" in cluster.det("w").stdout  # `det w` alone lists, as in Determined

    vision = json.loads(
        cluster.det(
            "p", "create", "team", "vision", "--description", "cats", "--key", "VIS", "--json"
        ).stdout
    )
    assert (vision["key"], vision["workspace_name"]) == ("VIS", "team")
    assert "has a project named 'vision'" in error(cluster, "project", "create", "team", "vision")
    assert "project 'nlp' not found in workspace 'team'" in error(
        cluster, "p", "describe", "team", "nlp"
    )
    table = cluster.det("project", "list", "team").stdout
    assert "vision" in table and "cats" in table
    as_json = json.loads(cluster.det("w", "list-projects", "team", "--json").stdout)
    assert [p["name"] for p in as_json] == ["vision"]

    # Experiments go where their config says, or where --project_id says.
    exp = created(
        cluster.det(
            "experiment",
            "create",
            str(config(tmp_path, "placed", workspace="team", project="vision")),
            "--paused",
        ).stdout
    )
    by_id = created(
        cluster.det(
            "e",
            "create",
            str(config(tmp_path, "by-id")),
            "--paused",
            "--project_id",
            str(vision["id"]),
        ).stdout
    )
    elsewhere = created(
        cluster.det("e", "create", str(config(tmp_path, "plain")), "--paused").stdout
    )
    assert experiments_in(cluster, vision["id"]) == [exp, by_id]
    assert elsewhere in experiments_in(cluster, 1)
    shown = json.loads(cluster.det("e", "describe", str(exp), "--json").stdout)[0]["experiment"]
    assert (shown["project_name"], shown["workspace_name"]) == ("vision", "team")
    assert (shown["project_id"], shown["workspace_id"]) == (vision["id"], team["id"])
    assert "project 'nlp' not found in workspace 'team'" in error(
        cluster,
        "e",
        "create",
        str(config(tmp_path, "lost", workspace="team", project="nlp")),
        "--paused",
    )
    assert "project 404 not found" in error(
        cluster, "e", "create", str(config(tmp_path, "x")), "--project_id", "404"
    )
    assert "project 404 not found" in error(cluster, "e", "list", "--project_id", "404")
    description = cluster.det("p", "describe", "team", "vision").stdout
    assert "Associated Experiments" in description and "placed" in description

    # An archived project takes no new experiment, and says so.
    archived = cluster.det("p", "archive", "team", "vision").stdout
    assert "Successfully archived project vision." in archived
    refused = error(
        cluster, "e", "create", str(config(tmp_path, "late")), "--project_id", str(vision["id"])
    )
    assert "project 'vision'" in refused and "is archived and cannot add new experiments" in refused
    cluster.det("p", "unarchive", "team", "vision")

    # A workspace that holds experiments is not deleted; the count is in the refusal.
    assert "workspace 'team' holds 2 experiments" in error(cluster, "w", "delete", "team", "--yes")
    assert "needs confirmation; pass --yes" in error(cluster, "w", "delete", "team")
    cluster.det("experiment", "move", str(exp), "Uncategorized", "Uncategorized")
    cluster.det("e", "move", str(by_id), "Uncategorized", "Uncategorized")
    assert experiments_in(cluster, vision["id"]) == []
    assert "workspace 'lab' not found" in error(cluster, "e", "move", str(exp), "lab", "vision")

    # Edits, moves between workspaces, archiving.
    edited = json.loads(
        cluster.det(
            "p", "edit", "team", "vision", "--new_name", "vision2", "--key", "VIS2", "--json"
        ).stdout
    )
    assert (edited["name"], edited["key"]) == ("vision2", "VIS2")
    cluster.det("w", "create", "lab")
    cluster.det("p", "move", "team", "vision2", "lab")
    assert "vision2" in cluster.det("p", "list", "lab").stdout
    renamed = json.loads(cluster.det("w", "edit", "lab", "--name", "lab2", "--json").stdout)
    assert renamed["name"] == "lab2"
    assert "Successfully archived workspace team." in cluster.det("w", "archive", "team").stdout
    assert "is archived and cannot add new projects" in error(
        cluster, "p", "create", "team", "speech"
    )
    cluster.det("w", "unarchive", "team")
    assert "default workspace and cannot be deleted" in error(
        cluster, "w", "delete", "Uncategorized", "--yes"
    )
    cluster.det("p", "delete", "lab2", "vision2", "--yes")
    cluster.det("w", "delete", "lab2", "--yes")
    cluster.det("w", "delete", "team", "--yes")
    assert "lab2" not in cluster.det("w", "list").stdout


def test_a_workspace_keeps_its_own_checkpoint_storage_and_pool(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    storage = tmp_path / "team-checkpoints"
    created_ws = json.loads(
        cluster.det(
            "w",
            "create",
            "storage-team",
            "--checkpoint-storage-config",
            json.dumps({"type": "shared_fs", "host_path": str(storage)}),
            "--default-compute-pool",
            "default",
            "--json",
        ).stdout
    )
    assert created_ws["checkpoint_storage_config"]["host_path"] == str(storage)
    assert created_ws["default_compute_pool"] == "default"
    cluster.det("p", "create", "storage-team", "runs")
    exp = created(
        cluster.det(
            "e",
            "create",
            str(config(tmp_path, "stored", workspace="storage-team", project="runs")),
            "--paused",
        ).stdout
    )
    described = json.loads(cluster.det("e", "describe", str(exp), "--json").stdout)[0]
    filled = described["experiment"]["config"]
    assert filled["checkpoint_storage"]["host_path"] == str(storage)
    assert filled["resources"]["resource_pool"] == "default"
    assert "no resource pool named 'tpu'" in error(
        cluster, "w", "edit", "storage-team", "--default-compute-pool", "tpu"
    )
    assert "checkpoint_storage_config.type" in error(
        cluster,
        "w",
        "edit",
        "storage-team",
        "--checkpoint-storage-config",
        json.dumps({"type": "floppy"}),
    )
    cleared = json.loads(
        cluster.det(
            "w", "edit", "storage-team", "--checkpoint-storage-config", "{}", "--json"
        ).stdout
    )
    assert cleared["checkpoint_storage_config"] is None


def test_det_w_is_workspace_and_webhooks_keep_det_webhook(cluster: Cluster) -> None:
    assert "Uncategorized" in cluster.det("w", "list").stdout
    assert cluster.det("webhook", "list").returncode == 0


def call(cluster: Cluster, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    try:
        with cluster.urlopen(cluster.request(path, method=method, body=body), timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_the_rest_api_serves_determineds_routes(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    status, made = call(
        cluster,
        "/api/v1/workspaces",
        "POST",
        {"name": "rest-team", "checkpointStorageConfig": {"type": "shared_fs", "host_path": "/x"}},
    )
    assert status == 200, made
    ws = made["workspace"]
    status, proj = call(
        cluster, f"/api/v1/workspaces/{ws['id']}/projects", "POST", {"name": "rest-proj"}
    )
    assert status == 200, proj
    project_id = proj["project"]["id"]
    status, listed = call(cluster, "/api/v1/workspaces?name=REST&sort_by=SORT_BY_NAME")
    assert [w["name"] for w in listed["workspaces"]] == ["rest-team"]
    assert listed["pagination"]["total"] == 1
    status, got = call(cluster, f"/api/v1/projects/{project_id}")
    assert got["project"]["workspaceName"] == "rest-team"
    status, by_key = call(cluster, f"/api/v1/projects/key/{got['project']['key'].lower()}")
    assert by_key["project"]["id"] == project_id
    status, notes = call(
        cluster, f"/api/v1/projects/{project_id}/notes", "POST", {"name": "Plan", "contents": "#"}
    )
    assert status == 200 and notes["notes"] == [{"name": "Plan", "contents": "#"}]
    status, patched = call(
        cluster, f"/api/v1/projects/{project_id}", "PATCH", {"description": "via REST"}
    )
    assert patched["project"]["description"] == "via REST"

    exp = created(cluster.det("e", "create", str(config(tmp_path, "rest-exp")), "--paused").stdout)
    status, moved = call(
        cluster,
        f"/api/v1/experiments/{exp}/move",
        "POST",
        {"destinationProjectId": project_id},
    )
    assert status == 200, moved
    status, page = call(cluster, f"/api/v1/experiments?project_id={project_id}")
    assert [e["id"] for e in page["experiments"]] == [exp]
    status, many = call(
        cluster,
        f"/api/v1/projects/{project_id}/experiments/move",
        "POST",
        {"experimentIds": [exp, 987654], "destinationProjectId": 1},
    )
    assert status == 200
    assert {r["id"]: r["error"] for r in many["results"]} == {
        exp: "",
        987654: "experiment 987654 not found",
    }

    # Bad input: one clear message, the right status.
    status, body = call(cluster, "/api/v1/workspaces/4040")
    assert (status, body["error"]["error"]) == (404, "workspace 4040 not found")
    status, body = call(cluster, "/api/v1/workspaces", "POST", {"name": "rest-team"})
    assert status == 409 and "a workspace named 'rest-team' exists" in body["error"]["error"]
    status, body = call(cluster, "/api/v1/workspaces", "POST", {"name": "x", "bogus": 1})
    assert status == 400 and "bogus" in body["error"]["error"]
    status, body = call(cluster, f"/api/v1/workspaces/{ws['id']}", "DELETE")
    assert status == 200
