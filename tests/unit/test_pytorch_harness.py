"""``python3 -m determined.exec.harness module:Class``: loading the trial and the environment."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import uuid

import pytest

from determined import pytorch
from determined.exec import harness

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch_trial"
HPARAMS = {"global_batch_size": 32, "lr": 0.1, "hidden": 32}


@pytest.fixture(autouse=True)
def off_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    for var in ("DET_ALLOCATION_ID", "DET_HPARAMS", "DET_EXPERIMENT_CONFIG", "DET_TEST_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))


def module_in(directory: pathlib.Path, source: str) -> str:
    """Write ``source`` as a uniquely named module in ``directory``; its name."""
    name = f"trial_{uuid.uuid4().hex}"
    (directory / f"{name}.py").write_text(source)
    return name


TRIALS = """
from determined import pytorch

class NotATrial:
    pass

class Half(pytorch.PyTorchTrial):
    def __init__(self, context):
        pass

number = 3
"""


def test_a_missing_module_names_the_directory_searched(tmp_path: pathlib.Path) -> None:
    with pytest.raises(harness.TrialLoadError, match=rf"'nowhere'.*{tmp_path}"):
        harness.load_trial_class("nowhere:MyTrial", directory=str(tmp_path))


def test_a_missing_class_lists_the_trials_the_module_has(tmp_path: pathlib.Path) -> None:
    name = module_in(tmp_path, TRIALS)
    with pytest.raises(harness.TrialLoadError, match=r"no class 'MyTrial'; it defines Half"):
        harness.load_trial_class(f"{name}:MyTrial", directory=str(tmp_path))


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("NotATrial", "the class NotATrial, which is not a subclass of determined.pytorch"),
        ("number", "an object of type int, which is not a subclass"),
        ("Half", "abstract method"),
    ],
)
def test_what_is_named_must_be_a_complete_pytorch_trial(
    tmp_path: pathlib.Path, attr: str, message: str
) -> None:
    name = module_in(tmp_path, TRIALS)
    with pytest.raises(harness.TrialLoadError, match=message):
        harness.load_trial_class(f"{name}:{attr}", directory=str(tmp_path))


def test_a_missing_dependency_of_the_module_is_reported_as_such(tmp_path: pathlib.Path) -> None:
    name = module_in(tmp_path, "import not_installed_anywhere_xyz\n")
    with pytest.raises(harness.TrialLoadError, match="not_installed_anywhere_xyz"):
        harness.load_trial_class(f"{name}:T", directory=str(tmp_path))


def test_paths_and_packages_name_modules(tmp_path: pathlib.Path) -> None:
    package = tmp_path / f"pkg_{uuid.uuid4().hex}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copy(EXAMPLE / "model_def.py", package / "model_def.py")
    for spec in (f"{package.name}/model_def:DigitsTrial", f"{package.name}.model_def:DigitsTrial"):
        trial = harness.load_trial_class(spec, directory=str(tmp_path))
        assert trial.__name__ == "DigitsTrial" and issubclass(trial, pytorch.PyTorchTrial)


def test_main_reports_a_missing_class_in_one_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = module_in(tmp_path, TRIALS)
    assert harness.main([f"{name}:Missing"]) == 1
    err = capsys.readouterr().err
    assert "no class 'Missing'" in err and "Traceback" not in err


def test_main_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert harness.main([]) == 2
    assert harness.main(["a:B", "extra"]) == 2
    assert harness.main(["no_colon"]) == 1
    assert "module:ClassName" in capsys.readouterr().err
    assert harness.main(["--help"]) == 0


def test_off_cluster_hyperparameters_must_come_from_det_hparams(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(EXAMPLE / "model_def.py", tmp_path / "model_def.py")
    sys.modules.pop("model_def", None)
    assert harness.main(["model_def:DigitsTrial"]) == 1
    assert "DET_HPARAMS" in capsys.readouterr().err


def test_trial_env_off_cluster_reads_hparams_and_a_config_file(tmp_path: pathlib.Path) -> None:
    shutil.copy(EXAMPLE / "const.yaml", tmp_path / "const.yaml")
    env = pytorch.TrialEnv.from_env(
        {
            "DET_HPARAMS": json.dumps(HPARAMS),
            "DET_EXPERIMENT_CONFIG": "const.yaml",
            "DET_TRIAL_SEED": "9",
            "DET_TEST_MODE": "1",
        }
    )
    assert env.hparams == HPARAMS and env.trial_seed == 9 and env.test_mode
    assert env.config["searcher"]["max_length"] == {"batches": 200}
    assert not env.on_cluster
    with pytest.raises(pytorch.TrialEnvError, match="JSON object"):
        pytorch.TrialEnv.from_env({"DET_HPARAMS": "[1]"})
    with pytest.raises(pytorch.TrialEnvError, match=r"missing\.yaml"):
        pytorch.TrialEnv.from_env({"DET_HPARAMS": "{}", "DET_EXPERIMENT_CONFIG": "missing.yaml"})


def test_trial_env_on_cluster_comes_from_the_cluster_info() -> None:
    env = pytorch.TrialEnv.from_env(
        {
            "DET_ALLOCATION_ID": "a1",
            "DET_TRIAL_ID": "4",
            "DET_EXPERIMENT_ID": "2",
            "DET_TRIAL_SEED": "11",
            "DET_HPARAMS": json.dumps(HPARAMS),
            "DET_EXPERIMENT_CONFIG": json.dumps({"searcher": {"metric": "m"}}),
            "DET_LATEST_CHECKPOINT": "ckpt-1",
        }
    )
    assert (env.trial_id, env.experiment_id, env.trial_seed) == (4, 2, 11)
    assert env.latest_checkpoint == "ckpt-1" and env.on_cluster and not env.test_mode


def test_the_harness_runs_the_example_in_test_mode(tmp_path: pathlib.Path) -> None:
    for name in ("model_def.py", "const.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    env = {
        **os.environ,
        "DET_HPARAMS": json.dumps(HPARAMS),
        "DET_EXPERIMENT_CONFIG": "const.yaml",
        "DET_TEST_MODE": "1",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("DET_ALLOCATION_ID", None)
    proc = subprocess.run(
        [sys.executable, "-m", "determined.exec.harness", "model_def:DigitsTrial"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "report_validation_metrics(steps_completed=2" in proc.stderr
    assert "searcher operation complete: length=200" in proc.stderr
    assert len(list((tmp_path / "checkpoints").iterdir())) == 1


def test_importing_determined_does_not_import_torch() -> None:
    code = (
        "import sys, determined, determined.core, determined.exec.harness; "
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
