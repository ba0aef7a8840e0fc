"""The digits classifier (examples/digits) at every stage of its port, on a real cluster.

Real PyTorch training on CPUs: DDP over gloo with two slots under the torch.distributed
launcher, under a hand-written launcher, and with DeepSpeed. Training is seeded and
single-threaded, so two runs of the same config give bit-identical models; the pause test
relies on that to show that a paused and resumed trial ends exactly where an uninterrupted
one does.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from collections.abc import Iterator

import pytest

from determined.common import structs
from tests.cluster import EXAMPLES, Cluster, cluster_fixture
from tests.integration.test_core_api import Api, checkpoint_dir

DIGITS = EXAMPLES / "digits"
# 3_checkpoints.yaml: 10 epochs of 23 batches per worker (1,438 images, 2 workers, 32 each).
EPOCHS, BATCHES = 10, 23

# Each test imports torch and trains for real: minutes on a 2-core machine.
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("digits"), agents=1, slots=6)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Api:
    return Api(cluster)


@pytest.fixture(scope="module")
def checkpoint_runs(cluster: Cluster) -> dict[str, int]:
    """Stage 3 twice: one run to pause and resume, one left alone."""
    # Starting torch on a busy 2-core machine can take longer than the default 30s that a
    # paused task gets before it is killed.
    patient = ("--config", "preemption_timeout=600")
    return {
        "paused": cluster.create(DIGITS / "3_checkpoints.yaml", DIGITS, *patient),
        "uninterrupted": cluster.create(DIGITS / "3_checkpoints.yaml", DIGITS, *patient),
    }


@pytest.fixture(scope="module")
def stages(cluster: Cluster, checkpoint_runs: dict[str, int]) -> dict[str, int]:
    """The other stages, submitted together so that they share the cluster's slots."""
    return {
        name: cluster.create(DIGITS / f"{name}.yaml", DIGITS)
        for name in ("1_distributed", "2_metrics", "0_plain", "custom_launcher", "4_hparams")
    }


def weights_by_epoch(api: Api, trial_id: int) -> dict[int, str]:
    """The chief's ``epoch N: ... weights HASH`` lines."""
    out = {}
    for line in api.logs(trial_id, search=", weights "):
        m = re.search(r"epoch (\d+): .*, weights ([0-9a-f]{16})$", line)
        assert m, line
        out[int(m.group(1))] = m.group(2)
    return out


def final_weights(api: Api, trial_id: int) -> dict[int, str]:
    """Every rank's ``final weights HASH`` line."""
    out = {}
    for line in api.logs(trial_id, search="final weights "):
        m = re.match(r"\[rank=(\d+)\] .*final weights ([0-9a-f]{16})$", line)
        assert m, line
        out[int(m.group(1))] = m.group(2)
    return out


def wait_trial(api: Api, trial_id: int, state: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while (now := api.trial(trial_id).state.name.removeprefix("STATE_")) != state:
        assert time.monotonic() < deadline, f"trial {trial_id} is {now}, not {state}"
        time.sleep(0.5)


def test_digits_pause_and_activate_resume_exactly(
    cluster: Cluster, api: Api, checkpoint_runs: dict[str, int]
) -> None:
    exp_id = checkpoint_runs["paused"]
    trial = api.first_trial(exp_id)
    api.wait_for_log(trial.id, "Training in distributed mode")
    cluster.det("experiment", "pause", str(exp_id))
    # The workers save a checkpoint after the epoch they are in, agree to stop, and exit.
    wait_trial(api, trial.id, "PAUSED")
    assert api.state(exp_id) == "PAUSED"
    stopped_at = api.trial(trial.id).total_batches_processed
    assert 0 < stopped_at < EPOCHS * BATCHES, "the pause did not land mid-training"
    assert api.checkpoints(trial.id)[-1].steps_completed == stopped_at
    assert not api.logs(trial.id, search="final weights")

    cluster.det("experiment", "activate", str(exp_id))
    api.wait(exp_id, "COMPLETED", timeout=400)
    resumed_epoch = stopped_at // BATCHES
    assert api.logs(trial.id, search=f"resuming at epoch {resumed_epoch}")
    assert api.trial(trial.id).restarts == 0, "a pause is not a failure"

    alone = api.first_trial(checkpoint_runs["uninterrupted"])
    api.wait(checkpoint_runs["uninterrupted"], "COMPLETED", timeout=400)
    # Same validation reports at the same steps, bit for bit, and the same final weights.
    resumed = api.metrics(trial.id, "validation")
    assert [steps for steps, _ in resumed] == [BATCHES * (e + 1) for e in range(EPOCHS)]
    assert resumed == api.metrics(alone.id, "validation")
    assert api.metrics(trial.id, "training") == api.metrics(alone.id, "training")
    assert weights_by_epoch(api, trial.id) == weights_by_epoch(api, alone.id)
    assert len(set(final_weights(api, trial.id).values())) == 1
    assert final_weights(api, trial.id) == final_weights(api, alone.id)


def test_digits_stage3_ddp_reports_metrics_and_checkpoints_per_rank(
    cluster: Cluster, api: Api, checkpoint_runs: dict[str, int]
) -> None:
    exp_id = checkpoint_runs["uninterrupted"]
    api.wait(exp_id, "COMPLETED", timeout=400)
    (trial,) = api.trials(exp_id)
    steps = [BATCHES * (e + 1) for e in range(EPOCHS)]
    validations = api.metrics(trial.id, "validation")
    assert [s for s, _ in validations] == steps
    assert validations[-1][1]["val_accuracy"] > 0.9
    assert [s for s, _ in api.metrics(trial.id, "training")] == steps
    assert trial.best_validation_metric == min(m["val_loss"] for _, m in validations)

    ckpts = api.checkpoints(trial.id)
    assert {c.steps_completed for c in ckpts} <= set(steps)
    latest = ckpts[-1]
    assert trial.latest_checkpoint_uuid == latest.uuid
    assert structs.python(latest.metadata) == {
        "steps_completed": EPOCHS * BATCHES,
        "trial_id": trial.id,
    }
    assert set(latest.resources) == {"data", "metadata.json"}
    import torch

    state = torch.load(checkpoint_dir(latest) / "data", weights_only=False)
    assert state["epoch"] == EPOCHS - 1
    assert set(state["state_dict"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}

    # Both workers' lines are stored with their rank.
    rank1 = cluster.logs(trial.id, "--rank-id", "1")
    assert "[rank=1] " in rank1 and "Process 1, total 2." in rank1
    assert "[rank=0]" not in rank1 and "Process 0, total 2." not in rank1
    rank0 = cluster.logs(trial.id, "--rank-id", "0")
    assert "Process 0, total 2." in rank0 and "reported checkpoint" in rank0
    assert set(final_weights(api, trial.id)) == {0, 1}
    assert len(set(final_weights(api, trial.id).values())) == 1


def test_digits_stage0_plain_script_runs_unchanged(api: Api, stages: dict[str, int]) -> None:
    exp_id = stages["0_plain"]
    api.wait(exp_id, "COMPLETED", timeout=400)
    (trial,) = api.trials(exp_id)
    (last,) = api.logs(trial.id, search="epoch 7:")
    assert float(last.rsplit("val accuracy ", 1)[1]) > 0.9
    assert api.logs(trial.id, search="final weights")
    assert api.metrics(trial.id, "") == []


def test_digits_stage1_ddp_over_gloo_on_two_slots(api: Api, stages: dict[str, int]) -> None:
    exp_id = stages["1_distributed"]
    api.wait(exp_id, "COMPLETED", timeout=400)
    (trial,) = api.trials(exp_id)
    for rank in (0, 1):
        (line,) = api.logs(trial.id, search=f"Process {rank}, total 2.")
        assert line.startswith(f"[rank={rank}] ")
    # DDP keeps the replicas identical.
    weights = final_weights(api, trial.id)
    assert set(weights) == {0, 1} and weights[0] == weights[1]


def test_digits_stage2_metrics_reach_the_master(
    cluster: Cluster, api: Api, stages: dict[str, int]
) -> None:
    exp_id = stages["2_metrics"]
    api.wait(exp_id, "COMPLETED", timeout=400)
    (trial,) = api.trials(exp_id)
    steps = [BATCHES * (e + 1) for e in range(8)]
    training = api.metrics(trial.id, "training")
    assert [s for s, _ in training] == steps
    assert training[-1][1]["loss"] < training[0][1]["loss"]
    validations = api.metrics(trial.id, "validation")
    assert [s for s, _ in validations] == steps
    assert set(validations[-1][1]) == {"val_loss", "val_accuracy"}
    assert validations[-1][1]["val_accuracy"] > 0.9
    described = json.loads(cluster.det("trial", "describe", str(trial.id), "--json").stdout)
    best = min(m["val_loss"] for _, m in validations)
    assert described["trial"]["best_validation_metric"] == best
    assert api.checkpoints(trial.id) == []


def test_digits_stage4_grid_search_over_the_learning_rate(api: Api, stages: dict[str, int]) -> None:
    exp_id = stages["4_hparams"]
    api.wait(exp_id, "COMPLETED", timeout=500)
    trials = api.trials(exp_id)
    by_lr = {structs.python(t.hparams)["lr"]: t for t in trials}
    assert sorted(by_lr) == pytest.approx([0.01, 0.1])
    for lr, trial in by_lr.items():
        # The hyperparameter reached the script through its argument parser.
        args_lines = api.logs(trial.id, search="Arguments and hyperparameters")
        assert len(args_lines) == 2  # one per worker
        for line in args_lines:
            assert json.loads(line.split("hyperparameters: ", 1)[1])["lr"] == lr
        # The searcher's max_length (5 epochs) is where training stopped.
        validations = api.metrics(trial.id, "validation")
        assert [s for s, _ in validations] == [BATCHES * (e + 1) for e in range(5)]
        assert trial.best_validation_metric == min(m["val_loss"] for _, m in validations)
        assert api.checkpoints(trial.id)[-1].steps_completed == 5 * BATCHES
    # At this budget the larger learning rate wins, and the searcher knows it.
    best = min(trials, key=lambda t: t.best_validation_metric or float("inf"))
    assert structs.python(best.hparams)["lr"] == pytest.approx(0.1)
    assert api.experiment(exp_id).best_trial_searcher_metric == best.best_validation_metric


def test_digits_custom_launcher_trains_like_torchrun(
    cluster: Cluster, api: Api, stages: dict[str, int], checkpoint_runs: dict[str, int]
) -> None:
    exp_id = stages["custom_launcher"]
    api.wait(exp_id, "COMPLETED", timeout=400)
    (trial,) = api.trials(exp_id)
    assert api.logs(trial.id, search="started 2 workers")
    rank1 = cluster.logs(trial.id, "--rank-id", "1")
    assert "Process 1, total 2." in rank1
    # Four epochs under the hand-written launcher end with the same weights as the first four
    # epochs under torchrun: same workers, same environment, same training.
    weights = final_weights(api, trial.id)
    assert set(weights) == {0, 1} and weights[0] == weights[1]
    under_torchrun = api.first_trial(checkpoint_runs["uninterrupted"])
    api.wait(checkpoint_runs["uninterrupted"], "COMPLETED", timeout=400)
    assert weights[0] == weights_by_epoch(api, under_torchrun.id)[3]
    assert [s for s, _ in api.metrics(trial.id, "validation")] == [
        BATCHES * (e + 1) for e in range(4)
    ]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"
)
def test_digits_deepspeed_on_cpu(cluster: Cluster, api: Api) -> None:
    # The first DeepSpeed run on a machine compiles its CPU communication op (minutes).
    exp_id = cluster.create(DIGITS / "deepspeed.yaml", DIGITS)
    api.wait(exp_id, "COMPLETED", timeout=570)
    (trial,) = api.trials(exp_id)
    for rank in (0, 1):
        (line,) = api.logs(trial.id, search=f"DeepSpeed engine on cpu, rank {rank} of 2")
        assert line.startswith(f"[rank={rank}] ")
    validations = api.metrics(trial.id, "validation")
    # 3 epochs of 45 steps: DeepSpeed's micro-batch of 16 per worker.
    assert [s for s, _ in validations] == [45, 90, 135]
    assert max(m["val_accuracy"] for _, m in validations) > 0.85
    latest = api.checkpoints(trial.id)[-1]
    assert structs.python(latest.metadata) == {"steps_completed": 135, "epoch": 2}
    # Every worker wrote its part (shard=True): the engine's files and DeepSpeed's tag file.
    assert {"latest", "engine/mp_rank_00_model_states.pt", "metadata.json"} <= set(latest.resources)
    assert (checkpoint_dir(latest) / "latest").read_text() == "engine"
