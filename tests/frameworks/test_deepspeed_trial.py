"""DeepSpeedTrial (examples/deepspeed_trial) on a real cluster, with DeepSpeed on CPUs.

Determined 0.38's two ways to run one: a script calling ``det_ds.init()`` and
``det_ds.Trainer.fit()`` under the DeepSpeed launcher, and the class named with ``--trial``.
Both write Determined's checkpoint layout from every worker (``shard=True``); a paused
trial resumes from its checkpoint, and a checkpoint that no DeepSpeedTrial saved fails the
trial with its id named.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import shutil
import textwrap
from collections.abc import Iterator

import pytest

from determined.common import structs
from tests.cluster import EXAMPLES, Cluster, cluster_fixture
from tests.frameworks.foreign import pytorch_trial_checkpoint
from tests.integration.test_core_api import Api, checkpoint_dir
from tests.integration.test_digits import wait_trial

EXAMPLE = EXAMPLES / "deepspeed_trial"

# DeepSpeed's first start on a machine builds its CPU communication op (a minute or two).
pytestmark = [
    pytest.mark.frameworks,
    pytest.mark.timeout(900),
    pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="no deepspeed"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("deepspeed_trial"), agents=1, slots=4)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Api:
    return Api(cluster)


def files_of(ckpt_dir: pathlib.Path) -> set[str]:
    return {str(p.relative_to(ckpt_dir)) for p in ckpt_dir.rglob("*") if p.is_file()}


def test_trainer_script_trains_validates_and_checkpoints(cluster: Cluster, api: Api) -> None:
    exp_id = cluster.create(EXAMPLE / "const.yaml", EXAMPLE)
    api.wait(exp_id, "COMPLETED", timeout=800)
    (trial,) = api.trials(exp_id)
    validations = api.metrics(trial.id, "validation")
    # fit(max_length=Batch(150), validation_period=Batch(50)).
    assert [s for s, _ in validations] == [50, 100, 150]
    assert validations[-1][1]["accuracy"] > 0.85
    assert validations[-1][1]["batches"] == 150
    assert [s for s, _ in api.metrics(trial.id, "training")] == [25, 50, 75, 100, 125, 150]
    ckpts = api.checkpoints(trial.id)
    latest = ckpts[-1]
    assert latest.steps_completed == 150
    metadata = structs.python(latest.metadata)
    assert metadata["steps_completed"] == 150 and metadata["format"] == "pickle"
    files = files_of(checkpoint_dir(latest))
    assert {
        "det_state_dict_rank0.pth",
        "trial_state.pkl",
        "load_data.json",
        "latest",
        "model0/mp_rank_00_model_states.pt",
        "metadata.json",
    } <= files
    load_data = json.loads((checkpoint_dir(latest) / "load_data.json").read_text())
    assert load_data["trial_type"] == "DeepSpeedTrial"
    assert load_data["hparams"]["hidden"] == 64


def test_trial_class_on_two_workers_with_gradient_accumulation(cluster: Cluster, api: Api) -> None:
    exp_id = cluster.create(EXAMPLE / "distributed.yaml", EXAMPLE)
    api.wait(exp_id, "COMPLETED", timeout=800)
    (trial,) = api.trials(exp_id)
    # searcher.max_length 60 batches, min_validation_period 20, min_checkpoint_period 30.
    assert [s for s, _ in api.metrics(trial.id, "validation")] == [20, 40, 60]
    steps = {c.steps_completed for c in api.checkpoints(trial.id)}
    # Every min_checkpoint_period, and (checkpoint_policy best) after improving validations.
    assert {30, 60} <= steps <= {20, 30, 40, 60}
    latest = api.checkpoints(trial.id)[-1]
    files = files_of(checkpoint_dir(latest))
    # Each worker's own file in one checkpoint.
    assert {"det_state_dict_rank0.pth", "det_state_dict_rank1.pth"} <= files
    for rank in (0, 1):
        assert api.logs(
            trial.id, search="model parallel unit: ModelParallelUnit(data_parallel_rank"
        )
        assert any(
            line.startswith(f"[rank={rank}] ")
            for line in api.logs(trial.id, search=f"data_parallel_rank={rank}")
        )
    # An epoch is 1,437 images: 89 micro-batches of 16, 44 for each of the two workers, so
    # 22 batches of two micro-batches each.
    epochs = [m["epochs"] for _, m in api.metrics(trial.id, "validation")]
    assert epochs == [0, 1, 2]


SLOW_TRIAL = """
import time

from model_def import DigitsTrial


class SlowDigitsTrial(DigitsTrial):
    # A few batches a second, so that the test can pause it in the middle.
    def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
        time.sleep(0.05)
        return super().train_batch(dataloader_iter, epoch_idx, batch_idx)
"""

SLOW_CONFIG = """
name: deepspeed-trial-pause
entrypoint: python3 -m determined.launch.deepspeed --trial slow_def:SlowDigitsTrial
hyperparameters:
  deepspeed_config: ds_config.json
  hidden: 64
  lr: 0.1
searcher:
  name: single
  metric: validation_loss
  max_length:
    batches: 400
scheduling_unit: 10
# Starting DeepSpeed on a busy 2-core machine can take longer than the default 30s that a
# paused task gets before it is killed.
preemption_timeout: 600
min_checkpoint_period:
  batches: 40
max_restarts: 0
resources:
  slots_per_trial: 1
"""


def slow_context(tmp_path: pathlib.Path) -> pathlib.Path:
    ctx = tmp_path / "context"
    shutil.copytree(EXAMPLE, ctx)
    (ctx / "slow_def.py").write_text(textwrap.dedent(SLOW_TRIAL).lstrip())
    (ctx / "slow.yaml").write_text(textwrap.dedent(SLOW_CONFIG).lstrip())
    return ctx


def test_paused_trial_resumes_from_its_checkpoint(
    cluster: Cluster, api: Api, tmp_path: pathlib.Path
) -> None:
    ctx = slow_context(tmp_path)
    exp_id = cluster.create(ctx / "slow.yaml", ctx)
    trial = api.first_trial(exp_id)
    api.wait_for_log(trial.id, "saved at batch 40", timeout=600)
    cluster.det("experiment", "pause", str(exp_id))
    # The worker checkpoints where it is, then exits.
    wait_trial(api, trial.id, "PAUSED")
    paused_at = api.trial(trial.id).total_batches_processed
    assert 40 <= paused_at < 400, "the pause came after training ended"
    assert api.checkpoints(trial.id)[-1].steps_completed == paused_at
    assert [s for s, _ in api.metrics(trial.id, "training")][-1] == paused_at

    cluster.det("experiment", "activate", str(exp_id))
    api.wait(exp_id, "COMPLETED", timeout=600)
    line = api.wait_for_log(trial.id, "resumed at batch")
    assert re.search(rf"resumed at batch {paused_at} from checkpoint ", line)
    steps = [s for s, _ in api.metrics(trial.id, "training")]
    # Every step once: the second run went on from the checkpoint, not from batch 0.
    assert steps == sorted(set(steps))
    assert steps == list(range(10, 401, 10))
    assert api.checkpoints(trial.id)[-1].steps_completed == 400


def test_checkpoint_of_another_framework_fails_the_trial_naming_it(
    cluster: Cluster, api: Api, tmp_path: pathlib.Path
) -> None:
    # A PyTorchTrial's checkpoint: no DeepSpeed engine, no det_state_dict_rank0.pth.
    foreign = pytorch_trial_checkpoint(cluster, api)

    exp_id = cluster.create(
        EXAMPLE / "distributed.yaml",
        EXAMPLE,
        "--config",
        f"searcher.source_checkpoint_uuid={foreign}",
        "--config",
        "resources.slots_per_trial=1",
    )
    api.wait(exp_id, "ERROR", timeout=600)
    (trial,) = api.trials(exp_id)
    (line,) = api.logs(trial.id, search=f"checkpoint {foreign} was not saved by a DeepSpeedTrial")
    assert "state_dict.pth" in line, line
    assert not api.logs(trial.id, search="Traceback")
