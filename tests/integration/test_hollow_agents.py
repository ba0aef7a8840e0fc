"""Hollow agents (``det-agent --runtime hollow``): a real master runs a search whose trials
no process runs; the agent plays each trial's Core API calls instead (bench/scale.py's load).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from pydet.agent.hollow_runtime import hollow_metric
from tests import hollow
from tests.cluster import Cluster, running

TRIALS = 20


@pytest.fixture
def hollow_cluster(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    def start(c: Cluster) -> None:
        c.start_master()
        c.start_agent("hollow-0", slots=5, runtime="hollow")
        c.start_agent("hollow-1", slots=5, runtime="hollow")

    yield from running(Cluster(tmp_path), start)


def test_random_search_on_hollow_agents_completes_with_every_metric(
    hollow_cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    config = hollow.random_search("hollow-search", trials=TRIALS, concurrency=10, length=3)
    config["reproducibility"] = {"experiment_seed": 7}
    (tmp_path / "hollow.yaml").write_text(json.dumps(config))
    context = tmp_path / "context"
    context.mkdir()
    exp_id = hollow_cluster.create(tmp_path / "hollow.yaml", context)

    state = hollow_cluster.wait_state(exp_id, "COMPLETED", "ERROR", "CANCELED", timeout=120)
    trials = hollow_cluster.trials(exp_id)

    assert state == "COMPLETED", trials
    assert len(trials) == TRIALS
    for trial in trials:
        assert trial["state"] == "COMPLETED", trial
        reports = hollow_cluster.get(f"/api/v1/trials/{trial['id']}/metrics?group=validation")
        expected = hollow_metric(trial["hparams"], trial["id"])
        assert [(int(r["stepsCompleted"]), _json(r["metrics"])) for r in reports] == [
            (3, {"val_loss": expected})
        ]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
