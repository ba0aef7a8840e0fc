"""`det notebook`: real JupyterLab in a task, reached through the master's proxy, its
kernels over WebSockets; idle timeouts; a notebook that cannot start says why."""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.cluster import Cluster, cluster_fixture, wait_until
from tests.notebooks import run_in_kernel

pytest.importorskip("jupyterlab")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("notebooks"), slots=2)


def _launched(out: str) -> str:
    found = re.search(
        r"^Launched notebook \(id: ([0-9a-f-]{36}), name: JupyterLab \(.+\)\)\.$", out, re.M
    )
    assert found is not None, out
    return found.group(1)


def _notebooks(cluster: Cluster) -> list[dict[str, Any]]:
    return list(json.loads(cluster.det("notebook", "list", "-a", "--json").stdout))


def test_a_notebook_runs_jupyterlab_whose_kernels_answer_through_the_proxy(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "data.txt").write_text("from the context\n")
    out = cluster.det("notebook", "start", "-c", str(ctx), "--no-browser", timeout=300).stdout
    nb_id = _launched(out)
    url = f"{cluster.url}/proxy/{nb_id}/"
    assert f"Jupyter Notebook is running at: {url}" in out
    (listed,) = [n for n in _notebooks(cluster) if n["id"] == nb_id]
    assert listed["state"] == "STATE_RUNNING" and listed["service_address"] == f"/proxy/{nb_id}/"
    assert url in cluster.det("notebook", "open", nb_id[:8], "--no-browser").stdout

    token = cluster.token
    assert asyncio.run(run_in_kernel(cluster, nb_id, "1+1", token)) == "2"
    shown = asyncio.run(run_in_kernel(cluster, nb_id, "print(open('data.txt').read())", token))
    assert shown.strip() == "from the context"
    # JupyterLab's page itself, under its proxy path.
    status, page = cluster.fetch(f"/proxy/{nb_id}/lab", token)
    assert status == 200 and b"JupyterLab" in page
    assert "JupyterLab is ready" in cluster.det("notebook", "logs", nb_id).stdout

    # Another user neither opens nor kills it; nothing about it is said.
    cluster.det("user", "create", "eve", "--password", "eve-secret-123")
    eve = cluster.login("eve", "eve-secret-123")
    status, body = cluster.fetch(f"/proxy/{nb_id}/api/kernels", eve)
    assert status == 403 and b"kernel" not in body
    refused = cluster.det_as("eve", "eve-secret-123", "notebook", "kill", nb_id)
    assert refused.returncode == 1 and "only the owner of notebook" in refused.stderr

    assert f"Killed notebook {nb_id}" in cluster.det("notebook", "kill", nb_id).stdout
    wait_until(lambda: not any(n["id"] == nb_id for n in _notebooks(cluster)), 60, "the kill")


def test_an_idle_notebook_ends_and_its_log_says_why(cluster: Cluster) -> None:
    nb_id = cluster.det("notebook", "start", "-d", "--config", "idle_timeout=6s").stdout.strip()
    wait_until(
        lambda: any(
            n["id"] == nb_id and n["state"] == "STATE_RUNNING" for n in _notebooks(cluster)
        ),
        120,
        "the notebook to run",
    )
    token = cluster.token
    # A kernel keeps it busy (kernels_or_terminals, the default)...
    assert asyncio.run(run_in_kernel(cluster, nb_id, "6*7", token)) == "42"
    asyncio.run(asyncio.sleep(15))
    assert any(n["id"] == nb_id for n in _notebooks(cluster))

    async def shut_down_kernels() -> None:
        base = f"http://{cluster.address}/proxy/{nb_id}/"
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as s:
            async with s.get(base + "api/sessions") as r:
                for session in await r.json():
                    await s.delete(base + f"api/sessions/{session['id']}")
            async with s.get(base + "api/kernels") as r:
                for kernel in await r.json():
                    await s.delete(base + f"api/kernels/{kernel['id']}")

    asyncio.run(shut_down_kernels())
    wait_until(lambda: not any(n["id"] == nb_id for n in _notebooks(cluster)), 60, "the idle end")
    ended = cluster.get(f"/api/v1/notebooks/{nb_id}")["notebook"]
    assert ended["exitStatus"] == "idle timeout"
    log = cluster.det("notebook", "logs", nb_id).stdout
    assert "was idle for more than 6s (notebook_idle_type: kernels_or_terminals)" in log, log


def test_a_notebook_that_cannot_start_says_why(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    config_dir = tmp_path / "jupyter"
    config_dir.mkdir()
    (config_dir / "jupyter_server_config.py").write_text("raise SystemExit('broken config')\n")
    proc = cluster.det(
        "notebook",
        "start",
        "--no-browser",
        "--config",
        f"environment.environment_variables=[JUPYTER_CONFIG_DIR={config_dir}]",
        check=False,
        timeout=300,
    )
    assert proc.returncode == 1, proc
    assert "ended before JupyterLab answered (exited with code" in proc.stderr
    assert "JupyterLab exited with code" in proc.stderr and "Traceback" not in proc.stderr
