"""`det resource-pool bindings` and `det workspace list-pools` against a real master with
two pools: a pool bound to a workspace runs only that workspace's experiments and commands,
admins alone bind, and each bad request gets one line naming what is wrong."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, running, wait_until
from tests.cluster import one_line_error as error

POOLS = "resource_pools:\n  - pool_name: default\n  - pool_name: gpu\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster")
    yield from running(Cluster(root, master_config=POOLS), lambda c: c.start_master())


def queued_job(cluster: Cluster, exp_id: int) -> str | None:
    for j in json.loads(cluster.det("job", "list", "--json").stdout):
        if int(j["entity_id"]) == exp_id:
            return str(j["job_id"])
    return None


def config(tmp: pathlib.Path, *extra: str) -> pathlib.Path:
    path = tmp / "exp.yaml"
    lines = ["entrypoint: python3 -c pass", "searcher: {name: single, metric: x, max_length: 1}"]
    path.write_text("\n".join([*lines, *extra]) + "\n")
    return path


def test_a_bound_pool_runs_only_its_workspaces_work(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster.det("workspace", "create", "team-a")
    cluster.det("workspace", "create", "team-b")
    cluster.det("project", "create", "team-a", "vision")
    cluster.det("project", "create", "team-b", "speech")
    # Unbound, the pool is everybody's.
    assert "default, gpu" in cluster.det("workspace", "list-pools", "team-b").stdout
    out = cluster.det("rp", "bindings", "list-workspaces", "gpu").stdout
    assert "shared by every workspace" in out

    out = cluster.det("resource-pool", "bindings", "add", "gpu", "team-a").stdout
    assert 'resource pool "gpu"' in out and "team-a" in out
    assert "team-a" in cluster.det("rp", "bindings", "list-workspaces", "gpu").stdout
    assert "default, gpu" in cluster.det("workspace", "list-pools", "team-a").stdout
    listed = cluster.det("workspace", "list-pools", "team-b").stdout
    assert "default" in listed and "gpu" not in listed
    bound = cluster.get("/api/v1/resource-pools/gpu/workspace-bindings")
    # (the gateway's JSON names are moving to Determined's camelCase)
    assert len(bound.get("workspaceIds", bound.get("workspace_ids", []))) == 1

    # team-a's experiment runs there; team-b's and the default workspace's are refused.
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    gpu = "resources: {resource_pool: gpu}"
    exp = config(tmp_path, gpu, "workspace: team-a", "project: vision")
    cluster.create(exp, ctx, "--paused")
    line = error(cluster, "e", "create", str(config(tmp_path, gpu)), str(ctx))
    assert "resource pool 'gpu' is bound to other workspaces" in line
    assert "workspace 'Uncategorized'" in line
    exp = config(tmp_path, gpu, "workspace: team-b", "project: speech")
    assert "workspace 'team-b'" in error(cluster, "e", "create", str(exp), str(ctx))
    line = error(cluster, "cmd", "run", "--config", "resources.resource_pool=gpu", "true")
    assert "resource pool 'gpu' is bound to other workspaces" in line
    # Nor may a job of another workspace move there.
    queued = cluster.create(config(tmp_path), ctx)
    job = wait_until(lambda: queued_job(cluster, queued), 30, "the experiment's job")
    line = error(cluster, "job", "update", job, "--resource-pool", "gpu")
    assert "resource pool 'gpu' is bound to other workspaces" in line
    cluster.det("experiment", "kill", str(queued))
    # Nor may a workspace of another make it its default.
    line = error(cluster, "workspace", "edit", "team-b", "--default-compute-pool", "gpu")
    assert "'gpu' is bound to other workspaces" in line

    # Replace moves the binding; remove makes the pool shared again.
    cluster.det("rp", "bindings", "replace", "gpu", "team-b")
    out = cluster.det("rp", "bindings", "list-workspaces", "gpu").stdout
    assert "team-b" in out and "team-a" not in out
    cluster.create(exp, ctx, "--paused")
    cluster.det("rp", "bindings", "remove", "gpu", "team-b")
    cluster.create(config(tmp_path, gpu), ctx, "--paused")


def test_bad_bindings_get_one_line_and_only_admins_bind(cluster: Cluster) -> None:
    cluster.det("workspace", "create", "team-c")
    line = error(cluster, "rp", "bindings", "add", "default", "team-c")
    assert "'default' is the default pool and cannot be bound" in line
    line = error(cluster, "rp", "bindings", "add", "tpu", "team-c")
    assert "no resource pool named 'tpu'" in line
    assert "workspace 'nowhere' not found" in error(
        cluster, "rp", "bindings", "add", "gpu", "nowhere"
    )
    line = error(cluster, "rp", "bindings", "remove", "gpu", "team-c")
    assert "'gpu' is not bound to workspace 'team-c'" in line
    cluster.det("rp", "bindings", "add", "gpu", "team-c")
    line = error(cluster, "rp", "bindings", "add", "gpu", "team-c")
    assert "already bound to workspace 'team-c'" in line
    assert "not found" in error(cluster, "workspace", "list-pools", "nowhere")

    cluster.det("user", "create", "carol", "--password", "carol-secret-12")
    proc = cluster.det_as("carol", "carol-secret-12", "rp", "bindings", "remove", "gpu", "team-c")
    assert proc.returncode == 1 and "MODIFY_RP_WORKSPACE_BINDINGS" in proc.stderr, proc.stderr
    proc = cluster.det_as("carol", "carol-secret-12", "rp", "bindings", "list-workspaces", "gpu")
    assert proc.returncode == 0 and "team-c" in proc.stdout, proc.stderr
    cluster.det("rp", "bindings", "remove", "gpu", "team-c")
