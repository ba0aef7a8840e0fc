"""`det tensorboard` with the docker runtime: the trial and the TensorBoard both run in the
task image, and TensorBoard's page and scalars come through the master's proxy."""

from __future__ import annotations

import json
import pathlib
import re
import textwrap
from typing import Any

import pytest

from tests.cluster import Cluster, wait_until
from tests.docker.conftest import no_containers_left

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

TRAIN = """
    from determined import core

    with core.init() as ctx:
        for step in (1, 2):
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        ctx.train.report_validation_metrics(steps_completed=2, metrics={"accuracy": 0.75})
"""


def test_a_tensorboard_in_a_container_serves_a_container_trials_scalars(
    docker_cluster: Cluster, tmp_path: pathlib.Path, agent_ids: list[str]
) -> None:
    agent = agent_ids[0]
    docker_cluster.start_agent(agent, runtime="docker")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(textwrap.dedent(TRAIN))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "entrypoint: python3 train.py\n"
        "searcher: {name: single, metric: accuracy, max_length: 1}\n"
        "max_restarts: 0\n"
    )
    exp_id = docker_cluster.create(cfg, ctx)
    assert docker_cluster.wait_state(exp_id, "COMPLETED", "ERROR", timeout=300) == "COMPLETED"
    (trial,) = docker_cluster.trials(exp_id)

    out = docker_cluster.det("tensorboard", "start", str(exp_id), "--no-browser").stdout
    match = re.search(r"/proxy/([0-9a-f-]+)/", out)
    assert match is not None, out
    tb_id = match.group(1)
    status, page = docker_cluster.fetch(f"/proxy/{tb_id}/", docker_cluster.token)
    assert status == 200 and b"TensorBoard" in page

    def tags() -> dict[str, Any] | None:
        status, body = docker_cluster.fetch(
            f"/proxy/{tb_id}/data/plugin/scalars/tags", docker_cluster.token
        )
        found = json.loads(body) if status == 200 else {}
        return found if found.get(f"trial_{trial['id']}") else None

    runs = wait_until(tags, 90, "TensorBoard to load the trial's scalars")
    assert {"loss", "val_accuracy"} <= set(runs[f"trial_{trial['id']}"])
    docker_cluster.det("tensorboard", "kill", tb_id)
    wait_until(
        lambda: not json.loads(docker_cluster.det("tensorboard", "list", "--json").stdout),
        60,
        "the TensorBoard to end",
    )
    no_containers_left(agent, timeout=60)
