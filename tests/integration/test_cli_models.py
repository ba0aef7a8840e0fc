"""`det model|m` against a real master and agent: a model registered from the checkpoints
of a run that completed, every command once, and what the registry does to the checkpoints
it holds (their deletion, and their experiment's, are refused naming the model)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture
from tests.integration.test_cli_checkpoints import checkpoints
from tests.integration.test_cli_checkpoints import experiment as experiment  # the fixture
from tests.integration.test_cli_workspaces import call, error


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("cluster"))


@pytest.fixture(scope="module")
def run(cluster: Cluster, experiment: int) -> tuple[int, list[str]]:
    """A completed experiment (test_cli_checkpoints's) and its checkpoints' uuids by step:
    the best (step 1) and the latest, both kept."""
    by_step = sorted(checkpoints(cluster, experiment), key=lambda c: str(c["steps_completed"]))
    return experiment, [str(c["uuid"]) for c in by_step]


def test_a_model_from_creation_to_deletion(cluster: Cluster, run: tuple[int, list[str]]) -> None:
    exp_id, (first, second) = run
    made = json.loads(
        cluster.det("model", "create", "resnet", "--description", "a net", "--json").stdout
    )
    assert (made["name"], made["workspace_id"], made["num_versions"]) == ("resnet", 1, 0)
    assert "a model named 'resnet' exists" in error(cluster, "m", "create", "resnet")
    assert "cannot be only numbers" in error(cluster, "m", "create", "123")
    assert "model 'vgg' not found" in error(cluster, "m", "describe", "vgg")

    table = cluster.det("m", "register-version", "resnet", first).stdout
    assert first in table and "Version #" in table
    registered = json.loads(cluster.det("m", "register-version", "resnet", second, "--json").stdout)
    assert registered["model_version"]["version"] == 2
    assert registered["model_version"]["checkpoint"]["uuid"] == second
    assert "checkpoint nope not found" in error(cluster, "m", "register-version", "resnet", "nope")

    listed = json.loads(cluster.det("m", "list", "--json").stdout)
    assert [(m["name"], m["num_versions"]) for m in listed] == [("resnet", 2)]
    assert "resnet" in cluster.det("m").stdout  # `det m` alone lists, as in Determined
    assert "resnet" in cluster.det("m", "list", "-w", "Uncategorized").stdout
    versions = json.loads(cluster.det("m", "list-versions", "resnet", "--json").stdout)
    assert [v["version"] for v in versions["model_versions"]] == [1, 2]
    assert versions["model"]["name"] == "resnet"
    described = cluster.det("m", "describe", "resnet", "--version", "1").stdout
    assert "a net" in described and first in described
    one = json.loads(cluster.det("m", "describe-version", "resnet", "2", "--json").stdout)
    assert one["checkpoint"]["uuid"] == second and one["model"]["name"] == "resnet"
    assert "version 9 of model 'resnet' not found" in error(
        cluster, "m", "describe-version", "resnet", "9"
    )

    # The REST API names a model by its name or its id, as Determined's does.
    status, by_id = call(cluster, f"/api/v1/models/{made['id']}/versions?order_by=ORDER_BY_DESC")
    assert status == 200 and [v["version"] for v in by_id["modelVersions"]] == [2, 1]
    status, patched = call(
        cluster,
        "/api/v1/models/resnet",
        "PATCH",
        {"metadata": {"framework": "torch", "layers": 50}, "labels": ["cv", "prod"]},
    )
    assert status == 200, patched
    assert patched["model"]["metadata"] == {"framework": "torch", "layers": 50}
    status, labels = call(cluster, "/api/v1/model/labels")
    assert labels["labels"] == ["cv", "prod"]
    status, found = call(cluster, "/api/v1/models?labels=prod&name=res")
    assert [m["name"] for m in found["models"]] == ["resnet"]
    status, body = call(cluster, "/api/v1/models/vgg")
    assert (status, body["error"]["error"]) == (404, "model 'vgg' not found")

    # What the registry holds is not deleted, and the refusal names the model.
    refused = error(cluster, "checkpoint", "delete", first, "--yes")
    assert f"{first}, registered to resnet (model #{made['id']}), version 1" in refused
    refused = error(cluster, "experiment", "delete", str(exp_id), "--yes")
    assert "has checkpoints in the model registry" in refused and "resnet" in refused

    cluster.det("workspace", "create", "zoo")
    assert (
        "Moved model resnet to workspace zoo."
        in cluster.det("m", "move", "resnet", "-w", "zoo").stdout
    )
    assert json.loads(cluster.det("m", "describe", "resnet", "--json").stdout)["workspace_id"] > 1
    assert "holds 1 model" in error(cluster, "workspace", "delete", "zoo", "--yes")
    cluster.det("m", "delete", "resnet")
    assert json.loads(cluster.det("m", "list", "--json").stdout) == []
    # Unregistered, the checkpoint may go.
    cluster.det("checkpoint", "delete", first, "--yes")
