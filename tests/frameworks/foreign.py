"""A checkpoint that no framework under test saved: a PyTorchTrial's (examples/pytorch_trial)."""

from __future__ import annotations

from tests.cluster import EXAMPLES, Cluster
from tests.integration.test_core_api import Api


def pytorch_trial_checkpoint(cluster: Cluster, api: Api) -> str:
    """Train examples/pytorch_trial on ``cluster``; the id of its latest checkpoint."""
    exp_id = cluster.create(EXAMPLES / "pytorch_trial" / "const.yaml", EXAMPLES / "pytorch_trial")
    api.wait(exp_id, "COMPLETED", timeout=300)
    (trial,) = api.trials(exp_id)
    return api.checkpoints(trial.id)[-1].uuid
