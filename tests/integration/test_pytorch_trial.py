"""The PyTorchTrial example trains on a real cluster, by every launch path."""

from __future__ import annotations

import asyncio

import pytest

from determined.api.gen import v1
from determined.common import client
from tests.cluster import EXAMPLES, Cluster

EXAMPLE = EXAMPLES / "pytorch_trial"


def validation_metrics(cluster: Cluster, trial_id: int) -> list[v1.MetricReport]:
    async def fetch() -> list[v1.MetricReport]:
        async with client.session(cluster.address, token=cluster.token) as s:
            req = v1.GetTrialMetricsRequest(trial_id=trial_id, group="validation")
            return list((await s.call(s.stub.get_trial_metrics(req))).reports)

    return asyncio.run(fetch())


def run_example(cluster: Cluster, config: str) -> dict[str, object]:
    exp_id = cluster.create(EXAMPLE / config, EXAMPLE)
    state = cluster.wait_state(exp_id, "COMPLETED", "ERROR", "CANCELED", timeout=300)
    (trial,) = cluster.trials(exp_id)
    assert state == "COMPLETED", cluster.logs(trial["id"])[-3000:]
    return trial


@pytest.mark.slow
def test_trial_class_trains_and_validates(cluster: Cluster) -> None:
    trial = run_example(cluster, "const.yaml")
    reports = validation_metrics(cluster, int(trial["id"]))
    assert reports, "no validation metrics were reported"
    assert trial["best_validation_metric"] is not None
    assert (
        cluster.det("experiment", "lc", str(trial["experiment_id"])).stdout.count("COMPLETED") >= 1
    )


@pytest.mark.slow
def test_trial_class_trains_on_two_slots(cluster: Cluster) -> None:
    cluster.start_agent("agent-1", slots=1)
    trial = run_example(cluster, "distributed.yaml")
    logs = cluster.logs(int(trial["id"]))
    assert "[rank=1]" in logs


@pytest.mark.slow
def test_legacy_trial_class_entrypoint(cluster: Cluster) -> None:
    trial = run_example(cluster, "legacy.yaml")
    assert validation_metrics(cluster, int(trial["id"]))
