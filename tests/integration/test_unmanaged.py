"""Unmanaged runs: a plain `python script.py` off the cluster that calls core_v2.init()
creates an experiment and a trial on the master and reports into them, as Determined's
unmanaged mode does; the SDK and the CLI read them back."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from determined.common import errors
from determined.experimental import client
from tests.cluster import Cluster

SCRIPT = """
import sys

from determined.experimental import core_v2

core_v2.init(
    config=core_v2.DefaultConfig(name="offcluster", hparams={"lr": 0.1}, labels=["laptop"]),
    unmanaged=True,
)
info = core_v2.info
print("TRIAL", info.trial.experiment_id, info.trial.trial_id, flush=True)
for step in (1, 2, 3):
    core_v2.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
core_v2.train.report_validation_metrics(steps_completed=3, metrics={"loss": 0.25})
with core_v2.checkpoint.store_path({"steps_completed": 3}) as (path, uuid):
    (path / "weights.txt").write_text("w=3")
print("CHECKPOINT", uuid, flush=True)
stored = core_v2.train.set_metadata({"phase": "done", "epochs": [1, 2]})
assert stored == core_v2.train.get_metadata() == {"phase": "done", "epochs": [1, 2]}, stored
if sys.argv[1:] == ["fail"]:
    raise RuntimeError("the script failed")
core_v2.close()
"""


def _python(
    cluster: Cluster, tmp_path: pathlib.Path, source: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, list[str]]]:
    """Run ``source`` as a plain script off the cluster (as the cluster's admin); its
    process and its output lines by their first word."""
    (tmp_path / "script.py").write_text(textwrap.dedent(source))
    proc = subprocess.run(
        [sys.executable, "script.py", *args],
        env=cluster.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines() if line}
    assert "TRIAL" in lines and "CHECKPOINT" in lines, proc
    return proc, lines


def _run(cluster: Cluster, tmp_path: pathlib.Path, *args: str) -> tuple[int, int, str, str]:
    proc, lines = _python(cluster, tmp_path, SCRIPT, *args)
    exp_id, trial_id = (int(x) for x in lines["TRIAL"])
    return exp_id, trial_id, lines["CHECKPOINT"][0], proc.stderr if proc.returncode else ""


@pytest.mark.slow
def test_a_script_off_the_cluster_reports_an_unmanaged_run(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id, trial_id, uuid, failure = _run(cluster, tmp_path)
    assert failure == ""

    described = cluster.experiment(exp_id)
    assert described["unmanaged"] is True
    assert described["state"] in ("STATE_COMPLETED", "COMPLETED")
    assert described["name"] == "offcluster" and described["labels"] == ["laptop"]
    listed = cluster.det("experiment", "list").stdout
    row = next(r for r in listed.splitlines() if r.split()[0] == str(exp_id))
    assert "offcluster" in row and "(unmanaged)" in row
    grown = cluster.det("experiment", "continue", str(exp_id), "--max-trials", "3", check=False)
    assert grown.returncode == 1 and "is unmanaged" in grown.stderr
    rerun = cluster.det("experiment", "continue", str(exp_id), check=False)
    assert rerun.returncode == 1 and "is unmanaged" in rerun.stderr

    det = client.Determined(master=cluster.address, user="admin", password=cluster.admin_password)
    try:
        trial = det.get_trial(trial_id)
        assert trial.state == client.TrialState.COMPLETED
        assert trial.hparams == {"lr": 0.1}
        assert trial.metadata == {"phase": "done", "epochs": [1, 2]}
        training = [(m.steps_completed, m.metrics) for m in trial.iter_metrics("training")]
        assert training == [(1, {"loss": 1.0}), (2, {"loss": 0.5}), (3, {"loss": 1.0 / 3})]
        validation = [m.metrics for m in trial.iter_metrics("validation")]
        assert validation == [{"loss": 0.25}]
        (ckpt,) = trial.list_checkpoints()
        assert ckpt.uuid == uuid and ckpt.metadata.get("steps_completed") == 3
        restored = pathlib.Path(ckpt.download(str(tmp_path / "restored")))
        assert (restored / "weights.txt").read_text() == "w=3"
    finally:
        det.close()

    # Nothing was scheduled: no agent ran a task of it.
    tasks = json.loads(cluster.det("task", "list", "--json").stdout)
    summaries = tasks.values() if isinstance(tasks, dict) else tasks
    assert not [t for t in summaries if str(t["task_id"]).startswith(f"{exp_id}.")]


@pytest.mark.slow
def test_a_failing_script_ends_its_unmanaged_run_in_error(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id, trial_id, _, failure = _run(cluster, tmp_path, "fail")
    assert "the script failed" in failure
    assert cluster.state(exp_id) == "ERROR"
    (trial,) = cluster.trials(exp_id)
    assert trial["id"] == trial_id and "ERROR" in str(trial["state"])


def test_core_v2_outside_a_trial_without_a_config_says_what_to_pass() -> None:
    from determined.experimental import core_v2

    with pytest.raises(errors.InvalidArgument, match=r"core_v2\.Config\(name=\.\.\.\)"):
        core_v2.init()
    assert core_v2.train is None


WAITER = """
import pathlib
import time

from determined.experimental import core_v2

core_v2.init(config=core_v2.Config(name="waiter"))
core_v2.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
print("TRIAL", core_v2.info.trial.experiment_id, core_v2.info.trial.trial_id, flush=True)
deadline = time.monotonic() + 60
while not pathlib.Path("go").exists() and time.monotonic() < deadline:
    time.sleep(0.1)
core_v2.train.report_training_metrics(steps_completed=2, metrics={"loss": 0.5})
core_v2.close()
"""


@pytest.mark.slow
def test_killing_an_unmanaged_run_ends_it_and_its_script_hears_so(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "waiter.py").write_text(textwrap.dedent(WAITER))
    proc = subprocess.Popen(
        [sys.executable, "waiter.py"],
        env=cluster.env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        assert first[:1] == ["TRIAL"], (first, proc.stderr.read() if proc.stderr else "")
        exp_id = int(first[1])
        paused = cluster.det("experiment", "pause", str(exp_id), check=False)
        assert paused.returncode == 1 and "cannot pause it" in paused.stderr
        cluster.det("experiment", "kill", str(exp_id))
        assert cluster.wait_state(exp_id, "CANCELED", timeout=30) == "CANCELED"
        (tmp_path / "go").write_text("")
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode != 0 and "has ended" in err
    (trial,) = cluster.trials(exp_id)
    assert "CANCELED" in str(trial["state"])


RESUMABLE = """
import sys

from determined.experimental import core_v2

core_v2.init(
    config=core_v2.Config(
        name="resumable",
        hparams={"lr": float(sys.argv[2])},
        external_experiment_id="my-study",
        external_trial_id="run-a",
    )
)
info = core_v2.info
start = info.trial.steps_completed
print("TRIAL", info.trial.experiment_id, info.trial.trial_id, info.trial.trial_run_id, flush=True)
print("FROM", info.latest_checkpoint, start, info.trial.hparams["lr"], flush=True)
for step in range(start + 1, start + 3):
    core_v2.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
with core_v2.checkpoint.store_path({"steps_completed": start + 2}) as (path, uuid):
    (path / "step").write_text(str(start + 2))
print("CHECKPOINT", uuid, flush=True)
if sys.argv[1] == "crash":
    raise RuntimeError("the laptop's battery died")
core_v2.close()
"""


@pytest.mark.slow
def test_a_crashed_unmanaged_run_resumes_by_its_external_ids(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    def run(*args: str) -> dict[str, list[str]]:
        return _python(cluster, tmp_path, RESUMABLE, *args)[1]

    first = run("crash", "0.1")
    exp_id, trial_id, run_id = (int(x) for x in first["TRIAL"])
    assert first["FROM"] == ["None", "0", "0.1"]
    assert cluster.state(exp_id) == "ERROR"

    second = run("finish", "0.9")  # other hparams: the trial keeps its own
    assert [int(x) for x in second["TRIAL"]] == [exp_id, trial_id, run_id + 1]
    assert second["FROM"] == [first["CHECKPOINT"][0], "2", "0.1"]
    assert cluster.state(exp_id) == "COMPLETED"
    (trial,) = cluster.trials(exp_id)
    assert trial["id"] == trial_id and "COMPLETED" in str(trial["state"])
    det = client.Determined(master=cluster.address, user="admin", password=cluster.admin_password)
    try:
        steps = [m.steps_completed for m in det.get_trial(trial_id).iter_metrics("training")]
    finally:
        det.close()
    assert steps == [1, 2, 3, 4]
