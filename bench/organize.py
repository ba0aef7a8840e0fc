"""Workspaces, projects and the model registry at size, on a live master.

The store gets 100,000 experiments (one trial each) over 100 projects in 10 workspaces,
and 1,000 models with 10 versions each (10,000 versions, each holding a checkpoint),
inserted directly while the master is stopped. Prints a table: a project's first page of
experiments and the model list through the REST API (as the WebUI asks for them) and
gRPC (as the CLI and SDK do), moving 1,000 experiments between projects, and a project's
page's first render in headless Chromium (when the WebUI is built and Chromium and
Playwright are there: scripts/webui.sh build, scripts/webui.sh browser).

    python bench/organize.py [--experiments 100000] [--projects 100] [--versions 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from bench.webui import CHROMIUM, CHROMIUM_ARGS, first_render
from determined.api.gen import v1
from determined.common import client
from pydet.master.gateway import spa
from tests.cluster import Cluster

WORKSPACES = 10
VERSIONS_PER_MODEL = 10
TRIES = 20
CONFIG = json.dumps(
    {
        "name": "bench",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 100},
        "resources": {"resource_pool": "default", "slots_per_trial": 1},
        "hyperparameters": {"lr": 0.01, "layers": 4},
        "checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp/bench"},
    }
)


def fill(db_path: pathlib.Path, experiments: int, projects: int, versions: int) -> None:
    """Rows as a busy cluster's store holds them (the master is stopped)."""
    db = sqlite3.connect(db_path)
    now = time.time()
    with db:
        db.executemany(
            "INSERT INTO workspaces (name, user_id, created_at) VALUES (?, 1, ?)",
            [(f"team-{w}", now) for w in range(WORKSPACES)],
        )
        first_ws = db.execute("SELECT MIN(id) FROM workspaces WHERE name LIKE 'team-%'").fetchone()
        db.executemany(
            "INSERT INTO projects (workspace_id, name, key, user_id, created_at)"
            " VALUES (?, ?, ?, 1, ?)",
            [
                (first_ws[0] + p % WORKSPACES, f"project-{p}", f"P{p:04d}", now)
                for p in range(projects)
            ],
        )
        first_project = db.execute("SELECT MIN(id) FROM projects WHERE id > 1").fetchone()[0]

        def experiment_rows() -> Iterator[tuple[Any, ...]]:
            for i in range(experiments):
                yield (
                    f"exp-{i}",
                    json.dumps(["bench", f"group-{i % 7}"]),
                    "COMPLETED",
                    CONFIG,
                    "admin",
                    now - experiments + i,
                    now - experiments + i + 60,
                    1.0,
                    f"job{i:07d}",
                    first_project + i % projects,
                )

        db.executemany(
            "INSERT INTO experiments (name, labels, state, config, original_config, username,"
            " start_time, end_time, progress, job_id, project_id)"
            " VALUES (?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?)",
            experiment_rows(),
        )
        db.execute(
            "INSERT INTO trials (experiment_id, request_id, state, phase, hparams, seed,"
            " start_time, best_validation) SELECT id, 'r', 'COMPLETED', 'COMPLETED',"
            " '{\"lr\": 0.01}', 0, start_time, 0.5 FROM experiments"
        )
        models = versions // VERSIONS_PER_MODEL
        db.executemany(
            "INSERT INTO models (name, description, metadata, labels, user_id, workspace_id,"
            " creation_time, last_updated_time) VALUES (?, 'a model', ?, ?, 1, ?, ?, ?)",
            [
                (
                    f"model-{m}",
                    json.dumps({"framework": "torch", "m": m}),
                    json.dumps(["cv"]),
                    first_ws[0] + m % WORKSPACES,
                    now - m,
                    now - m,
                )
                for m in range(models)
            ],
        )
        db.executemany(
            "INSERT INTO checkpoints (uuid, trial_id, experiment_id, steps_completed, metadata,"
            " resources, size, state, report_time, storage)"
            " VALUES (?, ?, ?, 100, '{\"steps_completed\": 100}', '{\"w\": 10}', 10,"
            " 'COMPLETED', ?, '{}')",
            [(f"ck-{v}", v + 1, v + 1, now) for v in range(versions)],
        )
        first_model = db.execute("SELECT MIN(id) FROM models").fetchone()[0]
        db.executemany(
            "INSERT INTO model_versions (model_id, version, checkpoint_uuid, name, metadata,"
            " user_id, creation_time, last_updated_time) VALUES (?, ?, ?, ?, '{}', 1, ?, ?)",
            [
                (
                    first_model + v // VERSIONS_PER_MODEL,
                    v % VERSIONS_PER_MODEL + 1,
                    f"ck-{v}",
                    f"v{v}",
                    now,
                    now,
                )
                for v in range(versions)
            ],
        )
    db.close()


def median_ms(call: Callable[[], Any]) -> float:
    call()  # warm
    times = []
    for _ in range(TRIES):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def rest(cluster: Cluster, path: str) -> Callable[[], Any]:
    def get() -> Any:
        with cluster.urlopen(cluster.request(path), timeout=30) as r:
            return json.loads(r.read())

    return get


async def grpc(address: str, token: str, project_id: int) -> tuple[float, float, float]:
    async with client.session(address, token=token) as s:

        async def page() -> None:
            req = v1.GetExperimentsRequest(project_id=project_id, limit=100)
            resp = await s.call(s.stub.get_experiments(req))
            assert len(resp.experiments) == 100

        async def models() -> None:
            req = v1.GetModelsRequest(limit=100)
            assert len((await s.call(s.stub.get_models(req))).models) == 100

        async def timed(call: Callable[[], Any]) -> float:
            await call()
            times = []
            for _ in range(TRIES):
                began = time.perf_counter()
                await call()
                times.append(time.perf_counter() - began)
            return statistics.median(times) * 1000

        page_ms, models_ms = await timed(page), await timed(models)
        found = await s.call(
            s.stub.get_experiments(v1.GetExperimentsRequest(project_id=project_id, limit=1000))
        )
        ids = [e.id for e in found.experiments]
        assert len(ids) == 1000, len(ids)
        began = time.perf_counter()
        moved = await s.call(
            s.stub.move_experiments(
                v1.MoveExperimentsRequest(experiment_ids=ids, destination_project_id=project_id + 1)
            )
        )
        move_s = time.perf_counter() - began
        assert all(not r.error for r in moved.results), moved.results[:3]
        return page_ms, models_ms, move_s


def project_render(cluster: Cluster, project_id: int) -> str:
    """Median seconds to the first frame of a project's page with its experiments shown (a
    fresh logged-in browser each run), or why it was not measured."""
    if not (spa.packaged_build() / "index.html").is_file():
        return "n/a (WebUI not built)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "n/a (no Playwright)"
    if not pathlib.Path(CHROMIUM).exists():
        return "n/a (no Chromium)"
    url = f"http://{cluster.address}/projects/{project_id}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            first_render(browser, url, cluster.token, "experiments")  # warm-up
            runs = [first_render(browser, url, cluster.token, "experiments")[0] for _ in range(5)]
        finally:
            browser.close()
    return f"{statistics.median(runs):.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--experiments", type=int, default=100_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--versions", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(pathlib.Path(tmp))
        try:
            cluster.start_master()  # makes the store and the admin
            cluster.stop_master()
            began = time.perf_counter()
            fill(
                cluster.root / "master" / "pydet.db", args.experiments, args.projects, args.versions
            )
            filled = time.perf_counter() - began
            cluster.start_master()
            project = cluster.sql("SELECT MIN(id) FROM projects WHERE id > 1")[0][0]
            page = rest(cluster, f"/api/v1/experiments?project_id={project}&limit=100")
            assert len(page()["experiments"]) == 100
            rest_me = median_ms(rest(cluster, "/api/v1/me"))
            rest_page = median_ms(page)
            rest_models = median_ms(rest(cluster, "/api/v1/models?limit=100"))
            rest_all_models = median_ms(rest(cluster, "/api/v1/models"))
            rest_projects = median_ms(rest(cluster, "/api/v1/workspaces/2/projects"))
            rest_all_projects = median_ms(rest(cluster, "/api/v1/workspaces/0/projects"))
            # Before the move, which takes 1,000 experiments out of this project.
            render = project_render(cluster, project)
            grpc_page, grpc_models, move_s = asyncio.run(
                grpc(cluster.address, cluster.token, project)
            )
        finally:
            cluster.close()
    per_project = args.experiments // args.projects
    models = args.versions // VERSIONS_PER_MODEL
    rows = [
        ("an HTTP round trip (GET /api/v1/me), for scale", f"{rest_me:.1f} ms", ""),
        (
            f"store filled ({args.experiments:,} exps, {args.versions:,} versions)",
            f"{filled:.1f} s",
            "",
        ),
        (f"project's first page, 100 of {per_project:,} (REST)", f"{rest_page:.1f} ms", "<= 50 ms"),
        (f"project's first page, 100 of {per_project:,} (gRPC)", f"{grpc_page:.1f} ms", "<= 50 ms"),
        (f"model list, first 100 of {models:,} (REST)", f"{rest_models:.1f} ms", "<= 50 ms"),
        (f"model list, first 100 of {models:,} (gRPC)", f"{grpc_models:.1f} ms", "<= 50 ms"),
        (f"model list, all {models:,} (REST)", f"{rest_all_models:.1f} ms", ""),
        (
            f"a workspace's {args.projects // WORKSPACES} projects (REST)",
            f"{rest_projects:.1f} ms",
            "",
        ),
        (
            f"every workspace's {args.projects} projects, the sidebar's (REST)",
            f"{rest_all_projects:.1f} ms",
            "",
        ),
        ("move 1,000 experiments between projects", f"{move_s * 1000:.0f} ms", "<= 1 s"),
        ("project's first page, first render in the WebUI (median of 5)", render, "<= 0.3 s"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure (median of 20)'.ljust(width)} | {'value':>10} | target")
    print(f"{'-' * width}-+-{'-' * 10}-+---------")
    for name, value, target in rows:
        print(f"{name.ljust(width)} | {value:>10} | {target}")


if __name__ == "__main__":
    main()
