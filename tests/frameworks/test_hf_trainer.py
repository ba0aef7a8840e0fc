"""The Hugging Face Trainer with DetCallback (examples/hf_trainer_api) on a real cluster.

Real training on CPUs of a tiny GPT-2 built from a config, with data made in memory: the
Trainer alone (paused and resumed, crashed and restarted), under the torch.distributed
launcher on two ranks, through DeepSpeed, as trl's SFTTrainer with a peft LoRA adapter,
and under an adaptive ASHA search. The
experiments are submitted when the module starts (a few at a time, as slots free up) and
each test checks what a user would see through the API: states, metrics, checkpoints, logs.
"""

from __future__ import annotations

import json
import os
import time

import psutil
import pytest

from determined.common import structs
from tests.cluster import EXAMPLES, Cluster
from tests.frameworks.conftest import skip_without_frameworks
from tests.integration.test_core_api import Api, checkpoint_dir
from tests.integration.test_digits import wait_trial

skip_without_frameworks("transformers", "trl", "peft")

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(900)]

HF = EXAMPLES / "hf_trainer_api"
# Starting a trial that imports transformers takes a while on a busy two-core machine.
PATIENT = ("--config", "preemption_timeout=600")


@pytest.fixture(scope="module")
def runs(cluster: Cluster) -> dict[str, int]:
    return {
        "pause": cluster.create(
            HF / "const.yaml",
            HF,
            *PATIENT,
            "--config",
            "hyperparameters.training_arguments.max_steps=2000",
        ),
        "const": cluster.create(HF / "const.yaml", HF),
        "crash": cluster.create(
            HF / "const.yaml",
            HF,
            *PATIENT,
            *("--config", "hyperparameters.training_arguments.max_steps=2000"),
            *("--config", "max_restarts=1"),
        ),
        "distributed": cluster.create(HF / "distributed.yaml", HF),
        "sft": cluster.create(HF / "sft_lora.yaml", HF),
        "deepspeed": cluster.create(HF / "deepspeed.yaml", HF),
        "adaptive": cluster.create(HF / "adaptive.yaml", HF),
    }


def steps(reports: list[tuple[int, dict]]) -> list[int]:
    return [s for s, _ in reports]


def test_paused_trainer_resumes_from_the_checkpoint_it_saved(
    cluster: Cluster, api: Api, runs: dict[str, int]
) -> None:
    exp_id = runs["pause"]
    trial = api.first_trial(exp_id)
    wait_steps(api, exp_id, trial.id, 60)
    cluster.det("experiment", "pause", str(exp_id))
    wait_trial(api, trial.id, "PAUSED")
    # DetCallback stopped the Trainer at the signal and saved that step.
    stopped_at = api.trial(trial.id).total_batches_processed
    assert 60 <= stopped_at < 2000, "the pause did not land mid-training"
    saved = api.checkpoints(trial.id)[-1]
    assert saved.steps_completed == stopped_at
    assert structs.python(saved.metadata)["steps_completed"] == stopped_at
    assert (checkpoint_dir(saved) / f"checkpoint-{stopped_at}" / "model.safetensors").is_file()
    assert not api.logs(trial.id, search="trained to step 2000")

    cluster.det("experiment", "activate", str(exp_id))
    api.wait_for_log(trial.id, f"resuming from out/checkpoint-{stopped_at}")
    # Not from step 0: the next training report is the first log step after the saved one.
    wait_steps(api, exp_id, trial.id, stopped_at + 20)
    cluster.det("experiment", "kill", str(exp_id))
    training = steps(api.metrics(trial.id, "training"))
    assert training == sorted(set(training)), "a step was reported twice"
    after = [s for s in training if s > stopped_at]
    assert after[0] == (stopped_at // 10 + 1) * 10
    assert api.trial(trial.id).restarts == 0, "a pause is not a failure"


def wait_steps(api: Api, exp_id: int, trial_id: int, past: int) -> None:
    deadline = time.monotonic() + 600
    while max(steps(api.metrics(trial_id, "training")), default=0) <= past:
        assert time.monotonic() < deadline, f"trial {trial_id} did not report past step {past}"
        assert api.state(exp_id) not in ("ERROR", "COMPLETED"), api.log_text(trial_id)
        time.sleep(0.5)


def training_processes(cluster: Cluster, task_id: str) -> list[psutil.Process]:
    """The trial's run_clm.py processes (their working directory is the task's own)."""
    found = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        cwd, cmdline = p.info["cwd"] or "", p.info["cmdline"] or []
        in_task = os.path.basename(cwd).startswith(f"{task_id}.")
        # Not the launcher's processes, whose command lines name the script too.
        if in_task and str(cluster.root) in cwd and cmdline[1:2] == ["run_clm.py"]:
            found.append(p)
    return found


def test_crashed_trainer_restarts_from_its_latest_checkpoint(
    cluster: Cluster, api: Api, runs: dict[str, int]
) -> None:
    exp_id = runs["crash"]
    trial = api.first_trial(exp_id)
    deadline = time.monotonic() + 600
    while not [c for c in api.checkpoints(trial.id) if c.steps_completed >= 100]:
        assert time.monotonic() < deadline, "no checkpoint at step 100"
        assert api.state(exp_id) not in ("ERROR", "COMPLETED"), api.log_text(trial.id)
        time.sleep(0.3)
    (victim,) = training_processes(cluster, api.trial(trial.id).task_id)
    victim.kill()
    # The restart downloads the latest checkpoint the master knows and goes on from it.
    latest = wait_until_restarted(api, trial.id)
    api.wait_for_log(trial.id, f"resuming from out/checkpoint-{latest}")
    wait_steps(api, exp_id, trial.id, latest + 20)
    cluster.det("experiment", "kill", str(exp_id))
    training = steps(api.metrics(trial.id, "training"))
    assert training == sorted(set(training)), "the restart's reports repeat steps"
    assert next(s for s in training if s > latest) == (latest // 10 + 1) * 10


def wait_until_restarted(api: Api, trial_id: int) -> int:
    """The steps of the checkpoint the trial's restart resumes from."""
    deadline = time.monotonic() + 120
    while api.trial(trial_id).restarts < 1:
        assert time.monotonic() < deadline, "the trial did not restart"
        time.sleep(0.3)
    return api.checkpoints(trial_id)[-1].steps_completed


def test_trainer_reports_metrics_checkpoints_and_progress(api: Api, runs: dict[str, int]) -> None:
    exp_id = runs["const"]
    api.wait(exp_id, "COMPLETED", timeout=600)
    (trial,) = api.trials(exp_id)
    training = api.metrics(trial.id, "training")
    # Every 10 steps, once each: the Trainer's summary at step 200 is not a second report.
    assert steps(training) == list(range(10, 201, 10))
    assert set(training[0][1]) == {"loss", "grad_norm", "learning_rate", "batches", "epochs"}
    assert training[-1][1]["loss"] < training[0][1]["loss"]
    validations = api.metrics(trial.id, "validation")
    assert steps(validations) == [50, 100, 150, 200]
    assert set(validations[-1][1]) == {"eval_loss", "batches", "epochs"}
    assert validations[-1][1]["batches"] == 200
    assert trial.best_validation_metric == min(m["eval_loss"] for _, m in validations)
    assert api.experiment(exp_id).progress == pytest.approx(1.0)

    latest = api.checkpoints(trial.id)[-1]
    assert latest.steps_completed == 200 and trial.latest_checkpoint_uuid == latest.uuid
    assert structs.python(latest.metadata) == {
        "steps_completed": 200,
        "trial_id": trial.id,
        "finetuned_from": None,
        "tasks": "language-modeling",
        "dataset": "sums",
        "tags": ["language-modeling", "tiny"],
    }
    files = set(latest.resources)
    assert {"checkpoint-200/model.safetensors", "checkpoint-200/optimizer.pt"} <= files
    assert "checkpoint-200/trainer_state.json" in files
    user_data = json.loads((checkpoint_dir(latest) / "checkpoint-200" / "my_data.json").read_text())
    assert user_data["dataset"] == "sums"
    state = json.loads(
        (checkpoint_dir(latest) / "checkpoint-200" / "trainer_state.json").read_text()
    )
    assert state["global_step"] == 200


def test_two_rank_ddp_trainer_reports_once_per_step(api: Api, runs: dict[str, int]) -> None:
    exp_id = runs["distributed"]
    api.wait(exp_id, "COMPLETED", timeout=600)
    (trial,) = api.trials(exp_id)
    assert steps(api.metrics(trial.id, "training")) == list(range(10, 101, 10))
    assert steps(api.metrics(trial.id, "validation")) == [50, 100]
    assert [c.steps_completed for c in api.checkpoints(trial.id)][-1] == 100
    # Both ranks trained one model together: DDP averages the loss over the ranks.
    finals = {}
    for line in api.logs(trial.id, search="trained to step 100"):
        rank = line.split("]", 1)[0].removeprefix("[rank=")
        finals[rank] = json.loads(line.split(": ", 3)[-1].replace("'", '"'))["train_loss"]
    assert set(finals) == {"0", "1"}
    assert finals["0"] == pytest.approx(finals["1"])
    assert not api.logs(trial.id, search="parallel_mode != ParallelMode.DISTRIBUTED")


def test_deepspeed_trainer_saves_every_ranks_shard(api: Api, runs: dict[str, int]) -> None:
    exp_id = runs["deepspeed"]
    api.wait(exp_id, "COMPLETED", timeout=800)
    (trial,) = api.trials(exp_id)
    assert steps(api.metrics(trial.id, "training")) == list(range(10, 61, 10))
    latest = api.checkpoints(trial.id)[-1]
    assert latest.steps_completed == 60
    files = set(latest.resources)
    for rank in (0, 1):
        assert (
            f"checkpoint-60/global_step60/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt" in files
        )
        assert f"checkpoint-60/rng_state_{rank}.pth" in files


def test_sft_trainer_with_lora_stores_the_adapter(api: Api, runs: dict[str, int]) -> None:
    exp_id = runs["sft"]
    api.wait(exp_id, "COMPLETED", timeout=600)
    (trial,) = api.trials(exp_id)
    assert steps(api.metrics(trial.id, "training")) == list(range(10, 61, 10))
    validations = api.metrics(trial.id, "validation")
    assert steps(validations) == [30, 60]
    assert "eval_loss" in validations[-1][1]
    latest = api.checkpoints(trial.id)[-1]
    files = set(latest.resources)
    assert "checkpoint-60/adapter_model.safetensors" in files
    assert "checkpoint-60/model.safetensors" not in files, "the frozen base model is not saved"
    assert structs.python(latest.metadata)["adapter"] == "lora"


def test_asha_stops_the_losers_and_they_save_where_they_stopped(
    api: Api, runs: dict[str, int]
) -> None:
    exp_id = runs["adaptive"]
    api.wait(exp_id, "COMPLETED", timeout=800)
    trials = api.trials(exp_id)
    assert len(trials) == 4
    lengths = {t.id: t.total_batches_processed for t in trials}
    assert max(lengths.values()) == 200, lengths
    stopped = [t for t in trials if t.total_batches_processed < 200]
    assert stopped, f"ASHA stopped no trial: {lengths}"
    for t in stopped:
        # Stopped past the first rung (50 batches), by the signal, not by a failure.
        assert t.total_batches_processed >= 50 and t.state.name == "COMPLETED"
        assert api.checkpoints(t.id)[-1].steps_completed == t.total_batches_processed
        rung = [m for s, m in api.metrics(t.id, "validation") if s == 50]
        assert rung and rung[0]["batches"] == 50
