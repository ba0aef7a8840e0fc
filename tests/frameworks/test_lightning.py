"""determined.lightning.DetLogger: a Lightning Trainer's logged metrics reach the master."""

from __future__ import annotations

import importlib.util
import pathlib
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture
from tests.integration.test_core_api import Api, write_context

pytestmark = [
    pytest.mark.frameworks,
    pytest.mark.timeout(600),
    pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="no lightning"),
]

TRAIN = """
import lightning.pytorch as pl
import torch
from torch import nn

from determined.lightning import DetLogger


class Regression(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
x = torch.randn(64, 4)
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
trainer = pl.Trainer(
    logger=DetLogger(),
    max_epochs=3,
    log_every_n_steps=4,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    accelerator="cpu",
)
trainer.fit(Regression(), data)
"""

CONFIG = """
name: lightning-detlogger
entrypoint: python3 train.py
searcher:
  name: single
  metric: train_loss
max_restarts: 0
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("lightning"))


def test_lightning_metrics_are_reported_as_training_metrics(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    ctx = write_context(tmp_path / "ctx", {"train.py": TRAIN, "const.yaml": CONFIG})
    api = Api(cluster)
    exp_id = cluster.create(ctx / "const.yaml", ctx)
    api.wait(exp_id, "COMPLETED", timeout=500)
    (trial,) = api.trials(exp_id)
    reports = api.metrics(trial.id, "training")
    # 8 batches an epoch, 3 epochs, a log every 4 steps (Lightning counts from 0).
    assert [s for s, _ in reports] == [3, 7, 11, 15, 19, 23]
    losses = [m["train_loss"] for _, m in reports]
    assert losses[-1] < losses[0]
    assert all("epoch" in m for _, m in reports)
