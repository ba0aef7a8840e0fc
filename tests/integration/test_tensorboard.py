"""`det tensorboard`: a trial's TensorBoard files (metrics written in AUTO mode and files it
uploads itself) served by a real TensorBoard task on an agent, through the master's proxy."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.cluster import Cluster, wait_until
from tests.s3server import S3Server

pytest.importorskip("tensorboard")

TRAIN = """
import pathlib
from determined import core

with core.init() as ctx:
    for step in (1, 2, 3):
        ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 2.0**-step})
    ctx.train.report_validation_metrics(steps_completed=3, metrics={"accuracy": 0.9})
    tb = ctx.train.get_tensorboard_path()
    (tb / "notes.txt").write_text("kept")
    (tb / "scratch.tmp").write_text("left out")
    ctx.train.upload_tensorboard_files(
        selector=lambda p: p.suffix != ".tmp",
        mangler=lambda p, rank: p.with_name(f"rank{rank}-{p.name}"),
    )
"""


def _completed_trial(
    cluster: Cluster, tmp_path: pathlib.Path, train: str, metric: str, extra: str = ""
) -> tuple[int, int]:
    """Run ``train`` as a one-trial experiment to completion: its id and its trial's."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(train)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "entrypoint: python3 train.py\n"
        f"searcher: {{name: single, {metric}, max_length: 1}}\n{extra}\n"
    )
    exp_id = cluster.create(cfg, ctx)
    cluster.wait_state(exp_id, "COMPLETED", timeout=120)
    (trial,) = cluster.trials(exp_id)
    return exp_id, int(trial["id"])


def _tensorboards(cluster: Cluster) -> list[dict[str, Any]]:
    return list(json.loads(cluster.det("tensorboard", "list", "--json").stdout))


@pytest.mark.slow
def test_tensorboard_serves_a_trials_metrics_through_the_master(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id, trial_id = _completed_trial(cluster, tmp_path, TRAIN, "metric: accuracy")

    # Determined's layout under the experiment's (here the master's default) storage.
    (trial_dir,) = (cluster.root / "master").rglob(
        f"tensorboard/experiment/{exp_id}/trial/{trial_id}"
    )
    uploaded = sorted(p.name for p in trial_dir.iterdir())
    assert "rank0-notes.txt" in uploaded and not any("scratch" in n for n in uploaded)
    assert any(n.startswith("events.out.tfevents") for n in uploaded), uploaded

    out = cluster.det("tensorboard", "start", str(exp_id), "--no-browser").stdout
    match = re.search(r"TensorBoard is running at: (\S+)/proxy/([0-9a-f-]+)/", out)
    assert match is not None, out
    assert match.group(1) == cluster.url
    tb_id = match.group(2)
    (listed,) = _tensorboards(cluster)
    assert listed["id"] == tb_id and listed["state"] == "RUNNING"
    assert listed["experiment_ids"] == [exp_id] and listed["trial_ids"] == [trial_id]
    assert tb_id in cluster.det("tensorboard", "list").stdout
    (shown,) = cluster.get("/api/v1/tensorboards")["tensorboards"]  # the WebUI's list
    assert shown["id"] == tb_id and shown["serviceAddress"] == f"/proxy/{tb_id}/"
    opened = cluster.det("tensorboard", "open", tb_id, "--no-browser").stdout
    assert f"/proxy/{tb_id}/" in opened

    task_log = cluster.det("tensorboard", "logs", tb_id).stdout
    assert f"TensorBoard is ready at /proxy/{tb_id}/" in task_log, task_log
    assert "TensorBoard is ready" in cluster.det("task", "logs", tb_id).stdout
    # Determined's log flags, on a TensorBoard's lines too.
    last_two = cluster.det("tensorboard", "logs", tb_id, "--json", "--tail", "2").stdout
    assert [json.loads(line)["task_id"] for line in last_two.splitlines()] == [tb_id, tb_id]
    assert cluster.det("tensorboard", "logs", tb_id, "--search", "no such line").stdout == ""
    assert "TensorBoard is ready" in cluster.det(
        "tensorboard", "logs", tb_id, "--source", "agent", "--stdtype", "stdout", "--stdtype",
        "stderr",
    ).stdout  # fmt: skip
    # Its priority changes while it lives, held to the tasks' config policies.
    cluster.det("tensorboard", "set", "priority", tb_id, "30")
    assert _tensorboards(cluster)[0]["priority"] == 30
    policy = tmp_path / "policy.yaml"
    policy.write_text("constraints: {priority_limit: 20}\n")
    cluster.det("config-policies", "set", "tasks", str(policy))
    refused = cluster.det("tensorboard", "set", "priority", tb_id, "10", check=False)
    assert refused.returncode == 1 and "requested priority [10] exceeds limit" in refused.stderr
    cluster.det("config-policies", "delete", "tasks")
    config = json.loads(cluster.det("tensorboard", "config", tb_id, "--json").stdout)
    assert config["experiment_ids"] == [exp_id] and config["trial_ids"] == [trial_id]
    assert (
        tb_id
        in cluster.det("tensorboard", "list", "--sort-by", "state", "--order-by", "desc").stdout
    )
    following = subprocess.Popen(
        [sys.executable, "-m", "pydet.cli", "tensorboard", "logs", tb_id, "-f"],
        env=cluster.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    tasks = json.loads(cluster.det("task", "list", "--json").stdout)
    (summary,) = [t for t in tasks.values() if t["task_id"] == tb_id]
    assert summary["slots_needed"] == 0 and summary["name"] == f"TensorBoard ({tb_id[:8]})"
    status, page = cluster.fetch(f"/proxy/{tb_id}/", cluster.token)
    assert status == 200 and b"TensorBoard" in page

    def tags() -> dict[str, Any] | None:
        status, body = cluster.fetch(f"/proxy/{tb_id}/data/plugin/scalars/tags", cluster.token)
        found = json.loads(body) if status == 200 else {}
        return found if found.get(f"trial_{trial_id}") else None

    runs = wait_until(tags, 60, "TensorBoard to load the trial's scalars")
    assert {"loss", "val_accuracy"} <= set(runs[f"trial_{trial_id}"])
    status, body = cluster.fetch(
        f"/proxy/{tb_id}/data/plugin/scalars/scalars?run=trial_{trial_id}&tag=loss",
        cluster.token,
    )
    assert status == 200
    assert [(step, value) for _, step, value in json.loads(body)] == [
        (1, 0.5),
        (2, 0.25),
        (3, 0.125),
    ]

    # No session, or another user's: refused.
    assert cluster.fetch(f"/proxy/{tb_id}/", None)[0] == 401
    cluster.det("user", "create", "bob", "--password", "bob-secret-1")
    bob = cluster.login("bob", "bob-secret-1")
    assert cluster.fetch(f"/proxy/{tb_id}/", bob)[0] == 403

    assert f"Killed tensorboard {tb_id}" in cluster.det("tensorboard", "kill", tb_id).stdout
    wait_until(lambda: not _tensorboards(cluster), 30, "the TensorBoard to end")
    # A follower stops once the TensorBoard has ended, having printed its lines.
    followed, _ = following.communicate(timeout=60)
    assert following.returncode == 0 and "TensorBoard is ready" in followed
    assert tb_id not in cluster.det("tensorboard", "list").stdout
    assert cluster.fetch(f"/proxy/{tb_id}/", cluster.token)[0] == 404
    gone = cluster.det("tensorboard", "open", tb_id, "--no-browser", check=False)
    assert gone.returncode == 1 and "STATE_TERMINATED" in gone.stderr

    # Deleting the experiment removes its TensorBoard files with its checkpoints.
    cluster.det("experiment", "delete", str(exp_id), "--yes")
    wait_until(lambda: not trial_dir.exists(), 30, "the experiment's TensorBoard files to go")
    assert not trial_dir.parent.parent.exists()


def test_tensorboard_start_names_what_is_wrong(cluster: Cluster) -> None:
    proc = cluster.det("tensorboard", "start", "--no-browser", check=False)
    assert proc.returncode == 1 and "--trial-ids" in proc.stderr
    proc = cluster.det("tensorboard", "start", "999", "--no-browser", check=False)
    assert proc.returncode == 1 and "experiment 999 not found" in proc.stderr
    proc = cluster.det("tensorboard", "logs", "no-such-id", check=False)
    assert proc.returncode == 1 and "tensorboard no-such-id not found" in proc.stderr
    proc = cluster.det("tensorboard", "kill", "no-such-id", check=False)
    assert proc.returncode == 1 and "tensorboard no-such-id not found" in proc.stderr


def _post_status(cluster: Cluster, path: str, body: Any) -> tuple[int, str]:
    try:
        with cluster.urlopen(cluster.request(path, method="POST", body=body), timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_json_api_starts_tensorboards_and_names_bad_input(cluster: Cluster) -> None:
    status, text = _post_status(cluster, "/api/v1/tensorboards", {"experiment_ids": ["x"]})
    assert status == 400 and "experiment_ids[0]: expected an integer" in text
    status, text = _post_status(cluster, "/api/v1/tensorboards", {"experimentIds": 3})
    assert status == 400 and "experimentIds: expected an array" in text
    status, text = _post_status(cluster, "/api/v1/tensorboards", {"experiment_ids": [999]})
    assert status == 404 and "experiment 999 not found" in text
    status, text = _post_status(cluster, "/api/v1/tensorboards", {})
    assert status == 400 and "name at least one experiment or trial" in text
    status, text = _post_status(cluster, "/api/v1/tensorboards/nope/kill", {})
    assert status == 404 and "tensorboard nope not found" in text


S3_TRAIN = """
from determined import core

with core.init() as ctx:
    ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
"""


@pytest.mark.slow
def test_a_tensorboard_reads_trials_whose_storage_is_s3(
    cluster: Cluster, s3: S3Server, tmp_path: pathlib.Path
) -> None:
    bucket = s3.bucket()
    storage = s3.storage(bucket, prefix="runs")
    exp_id, trial_id = _completed_trial(
        cluster, tmp_path, S3_TRAIN, "metric: loss", f"checkpoint_storage: {json.dumps(storage)}"
    )
    keys = s3.objects(bucket, prefix="runs/")
    layout = f"/tensorboard/experiment/{exp_id}/trial/{trial_id}/events.out.tfevents."
    assert any(layout in k for k in keys), keys

    tb_id = cluster.det("tensorboard", "start", str(exp_id), "--detach").stdout.strip()

    def tags() -> dict[str, Any] | None:
        status, body = cluster.fetch(f"/proxy/{tb_id}/data/plugin/scalars/tags", cluster.token)
        found = json.loads(body) if status == 200 else {}
        return found if found.get(f"trial_{trial_id}") else None

    runs = wait_until(tags, 90, "TensorBoard to load the trial's scalars from S3")
    assert "loss" in runs[f"trial_{trial_id}"]
    cluster.det("tensorboard", "kill", tb_id)
    wait_until(lambda: not _tensorboards(cluster), 30, "the TensorBoard to end")


@pytest.mark.slow
def test_a_tensorboard_takes_a_config_a_context_and_a_workspace(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id, _ = _completed_trial(cluster, tmp_path, TRAIN, "metric: accuracy")
    cluster.det("workspace", "create", "viz")
    ctx = tmp_path / "tbctx"
    ctx.mkdir()
    (ctx / "notes.md").write_text("from the context\n")
    extra = tmp_path / "extra.txt"
    extra.write_text("included\n")
    config = tmp_path / "tb.yaml"
    config.write_text("environment:\n  environment_variables: [TB_GREETING=hi]\n")
    out = cluster.det(
        "tensorboard",
        "start",
        str(exp_id),
        "--no-browser",
        "-w",
        "viz",
        "-c",
        str(ctx),
        "-i",
        str(extra),
        "--config-file",
        str(config),
        "--config",
        "description=my board",
        "--config",
        "resources.priority=7",
    ).stdout
    found = re.search(r"^Launched tensorboard \(id: ([0-9a-f-]{36}), name: (.+)\)\.$", out, re.M)
    assert found is not None and found.group(2) == "my board", out
    tb_id = found.group(1)
    assert "TensorBoard is running at: " in out
    (tb,) = json.loads(cluster.det("tensorboard", "list", "-w", "viz", "--json").stdout)
    assert (tb["id"], tb["description"], tb["priority"]) == (tb_id, "my board", 7)
    assert not json.loads(
        cluster.det("tensorboard", "list", "-w", "Uncategorized", "--json").stdout
    )
    assert "unpacked the context" in cluster.det("tensorboard", "logs", tb_id).stdout

    following = subprocess.Popen(
        [sys.executable, "-m", "pydet.cli", "tensorboard", "logs", "-f", tb_id],
        env=cluster.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    cluster.det("tensorboard", "kill", tb_id)
    followed, _ = following.communicate(timeout=60)
    assert following.returncode == 0 and "TensorBoard is ready" in followed
