"""Determined's admin and bookkeeping commands against a real master and agent: the master's
config and log, the cluster-wide message, slots, config policies, templates, resource use,
log retention, the gc policy, describe's tables and the task commands. Each bad input is
one line naming what is wrong, never a traceback; what is stored survives a restart."""

from __future__ import annotations

import csv
import datetime
import io
import json
import pathlib
import queue
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture, wait_until

# Three steps, each validated (x grows: step 1 is the best) and checkpointed.
SCRIPT = """
from determined import core
with core.init() as ctx:
    for step in (1, 2, 3):
        ctx.train.report_training_metrics(step, {"loss": 1.0 / step})
        ctx.train.report_validation_metrics(step, {"x": float(step)})
        with ctx.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
            (path / "w").write_text(str(step))
    print("all done", flush=True)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("cluster"))


def config_file(tmp: pathlib.Path, **extra: object) -> pathlib.Path:
    cfg = tmp / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "name": "kept",
                "entrypoint": ["python3", "-c", SCRIPT],
                "searcher": {"name": "single", "metric": "x", "max_length": 3},
                "checkpoint_storage": {"save_trial_best": 10, "save_trial_latest": 10},
                **extra,
            }
        )
    )
    return cfg


@pytest.fixture(scope="module")
def experiment(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> int:
    ctx = tmp_path_factory.mktemp("ctx")
    (ctx / "notes.txt").write_text("the model's code would be here\n")
    exp_id = cluster.create(config_file(tmp_path_factory.mktemp("cfg")), ctx)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
    return exp_id


def first_trial(cluster: Cluster, exp_id: int) -> int:
    return int(cluster.trials(exp_id)[0]["id"])


def fails(cluster: Cluster, *args: str, env: dict[str, str] | None = None) -> str:
    """Run `det ARGS`, which must fail with one readable line; return stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.cli", *args],
        env=env or cluster.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (1, 2), proc
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc.stderr


def as_bob(cluster: Cluster) -> dict[str, str]:
    """`det` as bob, an ordinary user (created once)."""
    if "bob" not in cluster.det("user", "list").stdout:
        cluster.det("user", "create", "bob", "--password", "bob-password-1")
    return {**cluster.env, "DET_USER": "bob", "DET_PASS": "bob-password-1"}


# -- the master -----------------------------------------------------------------------------------


def test_master_config_shows_settings_and_changes_the_log_level(cluster: Cluster) -> None:
    shown = json.loads(cluster.det("master", "config", "--json").stdout)
    assert shown["port"] == cluster.port
    assert shown["log"] == {"level": "debug", "color": False}
    assert shown["webhook_signing_key"] is None
    assert "port:" in cluster.det("master", "config", "show").stdout  # YAML by default
    out = cluster.det("master", "config", "set", "--log.level", "info", "--log.color", "on").stdout
    assert "until the master restarts" in out
    shown = json.loads(cluster.det("master", "config", "--json").stdout)
    assert shown["log"] == {"level": "info", "color": True}
    assert "--log.level and --log.color" in fails(cluster, "master", "config", "set")
    assert "invalid choice" in fails(cluster, "master", "config", "set", "--log.level", "LOUD")
    assert "PERMISSION_TYPE_VIEW_MASTER_CONFIG" in fails(
        cluster, "master", "config", env=as_bob(cluster)
    )


def test_master_logs_shows_the_masters_own_lines(cluster: Cluster) -> None:
    lines = cluster.det("master", "logs", "--tail", "3").stdout.splitlines()
    assert len(lines) == 3
    assert all(" [" in line and "]: " in line for line in lines)
    everything = cluster.det("master", "logs").stdout
    assert "listening on" in everything
    # Any user may read it, as in Determined.
    assert cluster.det("master", "logs", "--tail", "1").returncode == 0
    assert "must be 0 or more" in fails(cluster, "master", "logs", "--tail", "-2")
    # -f: new lines as the master logs them (a login logs one).
    follower = subprocess.Popen(
        [sys.executable, "-m", "pydet.cli", "master", "logs", "-f", "--tail", "0"],
        env=cluster.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in follower.stdout or []:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        # Logins until one is printed: the first may come before the follower is reading.
        def printed() -> bool:
            cluster.login()
            time.sleep(0.5)
            return any("logged in" in lines.get() for _ in range(lines.qsize()))

        wait_until(printed, 60, "a login to be followed")
    finally:
        follower.terminate()
        follower.wait(timeout=30)


def test_the_cluster_message_is_shown_to_everyone_until_cleared(cluster: Cluster) -> None:
    out = cluster.det("master", "cluster-message", "set", "-m", "maintenance at noon", "-d", "2h")
    assert "Set the cluster-wide message" in out.stdout
    assert "Message:      maintenance at noon" in cluster.det("master", "info").stdout
    got = json.loads(cluster.det("master", "cluster-message", "get", "--json").stdout)
    assert got["clusterMessage"]["message"] == "maintenance at noon"
    assert got["clusterMessage"]["endTime"] is not None
    # The WebUI's banner reads it from the master's answer; ordinary users see it too.
    shown = cluster.get("/api/v1/master")["clusterMessage"]
    assert shown["message"] == "maintenance at noon"
    # Its times are Timestamps, RFC 3339 in JSON as Determined's gateway writes them.
    start, end = (datetime.datetime.fromisoformat(shown[k]) for k in ("startTime", "endTime"))
    assert end - start == datetime.timedelta(hours=2)
    info = subprocess.run(
        [sys.executable, "-m", "pydet.cli", "master", "info", "--json"],
        env=as_bob(cluster),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(info.stdout)["cluster_message"]["message"] == "maintenance at noon"
    # Setting and reading it is for admins.
    assert "PERMISSION_TYPE_UPDATE_MASTER_CONFIG" in fails(
        cluster, "master", "cluster-message", "set", "-m", "hi", env=as_bob(cluster)
    )
    # It survives a restart of the master.
    cluster.stop_master()
    cluster.start_master()
    assert "maintenance at noon" in cluster.det("master", "info").stdout
    cluster.det("master", "cluster-message", "clear")
    assert "Message:" not in cluster.det("master", "info").stdout
    assert json.loads(cluster.det("master", "cluster-message", "get", "--json").stdout) == {
        "clusterMessage": None
    }


def test_bad_cluster_messages_say_what_is_wrong(cluster: Cluster) -> None:
    assert "-m/--message" in fails(cluster, "master", "cluster-message", "set")
    assert "is not a duration" in fails(
        cluster, "master", "cluster-message", "set", "-m", "x", "-d", "soon"
    )
    assert "at most 250 characters" in fails(
        cluster, "master", "cluster-message", "set", "-m", "x" * 300
    )
    assert "end_time: must be after the start time" in fails(
        cluster, "master", "cluster-message", "set", "-m", "x", "-e", "2001-01-01T00:00:00Z"
    )
    assert "end_time: must be in the future" in fails(
        cluster,
        "master",
        "cluster-message",
        "set",
        "-m",
        "x",
        "-s",
        "2000-01-01T00:00:00Z",
        "-e",
        "2001-01-01T00:00:00Z",
    )
    assert "not an RFC 3339 time" in fails(
        cluster, "master", "cluster-message", "set", "-m", "x", "-s", "tomorrow"
    )


# -- slots and pools ------------------------------------------------------------------------------


def test_a_disabled_slot_is_shown_so_and_enabled_again(cluster: Cluster) -> None:
    assert (
        "Disabled slot 0 of agent agent-0" in cluster.det("slot", "disable", "agent-0", "0").stdout
    )
    (slot,) = json.loads(cluster.det("slot", "list", "--json").stdout)
    assert slot["enabled"] is False
    assert "Enabled slot 0" in cluster.det("slot", "enable", "agent-0", "0").stdout
    (slot,) = json.loads(cluster.det("slot", "list", "--json").stdout)
    assert slot["enabled"] is True
    assert "slot 7 not found on agent agent-0 (its slots: 0)" in fails(
        cluster, "slot", "disable", "agent-0", "7"
    )
    assert "agent nobody not found" in fails(cluster, "slot", "enable", "nobody", "0")
    assert "PERMISSION_TYPE_UPDATE_AGENTS" in fails(
        cluster, "slot", "disable", "agent-0", "0", env=as_bob(cluster)
    )


def test_agents_are_enabled_and_disabled_all_at_once(cluster: Cluster) -> None:
    assert "Agent agent-0 disabled" in cluster.det("agent", "disable", "--all").stdout
    assert "Agent agent-0 enabled" in cluster.det("agent", "enable", "--all").stdout
    assert "give an agent id or --all" in fails(cluster, "agent", "enable")


def test_resource_pools_are_listed(cluster: Cluster) -> None:
    (pool,) = json.loads(cluster.det("resource-pool", "list", "--json").stdout)
    assert pool["name"] == "default" and pool["default_compute_pool"] is True
    assert "default" in cluster.det("rp", "ls").stdout


# -- templates ------------------------------------------------------------------------------------


def test_templates_are_created_once_and_changed_in_place(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    fragment = tmp_path / "t.yaml"
    fragment.write_text("description: from a template\n")
    assert (
        "Created template tpl-a" in cluster.det("template", "create", "tpl-a", str(fragment)).stdout
    )
    assert "template 'tpl-a' already exists" in fails(
        cluster, "template", "create", "tpl-a", str(fragment)
    )
    fragment.write_text("description: changed\n")
    cluster.det("template", "set-value", "config", "tpl-a", str(fragment))
    assert "description: changed" in cluster.det("template", "describe", "tpl-a").stdout
    assert "template 'tpl-nope' not found" in fails(
        cluster, "template", "set-value", "config", "tpl-nope", str(fragment)
    )
    assert "does not exist" in fails(cluster, "template", "create", "tpl-b", "no-such.yaml")


# -- config policies ------------------------------------------------------------------------------


def test_config_policies_merge_over_experiments_and_refuse_too_many_slots(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "invariant_config:\n  description: set by the admin\n  max_restarts: 0\n"
        "constraints:\n  resources: {max_slots: 1}\n  priority_limit: 10\n"
    )
    out = cluster.det("config-policies", "set", "experiment", str(policy)).stdout
    assert "Set global experiment config policies" in out and "max_slots: 1" in out
    described = json.loads(cluster.det("cp", "describe", "experiment", "--json").stdout)
    assert described["constraints"] == {"priority_limit": 10, "resources": {"max_slots": 1}}
    # The invariant config wins over what the user wrote.
    exp_id = cluster.create(config_file(tmp_path, description="mine", max_restarts=3), tmp_path)
    config = cluster.experiment(exp_id)["config"]
    assert config["description"] == "set by the admin" and config["max_restarts"] == 0
    cluster.det("experiment", "kill", str(exp_id))
    # Constraints refuse an experiment that asks for more.
    too_many = config_file(tmp_path, resources={"slots_per_trial": 2})
    assert "resources.slots_per_trial [2] exceeds limit set by admin [1]" in fails(
        cluster, "experiment", "create", str(too_many), str(tmp_path)
    )
    too_early = config_file(tmp_path, resources={"priority": 3})
    assert "requested priority [3] exceeds limit set by admin [10]" in fails(
        cluster, "experiment", "create", str(too_early), str(tmp_path)
    )
    # They survive a restart; tasks' policies take no invariant config, as in Determined.
    cluster.stop_master()
    cluster.start_master()
    assert "max_slots: 1" in cluster.det("cp", "describe", "experiment").stdout
    policy.write_text("invariant_config: {debug: true}\n")
    assert "not supported for NTSC" in fails(cluster, "cp", "set", "tasks", str(policy))
    policy.write_text("constraints: {resources: {gpus: 1}}\n")
    assert "constraints.resources.gpus: unknown" in fails(
        cluster, "cp", "set", "experiment", str(policy)
    )
    assert "PERMISSION_TYPE_MODIFY_GLOBAL_CONFIG_POLICIES" in fails(
        cluster, "cp", "delete", "experiment", env=as_bob(cluster)
    )
    cluster.det("config-policies", "delete", "experiment")
    assert cluster.det("cp", "describe", "experiment", "--json").stdout.strip() == "{}"


def test_a_workspaces_config_policies_hold_its_experiments_under_the_global_ones(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster.det("workspace", "create", "lab")
    cluster.det("project", "create", "lab", "runs")
    policy = tmp_path / "lab.yaml"
    policy.write_text(
        "invariant_config: {description: the lab's, max_restarts: 1}\n"
        "constraints: {resources: {max_slots: 2}}\n"
    )
    out = cluster.det("cp", "set", "experiment", str(policy), "-w", "lab").stdout
    assert "Set workspace lab experiment config policies" in out
    shown = json.loads(cluster.det("cp", "describe", "experiment", "-w", "lab", "--json").stdout)
    assert shown["constraints"] == {"resources": {"max_slots": 2}}
    assert cluster.det("cp", "describe", "experiment", "--json").stdout.strip() == "{}"
    in_lab = {"workspace": "lab", "project": "runs"}
    exp_id = cluster.create(config_file(tmp_path, description="mine", **in_lab), tmp_path)
    config = cluster.experiment(exp_id)["config"]
    assert (config["description"], config["max_restarts"]) == ("the lab's", 1)
    cluster.det("experiment", "kill", str(exp_id))
    # Outside the workspace its policies do not apply.
    elsewhere = cluster.create(config_file(tmp_path, description="mine"), tmp_path)
    assert cluster.experiment(elsewhere)["config"]["description"] == "mine"
    cluster.det("experiment", "kill", str(elsewhere))
    three = config_file(tmp_path, resources={"slots_per_trial": 3}, **in_lab)
    assert "resources.slots_per_trial [3] exceeds limit set by admin [2]" in fails(
        cluster, "experiment", "create", str(three), str(tmp_path)
    )
    # The global policies win where both speak.
    policy.write_text("invariant_config: {description: the cluster's}\n")
    cluster.det("cp", "set", "experiment", str(policy))
    exp_id = cluster.create(config_file(tmp_path, **in_lab), tmp_path)
    config = cluster.experiment(exp_id)["config"]
    assert (config["description"], config["max_restarts"]) == ("the cluster's", 1)
    cluster.det("experiment", "kill", str(exp_id))
    cluster.det("cp", "delete", "experiment")
    # Its owner or an admin sets them; others may read them.
    assert "only the owner of workspace" in fails(
        cluster, "cp", "delete", "experiment", "-w", "lab", env=as_bob(cluster)
    )
    assert "not found" in fails(cluster, "cp", "describe", "experiment", "-w", "nowhere")
    out = cluster.det("cp", "delete", "experiment", "-w", "lab").stdout
    assert "Deleted workspace lab's experiment config policies" in out
    assert cluster.det("cp", "describe", "experiment", "-w", "lab").stdout.strip() == "{}"


# -- an experiment's tables, code, checkpoints and logs -------------------------------------------


def test_describe_writes_determineds_tables_with_metrics(
    cluster: Cluster, experiment: int, tmp_path: pathlib.Path
) -> None:
    out = cluster.det("experiment", "describe", str(experiment), "--metrics", "--csv").stdout
    tables = [t for t in out.split("\n\n") if t.strip()]
    workloads = list(csv.DictReader(io.StringIO(tables[-1].split("\n", 1)[1])))
    assert [w["# of Batches"] for w in workloads] == ["1", "2", "3"]
    assert workloads[0]["Training Metric: loss"] == "1.0"
    assert workloads[2]["Validation Metric: x"] == "3.0"
    assert all(w["Checkpoint"] for w in workloads)
    cluster.det("experiment", "describe", str(experiment), "--outdir", str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "experiments.csv",
        "trials.csv",
        "workloads.csv",
    ]
    trials = list(csv.DictReader((tmp_path / "out" / "trials.csv").open()))
    assert len(trials) == 1
    shown = cluster.det("experiment", "describe", str(experiment), "--metrics").stdout
    assert "Workloads:" in shown and "Validation Metric: x" in shown
    assert "not allowed with argument" in fails(
        cluster, "experiment", "describe", str(experiment), "--csv", "--json"
    )


def test_the_model_definition_downloads_as_a_tgz(
    cluster: Cluster, experiment: int, tmp_path: pathlib.Path
) -> None:
    cluster.det("experiment", "download-model-def", str(experiment), "--output-dir", str(tmp_path))
    with tarfile.open(tmp_path / f"experiment_{experiment}_model_def.tgz") as tar:
        assert any(name.endswith("notes.txt") for name in tar.getnames())
    assert "experiment 9999 not found" in fails(cluster, "experiment", "download-model-def", "9999")


def test_the_gc_policy_deletes_what_it_no_longer_keeps(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = cluster.create(config_file(tmp_path), tmp_path)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
    policy = ["--save-experiment-best", "0", "--save-trial-best", "0", "--save-trial-latest", "1"]
    # Without --yes and without a terminal, it previews and refuses.
    refused = fails(cluster, "experiment", "set", "gc-policy", str(exp_id), *policy)
    assert "needs confirmation; pass --yes" in refused
    out = cluster.det("experiment", "set", "gc-policy", str(exp_id), *policy, "--yes").stdout
    assert "2 checkpoints deleted" in out
    listed = json.loads(cluster.det("experiment", "lc", str(exp_id), "--json").stdout)
    live = [c for c in listed if c["state"] != "DELETED"]
    assert [c["steps_completed"] for c in live] == [3]
    assert cluster.experiment(exp_id)["config"]["checkpoint_storage"]["save_trial_latest"] == 1
    assert "must be 0 or more" in fails(
        cluster,
        "e",
        "set",
        "gc-policy",
        str(exp_id),
        "--save-experiment-best",
        "-1",
        "--save-trial-best",
        "0",
        "--save-trial-latest",
        "0",
        "--yes",
    )
    assert "experiment 9999 not found" in fails(
        cluster, "e", "set", "gc-policy", "9999", *policy, "--yes"
    )
    assert "(admin) or a user with PERMISSION_TYPE_UPDATE_EXPERIMENT" in fails(
        cluster, "e", "set", "gc-policy", str(exp_id), *policy, "--yes", env=as_bob(cluster)
    )


def test_a_support_bundle_holds_the_trials_and_the_masters_logs(
    cluster: Cluster, experiment: int, tmp_path: pathlib.Path
) -> None:
    trial_id = first_trial(cluster, experiment)
    out = cluster.det("trial", "support-bundle", str(trial_id), "-o", str(tmp_path)).stdout
    (bundle,) = tmp_path.glob(f"det-bundle-trial-{trial_id}-*.tar.gz")
    assert f"bundle path: {bundle}" in out
    with tarfile.open(bundle) as tar:
        names = {pathlib.PurePath(n).name: n for n in tar.getnames()}
        assert set(names) == {
            "trial_logs.txt",
            "master_logs.txt",
            "api_trial_call.json",
            "api_experiment_call.json",
        }
        trial = json.loads(tar.extractfile(names["api_trial_call.json"]).read())  # type: ignore[union-attr]
        assert trial["id"] == trial_id
        master_log = tar.extractfile(names["master_logs.txt"]).read().decode()  # type: ignore[union-attr]
        assert "listening on" in master_log
    assert "trial 9999 not found" in fails(cluster, "trial", "support-bundle", "9999")
    assert "no such directory" in fails(
        cluster, "trial", "support-bundle", str(trial_id), "-o", str(tmp_path / "nope")
    )


def test_determineds_other_listing_and_download_flags(
    cluster: Cluster, experiment: int, tmp_path: pathlib.Path
) -> None:
    listed = cluster.det("experiment", "list", "--show_project").stdout
    assert "Workspace" in listed and "Uncategorized" in listed
    # Exit 0: it completed (Determined's other name for --interval).
    cluster.det("experiment", "wait", str(experiment), "--polling-interval", "0.5")
    # The best checkpoint by x when larger is better: the last step's.
    cluster.det(
        "experiment", "download", str(experiment), "--sort-by", "x", "--smaller-is-better",
        "false", "-o", str(tmp_path / "best"), "-q",
    )  # fmt: skip
    (kept,) = (tmp_path / "best").iterdir()
    assert (kept / "w").read_text() == "3"
    assert "must be set together" in fails(
        cluster, "experiment", "download", str(experiment), "--sort-by", "x"
    )
    assert "has no checkpoint with a validation of nothing" in fails(
        cluster, "experiment", "download", str(experiment), "--sort-by", "nothing",
        "--smaller-is-better", "true",
    )  # fmt: skip
    assert cluster.det("job", "list", "--yaml").stdout.strip() == "[]"
    assert "not allowed with argument" in fails(cluster, "job", "list", "--yaml", "--json")
    drained = cluster.det("agent", "disable", "agent-0", "--drain", "--json")
    assert json.loads(drained.stdout) == {} and "Agent agent-0 draining" in drained.stderr
    cluster.det("agent", "enable", "agent-0")


def test_log_retention_then_cleanup_deletes_a_trials_logs(
    cluster: Cluster, experiment: int
) -> None:
    trial_id = first_trial(cluster, experiment)
    assert "all done" in cluster.logs(trial_id)

    def lines(source: str) -> list[dict[str, str]]:
        out = cluster.logs(trial_id, "--json", "--source", source)
        return [json.loads(line) for line in out.splitlines()]

    from_agent = lines("agent")
    assert any("all done" in line["message"] for line in from_agent)
    assert all(line["stdtype"] != "master" for line in from_agent)
    assert all(line["stdtype"] == "master" for line in lines("master"))
    assert lines("nowhere") == []
    out = cluster.det("trial", "set", "log-retention", str(trial_id), "--days", "0").stdout
    assert f"trial {trial_id} are kept for 0 days" in out
    deleted = cluster.det("task", "cleanup-logs").stdout
    assert "Deleted" in deleted and "rows of log entries" in deleted
    assert "all done" not in cluster.logs(trial_id)
    # An experiment's setting reaches its trials and its config.
    cluster.det("experiment", "set", "log-retention", str(experiment), "--forever")
    config = cluster.experiment(experiment)["config"]
    assert config["retention_policy"] == {"log_retention_days": -1}
    assert "--days N" in fails(cluster, "trial", "set", "log-retention", str(trial_id))
    assert "expected -1 to 32767" in fails(
        cluster, "trial", "set", "log-retention", str(trial_id), "--days", "99999"
    )
    assert "trial 9999 not found" in fails(
        cluster, "trial", "set", "log-retention", "9999", "--days", "3"
    )
    assert "PERMISSION_TYPE_UPDATE_MASTER_CONFIG" in fails(
        cluster, "task", "cleanup-logs", env=as_bob(cluster)
    )


def test_resource_use_counts_the_experiments_slot_time(cluster: Cluster, experiment: int) -> None:
    raw = json.loads(
        cluster.det(
            "resources", "raw", "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z", "--json"
        ).stdout
    )
    mine = [e for e in raw if e["experiment_id"] == experiment]
    assert mine and mine[0]["kind"] == "TRIAL" and mine[0]["slots"] == 1
    assert mine[0]["seconds"] > 0 and mine[0]["username"] == "admin"
    detailed = cluster.det("res", "alloc", "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z").stdout
    assert detailed.startswith("allocation_id,task_id,kind")
    agg = cluster.det("res", "agg", "2000-01-01", "2099-12-31", "--monthly").stdout
    rows = list(csv.DictReader(io.StringIO(agg)))
    assert any(r["aggregation_type"] == "username" and r["key"] == "admin" for r in rows)
    assert "is not a date" in fails(cluster, "res", "agg", "yesterday", "2099-12-31")
    assert "is after END" in fails(cluster, "res", "agg", "2099-12-31", "2000-01-01")


# -- tasks ----------------------------------------------------------------------------------------


def test_a_tasks_config_is_its_experiments(cluster: Cluster, experiment: int) -> None:
    task_id = f"{experiment}.{first_trial(cluster, experiment)}"
    config = json.loads(cluster.det("task", "config", task_id, "--json").stdout)
    assert config["name"] == "kept"
    assert "searcher:" in cluster.det("task", "config", task_id).stdout
    assert f"task {experiment}.9999 not found" in fails(
        cluster, "task", "config", f"{experiment}.9999"
    )
    assert "tensorboard nope not found" in fails(cluster, "task", "kill", "nope")
    assert "tensorboard nope not found" in fails(
        cluster, "tensorboard", "set", "priority", "nope", "5"
    )
