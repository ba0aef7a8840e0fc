"""`det task list|logs` and `det version` against a real master and agent."""

from __future__ import annotations

import json
import pathlib

import yaml

from tests.cluster import Cluster, wait_until


def test_a_running_trial_is_a_task_with_its_agent_and_logs(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(
        "import time\nprint('task says hi', flush=True)\ntime.sleep(60)\n"
    )
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "entrypoint: python3 train.py\nsearcher: {name: single, metric: x, max_length: 1}\n"
    )
    exp_id = cluster.create(cfg, ctx)
    cluster.wait_state(exp_id, "RUNNING", timeout=60)
    (trial,) = cluster.trials(exp_id)
    task_id = f"{exp_id}.{trial['id']}"

    tasks = json.loads(cluster.det("task", "list", "--json").stdout)
    (summary,) = [t for t in tasks.values() if t["task_id"] == task_id]
    assert summary["name"] == f"Trial {trial['id']} (Experiment {exp_id})"
    assert summary["slots_needed"] == 1
    assert [r["agent_id"] for r in summary["resources"]] == ["agent-0"]
    table = cluster.det("task").stdout
    assert "Allocation ID" in table and task_id in table and "agent-0" in table
    csv = cluster.det("task", "list", "--csv").stdout.splitlines()
    assert csv[0].startswith("Task ID,Allocation ID,Name") and task_id in csv[1]

    wait_until(
        lambda: "task says hi" in cluster.det("task", "logs", task_id).stdout, 30, "the log line"
    )
    tid = str(trial["id"])
    assert "task says hi" in cluster.det("trial", "logs", tid, "--stdtype", "stdout").stdout
    assert "task says hi" not in cluster.det("trial", "logs", tid, "--stdtype", "stderr").stdout
    assert "task says hi" in cluster.det("t", "logs", tid, "--agent-id", "agent-0").stdout
    assert "task says hi" not in cluster.det("t", "logs", tid, "--agent-id", "agent-9").stdout
    early = cluster.det("t", "logs", tid, "--timestamp-before", "2000-01-01T00:00:00Z").stdout
    assert "task says hi" not in early
    proc = cluster.det("task", "logs", f"{exp_id + 1}.{trial['id']}", check=False)
    assert proc.returncode == 1 and "not found" in proc.stderr
    cluster.det("experiment", "kill", str(exp_id))
    cluster.wait_state(exp_id, "CANCELED", timeout=60)
    wait_until(lambda: task_id not in cluster.det("task", "list").stdout, 30, "the task to go")


def test_version_shows_the_client_and_the_master(cluster: Cluster) -> None:
    info = yaml.safe_load(cluster.det("version").stdout)
    assert info["client"]["version"]
    assert info["master"]["version"] == info["client"]["version"]
    assert info["master"]["cluster_id"]
    assert info["master_address"]
