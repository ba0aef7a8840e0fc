"""The DeepSpeed Trial API without a cluster: the DeepSpeed config merge, the Trainer in a
script of one's own (with a resume from its checkpoint), and the harness's test mode."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.cluster import EXAMPLES, ROOT

EXAMPLE = EXAMPLES / "deepspeed_trial"
pytestmark = [
    pytest.mark.frameworks,
    pytest.mark.timeout(600),
    pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="no deepspeed"),
]


def test_overwrite_deepspeed_config_merges_leaves_and_keeps_its_inputs(
    tmp_path: pathlib.Path,
) -> None:
    # Imported here: importing deepspeed takes seconds, which collecting must not.
    from determined.pytorch import deepspeed as deepspeed_api

    base = {"optimizer": {"type": "Adam", "params": {"lr": 0.1, "eps": 1e-8}}, "steps": 1}
    merged = deepspeed_api.overwrite_deepspeed_config(
        base, {"optimizer": {"params": {"lr": 0.5}}, "fp16": {"enabled": False}}
    )
    assert merged == {
        "optimizer": {"type": "Adam", "params": {"lr": 0.5, "eps": 1e-8}},
        "steps": 1,
        "fp16": {"enabled": False},
    }
    assert base["optimizer"]["params"]["lr"] == 0.1  # type: ignore[index]
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(base))
    assert deepspeed_api.overwrite_deepspeed_config(str(path), {"steps": 2})["steps"] == 2
    path.write_text('{"steps": 1, "steps": 2}')
    with pytest.raises(Exception, match="the key 'steps' twice"):
        deepspeed_api.overwrite_deepspeed_config(str(path), {})
    with pytest.raises(TypeError, match="Expected string or dict"):
        deepspeed_api.overwrite_deepspeed_config(3, {})  # type: ignore[arg-type]


RESUME = """
import logging, sys
from model_def import DigitsTrial
import determined as det
from determined import pytorch
from determined.pytorch import deepspeed as det_ds

logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
hparams = {"deepspeed_config": "ds_config.json", "hidden": 16, "lr": 0.1}
latest = sys.argv[2] if len(sys.argv) > 2 else None
with det_ds.init(hparams=hparams) as context:
    det_ds.Trainer(DigitsTrial(context), context).fit(
        max_length=pytorch.Batch(int(sys.argv[1])),
        checkpoint_period=pytorch.Batch(10),
        reporting_period=pytorch.Batch(5),
        latest_checkpoint=latest,
    )
"""


def run(cwd: pathlib.Path, *argv: str, env: dict[str, str] | None = None) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    clean["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=500,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def test_trainer_script_off_cluster_checkpoints_and_resumes(tmp_path: pathlib.Path) -> None:
    ctx = tmp_path / "ctx"
    shutil.copytree(EXAMPLE, ctx)
    (ctx / "resume.py").write_text(textwrap.dedent(RESUME).lstrip())
    out = run(ctx, "resume.py", "20")
    ckpts = sorted((ctx / "checkpoints").iterdir(), key=lambda p: p.stat().st_mtime)
    assert [json.loads((c / "metadata.json").read_text())["steps_completed"] for c in ckpts] == [
        10,
        20,
    ]
    first = ckpts[-1]
    assert {"det_state_dict_rank0.pth", "trial_state.pkl", "load_data.json", "latest"} <= {
        p.name for p in first.iterdir()
    }
    assert "report_training_metrics(steps_completed=20," in out

    out = run(ctx, "resume.py", "30", first.name)
    assert f"resumed at batch 20 from checkpoint {first.name}" in out
    assert "report_training_metrics(steps_completed=5," not in out
    assert "report_training_metrics(steps_completed=25," in out


def test_harness_test_mode_trains_one_batch_of_the_class(tmp_path: pathlib.Path) -> None:
    ctx = tmp_path / "ctx"
    shutil.copytree(EXAMPLE, ctx)
    hparams = {"deepspeed_config": "ds_config.json", "hidden": 16, "lr": 0.1}
    out = run(
        ctx,
        "-m",
        "determined.exec.harness",
        "model_def:DigitsTrial",
        env={"DET_HPARAMS": json.dumps(hparams), "DET_TEST_MODE": "1"},
    )
    assert "report_training_metrics(steps_completed=1," in out
    assert "report_validation_metrics(steps_completed=1," in out
    assert "checkpoint " in out and "saved at batch 1" in out


def test_harness_names_a_missing_searcher_length(tmp_path: pathlib.Path) -> None:
    ctx = tmp_path / "ctx"
    shutil.copytree(EXAMPLE, ctx)
    hparams = {"deepspeed_config": "ds_config.json", "hidden": 16, "lr": 0.1}
    proc = subprocess.run(
        [sys.executable, "-m", "determined.exec.harness", "model_def:DigitsTrial"],
        cwd=ctx,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("DET_")},
            "PYTHONPATH": os.pathsep.join([str(ROOT / "harness"), str(ROOT)]),
            "DET_HPARAMS": json.dumps(hparams),
        },
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert proc.returncode == 1
    assert "searcher.max_length, which is not set" in proc.stderr
    assert "Traceback" not in proc.stderr
