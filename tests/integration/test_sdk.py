"""The Python SDK (``determined.experimental.client``) against a real local cluster.

One grid experiment of two trials is created through the SDK when the module starts; the
tests then read it back the way a script would: its trials, metrics, logs and checkpoints,
and download the best checkpoint from the cluster's storage. Control (pause, activate,
kill), bad ids, a missing login and a dead master each have a test of their own.
"""

from __future__ import annotations

import json
import logging
import pathlib
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from determined.common import errors
from determined.experimental import client
from tests.cluster import Cluster, cluster_fixture, free_port, wait_until
from tests.s3server import ACCESS_KEY, SECRET_KEY, S3Server

# Determined's deprecated names (logs(), top_checkpoint()) are used on purpose: they warn.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

TRAIN = """
import pathlib

import determined as det

with det.core.init() as core:
    scale = det.get_cluster_info().trial.hparams["scale"]
    print(f"hello from scale {scale}", flush=True)
    for op in core.searcher.operations():
        for step in range(1, op.length + 1):
            loss = scale / step
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
            if step % 2 == 0:
                val = {"val_loss": loss, "acc": step * scale}
                core.train.report_validation_metrics(steps_completed=step, metrics=val)
                meta = {"steps_completed": step, "scale": scale}
                with core.checkpoint.store_path(meta) as (path, _):
                    pathlib.Path(path, "weights").write_text(f"{scale}:{step}")
        op.report_completed(scale / op.length)
"""

CONFIG = {
    "name": "sdk-grid",
    "entrypoint": "python3 train.py",
    "hyperparameters": {"scale": {"type": "categorical", "vals": [1, 3]}},
    "searcher": {"name": "grid", "metric": "val_loss", "smaller_is_better": True, "max_length": 4},
    "max_restarts": 0,
    "resources": {"slots_per_trial": 1},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("sdk"), slots=2)


@pytest.fixture(scope="module")
def grid(det: client.Determined, tmp_path_factory: pytest.TempPathFactory) -> client.Experiment:
    model_dir = tmp_path_factory.mktemp("grid")
    (model_dir / "train.py").write_text(TRAIN)
    exp = det.create_experiment(CONFIG, str(model_dir))
    assert exp.wait(interval=0.5, timeout=180) == client.ExperimentState.COMPLETED
    return exp


def test_created_experiment_completes_with_one_trial_per_grid_point(
    grid: client.Experiment,
) -> None:
    trials = grid.list_trials()
    assert sorted(t.hparams["scale"] for t in trials) == [1, 3]
    assert all(t.state == client.TrialState.COMPLETED for t in trials)
    assert grid.config["searcher"]["metric"] == "val_loss"
    assert grid.name == "sdk-grid"


def test_trials_sort_by_best_validation(grid: client.Experiment) -> None:
    best_first = grid.list_trials(sort_by=client.TrialSortBy.BEST_VALIDATION_METRIC)
    assert [t.hparams["scale"] for t in best_first] == [1, 3]
    worst_first = grid.list_trials(
        sort_by=client.TrialSortBy.BEST_VALIDATION_METRIC, order_by=client.OrderBy.DESC
    )
    assert [t.hparams["scale"] for t in worst_first] == [3, 1]


def test_get_experiment_and_list_experiments_find_it(
    det: client.Determined, grid: client.Experiment
) -> None:
    again = det.get_experiment(grid.id)
    assert again.state == client.ExperimentState.COMPLETED
    assert again.config["hyperparameters"]["scale"]["vals"] == [1, 3]
    assert grid.id in [e.id for e in det.list_experiments()]
    assert [e.id for e in det.list_experiments(name="sdk-grid")] == [grid.id]
    running = det.list_experiments(states=[client.ExperimentState.ACTIVE])
    assert grid.id not in [e.id for e in running]


def test_iter_metrics_reads_each_group_in_order(
    det: client.Determined, grid: client.Experiment
) -> None:
    trial = next(t for t in grid.list_trials() if t.hparams["scale"] == 3)
    training = list(det.get_trial(trial.id).iter_metrics("training"))
    assert [m.steps_completed for m in training] == [1, 2, 3, 4]
    assert [m.metrics["loss"] for m in training] == [3.0, 1.5, 1.0, 0.75]
    assert all(m.trial_id == trial.id and m.group == "training" for m in training)
    validation = list(trial.iter_metrics("validation"))
    assert [(m.steps_completed, m.metrics["val_loss"]) for m in validation] == [(2, 1.5), (4, 0.75)]
    summary = trial.summary_metrics
    assert summary["avg_metrics"]["loss"]["count"] == 4
    assert summary["validation_metrics"]["val_loss"]["min"] == 0.75
    assert summary["validation_metrics"]["acc"]["last"] == 12


def test_logs_are_the_trials_output(grid: client.Experiment) -> None:
    trial = next(t for t in grid.list_trials() if t.hparams["scale"] == 1)
    lines = list(trial.logs())
    assert any("hello from scale 1" in line for line in lines)
    assert all(line.endswith("\n") for line in lines)
    assert list(trial.logs(tail=1)) == lines[-1:]
    assert any("hello from scale 1" in line for line in trial.iter_logs(stdtypes=["stdout"]))
    assert not any("hello" in line for line in trial.iter_logs(stdtypes=["stderr"]))
    assert list(trial.iter_logs(timestamp_after=2**40)) == []
    assert list(trial.iter_logs(timestamp_before="2000-01-01T00:00:00Z")) == []
    with pytest.raises(errors.InvalidArgument, match="RFC 3339"):
        list(trial.iter_logs(timestamp_after="yesterday"))


def test_top_checkpoint_is_the_best_validation_and_downloads(
    grid: client.Experiment, tmp_path: pathlib.Path
) -> None:
    best = grid.top_checkpoint()
    assert best.metadata["scale"] == 1 and best.metadata["steps_completed"] == 4
    assert best.state == client.CheckpointState.COMPLETED
    assert best.training is not None and best.training.validation_metrics["avgMetrics"] == {
        "val_loss": 0.25,
        "acc": 4,
    }
    path = best.download(tmp_path / "best")
    assert pathlib.Path(path, "weights").read_text() == "1:4"
    assert json.loads(pathlib.Path(path, "metadata.json").read_text())["scale"] == 1
    by_acc = grid.top_checkpoint(sort_by="acc", smaller_is_better=False)
    assert (by_acc.metadata["scale"], by_acc.metadata["steps_completed"]) == (3, 4)


def test_list_checkpoints_sorts_by_metric_or_field(
    det: client.Determined, grid: client.Experiment
) -> None:
    # The default retention keeps each trial's best and latest checkpoint: step 4 for both.
    ranked = grid.list_checkpoints()
    assert [c.training.searcher_metric for c in ranked if c.training] == [0.25, 0.75]
    by_step = grid.list_checkpoints(
        sort_by=client.CheckpointSortBy.BATCH_NUMBER, order_by=client.OrderBy.DESC, max_results=2
    )
    assert [c.steps_completed for c in by_step] == [4, 4]
    trial = det.get_trial(ranked[0].training.trial_id if ranked[0].training else 0)
    # A trial's list has every state: the retention policy's DELETED step-2 checkpoint
    # comes after the kept one (a worse validation).
    listed = trial.list_checkpoints()
    assert [c.uuid for c in listed if c.state == client.CheckpointState.COMPLETED] == [
        c.uuid for c in ranked if c.training and c.training.trial_id == trial.id
    ]
    assert [(c.steps_completed, c.state) for c in listed] == [
        (4, client.CheckpointState.COMPLETED),
        (2, client.CheckpointState.DELETED),
    ]
    assert trial.list_checkpoints(max_results=1)[0].uuid == ranked[0].uuid
    same = det.get_checkpoint(ranked[0].uuid)
    assert same.get_metadata() == ranked[0].metadata


def test_checkpoint_metadata_is_added_and_removed_on_the_master(
    det: client.Determined, grid: client.Experiment
) -> None:
    ckpt = grid.list_checkpoints(max_results=1)[0]
    ckpt.add_metadata({"note": "best so far", "tags": ["a"]})
    assert det.get_checkpoint(ckpt.uuid).metadata["note"] == "best so far"
    assert ckpt.metadata["steps_completed"] == 4
    ckpt.remove_metadata(["note"])
    assert "note" not in det.get_checkpoint(ckpt.uuid).get_metadata()
    assert ckpt.metadata["tags"] == ["a"]
    with pytest.raises(errors.NotFound, match="no-such-uuid"):
        client.Checkpoint(det._session, "no-such-uuid").add_metadata({"x": 1})


PREEMPTIBLE = pathlib.Path(__file__).parent / "contexts" / "preemptible"


def test_pause_activate_and_kill(det: client.Determined) -> None:
    config = {
        "name": "sdk-control",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 100000},
        "max_restarts": 0,
    }
    exp = det.create_experiment(config, str(PREEMPTIBLE))
    trial = exp.await_first_trial(timeout=60)
    wait_until(lambda: any("step 2" in line for line in trial.logs()), 60, "the trial to train")
    exp.pause()
    wait_until(
        lambda: det.get_experiment(exp.id).state == client.ExperimentState.PAUSED, 60, "pause"
    )
    with pytest.raises(ValueError, match="paused"):
        exp.wait(interval=0.2)
    exp.activate()
    # Followed logs arrive while the trial runs; should the resume never come, the guard
    # kills the experiment, which ends the stream.
    guard = threading.Timer(60, exp.kill)
    guard.start()
    try:
        for line in trial.logs(follow=True):
            if line.startswith("resumed at step"):
                break
        else:
            raise AssertionError("the log stream ended without the resume")
    finally:
        guard.cancel()
    exp.kill()
    assert exp.wait(interval=0.2, timeout=60) == client.ExperimentState.CANCELED
    assert trial.wait(interval=0.2, timeout=30) == client.TrialState.CANCELED
    # Following an ended trial gives its whole log, then ends.
    followed = list(trial.logs(follow=True))
    assert followed == list(trial.logs())
    assert any(line.startswith("preempted at step") for line in followed)


def test_unknown_ids_are_named_in_the_error(det: client.Determined) -> None:
    with pytest.raises(errors.NotFound, match="987654"):
        det.get_experiment(987654)
    with pytest.raises(errors.NotFound, match="987653"):
        det.get_trial(987653)
    with pytest.raises(errors.NotFound, match="no-such-uuid"):
        det.get_checkpoint("no-such-uuid")
    with pytest.raises(errors.InvalidArgument, match="positive integer"):
        det.get_experiment(0)


def test_a_bad_config_is_refused_before_anything_is_created(
    det: client.Determined, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(errors.InvalidArgument, match=r"missing\.yaml does not exist"):
        det.create_experiment("missing.yaml", str(tmp_path))
    with pytest.raises(errors.InvalidArgument, match="searcher"):
        det.create_experiment({"entrypoint": "true", "searcher": {"name": "nope"}}, str(tmp_path))
    with pytest.raises(errors.InvalidArgument, match="does not exist"):
        det.create_experiment(CONFIG, str(tmp_path / "absent"))
    # Without a model_dir nothing is uploaded: the script the entrypoint names may be in the
    # image, so the experiment is created, with a warning, as Determined's SDK does.
    with caplog.at_level(logging.WARNING, logger="determined.experimental"):
        exp = det.create_experiment(CONFIG)
    assert any("train.py is not in the context directory" in r.getMessage() for r in caplog.records)
    exp.kill()


def test_config_from_a_yaml_file_or_yaml_text(
    det: client.Determined, tmp_path: pathlib.Path
) -> None:
    text = textwrap.dedent(
        """\
        name: from-yaml
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        """
    )
    path = tmp_path / "const.yaml"
    path.write_text(text)
    (tmp_path / "train.py").write_text("print('never run')\n")
    made = [
        det.create_experiment(path, str(tmp_path), activate=False),
        det.create_experiment(str(path), str(tmp_path), activate=False),
        det.create_experiment(text, str(tmp_path), activate=False),
    ]
    for exp in made:
        assert (exp.name, exp.state) == ("from-yaml", client.ExperimentState.PAUSED)
        exp.kill()
        assert exp.wait(interval=0.2, timeout=60) == client.ExperimentState.CANCELED


def _script(cluster: Cluster, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a user's script would be run, with the cluster's environment minus
    the DET_USER/DET_PASS login (each test adds what it means to give)."""
    full = {k: v for k, v in cluster.env.items() if k not in ("DET_USER", "DET_PASS")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_a_login_the_error_says_how_to_log_in(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    out = _script(
        cluster,
        """
        from determined.common import errors
        from determined.experimental import client
        try:
            client.list_experiments()
        except errors.Unauthenticated as e:
            print("refused:", e)
        """,
        XDG_CONFIG_HOME=str(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    assert f"not logged in to {cluster.address}" in out.stdout
    assert "det user login" in out.stdout and "client.login()" in out.stdout


def test_a_det_user_login_session_is_used_without_a_password(
    cluster: Cluster, tmp_path: pathlib.Path, grid: client.Experiment
) -> None:
    login = subprocess.run(
        [sys.executable, "-m", "pydet.cli", "user", "login", "admin"],
        env={**cluster.env, "XDG_CONFIG_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert login.returncode == 0, login.stderr
    out = _script(
        cluster,
        f"""
        from determined.experimental import client
        print(client.get_experiment({grid.id}).state.name)
        """,
        XDG_CONFIG_HOME=str(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "COMPLETED"
    # The SDK's connection and loop thread go quietly at exit.
    assert out.stderr == ""


def test_login_with_a_password_and_environment_credentials(
    cluster: Cluster, tmp_path: pathlib.Path, grid: client.Experiment
) -> None:
    code = f"""
        import os
        from determined.experimental import client
        {{}}
        print([e.id for e in client.list_experiments(experiment_ids=[{grid.id}])])
        """
    explicit = _script(
        cluster,
        code.format(
            f"client.login(master={cluster.address!r}, user='admin', "
            f"password={cluster.admin_password!r})"
        ),
        XDG_CONFIG_HOME=str(tmp_path / "a"),
    )
    assert explicit.stdout.strip() == f"[{grid.id}]", explicit.stderr
    from_env = _script(
        cluster,
        code.format(""),
        XDG_CONFIG_HOME=str(tmp_path / "b"),
        DET_USER="admin",
        DET_PASS=cluster.admin_password,
    )
    assert from_env.stdout.strip() == f"[{grid.id}]", from_env.stderr


def test_a_master_that_is_not_running_is_named() -> None:
    address = f"127.0.0.1:{free_port()}"
    d = client.Determined(master=address, user="admin", password="x")
    try:
        with pytest.raises(errors.Unavailable, match=f"cannot reach the master at {address}") as e:
            d.get_experiment(1)
        assert "Pass master= to client.login() or set DET_MASTER" in str(e.value)
    finally:
        d.close()


def _run_script(
    det: client.Determined, model_dir: pathlib.Path, name: str, script: str
) -> client.Trial:
    """Run ``script`` as a one-trial experiment; its trial, once it has completed."""
    (model_dir / name).write_text(script)
    config = {
        "name": name,
        "entrypoint": f"python3 {name}",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "max_restarts": 0,
    }
    exp = det.create_experiment(config, str(model_dir))
    state = exp.wait(interval=0.3, timeout=120)
    trial = exp.list_trials()[0]
    assert state == client.ExperimentState.COMPLETED, "".join(trial.logs())
    return trial


GENERIC_METRICS = """
import determined as det
from determined.common import util as det_util

groups = [det_util._LEGACY_TRAINING, det_util._LEGACY_VALIDATION, "group_b", "inf%er en/ce"]
with det.core.init() as core:
    for step in range(1, 9):
        group = groups[(step - 1) % len(groups)]
        metrics = {f"z{group}/me.t r%i]\\\\c_{i}": step * (i + 1) for i in range(2)}
        core.train.report_metrics(group=group, steps_completed=step, metrics=metrics)
"""


def test_generic_metric_groups_as_determineds_fixture_reports_them(
    det: client.Determined, tmp_path: pathlib.Path
) -> None:
    trial = _run_script(det, tmp_path, "generic.py", GENERIC_METRICS)
    for offset, group in enumerate(["training", "validation", "group_b", "inf%er en/ce"]):
        reports = list(trial.iter_metrics(group))
        assert [m.steps_completed for m in reports] == [offset + 1, offset + 5], group
        last = reports[-1].metrics
        assert last == {
            f"z{group}/me.t r%i]\\c_0": offset + 5,
            f"z{group}/me.t r%i]\\c_1": 2 * (offset + 5),
        }
    assert "inf%er en/ce" in trial.summary_metrics


PROFILER_SYNC = """
import torch

from determined.experimental import core_v2

core_v2.init(defaults=core_v2.DefaultConfig(name="ignored-in-a-trial"))
trace_dir = core_v2.train.get_tensorboard_path()
before = len(list(trace_dir.iterdir()))
with torch.profiler.profile(
    activities=[torch.profiler.ProfilerActivity.CPU],
    on_trace_ready=torch.profiler.tensorboard_trace_handler(str(trace_dir)),
):
    state = torch.rand(20, 20)
    for _ in range(50):
        state = torch.matmul(state, torch.rand(20, 20))
        state = state / torch.linalg.norm(state)
print("new traces:", len(list(trace_dir.iterdir())) - before, flush=True)
core_v2.train.report_training_metrics(steps_completed=1, metrics={"norm": 1.0})
core_v2.close()
assert core_v2.train is None
"""


def test_core_v2_in_a_trial_reports_through_module_objects(
    det: client.Determined, tmp_path: pathlib.Path
) -> None:
    # Not profile.py: that would shadow the standard library's profile module.
    trial = _run_script(det, tmp_path, "profiler_sync.py", PROFILER_SYNC)
    assert [m.metrics for m in trial.iter_metrics("training")] == [{"norm": 1.0}]
    assert "new traces: 1\n" in list(trial.logs())


def test_a_checkpoint_in_s3_downloads_with_this_machines_credentials(
    det: client.Determined,
    s3: S3Server,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = s3.bucket()
    config = {
        **CONFIG,
        "name": "sdk-s3",
        "hyperparameters": {"scale": 5},
        "searcher": {**CONFIG["searcher"], "name": "single", "max_length": 2},
        "checkpoint_storage": s3.storage(bucket, prefix="sdk"),
    }
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "train.py").write_text(TRAIN)
    exp = det.create_experiment(config, str(model_dir))
    assert exp.wait(interval=0.3, timeout=120) == client.ExperimentState.COMPLETED
    best = exp.top_checkpoint()
    # The master does not show the bucket's secret key: the SDK reads with this machine's
    # own credentials, as a user's script would.
    assert best.storage["type"] == "s3" and best.storage.get("secret_key") != SECRET_KEY
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    path = best.download(tmp_path / "from-s3")
    assert pathlib.Path(path, "weights").read_text() == "5:2"
