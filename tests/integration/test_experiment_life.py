"""An experiment's life on a real master and agent, driven through the `det` CLI."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import textwrap
import time

from tests.cluster import EXAMPLES, Cluster, wait_until


def make_context(
    tmp_path: pathlib.Path, script: str, config: str
) -> tuple[pathlib.Path, pathlib.Path]:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(textwrap.dedent(script))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(textwrap.dedent(config))
    return cfg, ctx


def test_minimal_example_completes_with_its_logs(cluster: Cluster) -> None:
    exp_id = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal")
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", "CANCELED") == "COMPLETED"
    trials = cluster.trials(exp_id)
    assert [t["state"] for t in trials] == ["COMPLETED"]
    assert [t["phase"] for t in trials] == ["COMPLETED"]
    described = cluster.det("experiment", "describe", str(exp_id)).stdout
    assert "Phase" in described.split("Trials:")[1].splitlines()[1]
    logs = cluster.logs(trials[0]["id"])
    assert "step 5/5" in logs
    assert "done" in logs


def test_create_follow_streams_logs_and_exits_zero(cluster: Cluster) -> None:
    proc = cluster.det(
        "experiment",
        "create",
        str(EXAMPLES / "minimal" / "const.yaml"),
        str(EXAMPLES / "minimal"),
        "-f",
    )
    assert "Created experiment" in proc.stdout
    assert "step 3/5" in proc.stdout
    assert "COMPLETED" in proc.stdout


def test_a_trials_last_lines_are_stored_before_it_counts_as_completed(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    # The agent reports a container's exit as soon as it sees it; the output the process
    # wrote just before must still reach the master first. `det e create -f` stops following
    # the logs once the trial is done, so it shows a line only if it was stored by then.
    cfg, ctx = make_context(
        tmp_path,
        """
        import os
        import sys

        import determined as det

        with det.core.init() as core_context:
            for op in core_context.searcher.operations():
                core_context.train.report_validation_metrics(1, {"x": 1.0})
                op.report_completed(1.0)
        for i in range(3000):
            print(f"burst line {i}")
        print("the last line on stderr", file=sys.stderr, flush=True)
        print("the last line on stdout", flush=True)
        os._exit(0)  # no teardown: the exit follows the last lines at once
        """,
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        max_restarts: 0
        """,
    )
    proc = cluster.det("experiment", "create", str(cfg), str(ctx), "-f")
    assert "COMPLETED" in proc.stdout
    burst = [line for line in proc.stdout.splitlines() if "burst line " in line]
    assert len(burst) == 3000 and burst[-1].endswith("burst line 2999")
    assert "the last line on stderr" in proc.stdout
    assert "the last line on stdout" in proc.stdout
    # The launcher's own last line, written just before it exits.
    assert "the entrypoint exited with status 0" in proc.stdout


def test_failing_entrypoint_restarts_then_errors(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    cfg, ctx = make_context(
        tmp_path,
        """
        import os
        print("run", os.environ["DET_TRIAL_RUN_ID"], flush=True)
        raise SystemExit(3)
        """,
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        max_restarts: 2
        """,
    )
    exp_id = cluster.create(cfg, ctx)
    assert cluster.wait_state(exp_id, "ERROR", "COMPLETED") == "ERROR"
    (trial,) = cluster.trials(exp_id)
    assert trial["state"] == "ERROR"
    assert trial["restarts"] == 2  # three runs: two restarts, as Determined counts them
    logs = cluster.logs(trial["id"])
    assert "run 1" in logs and "run 2" in logs and "run 3" in logs
    assert "used all 2 restarts" in logs
    proc = cluster.det("experiment", "wait", str(exp_id), check=False)
    assert proc.returncode != 0


def test_a_stored_config_this_version_refuses_ends_its_experiment_not_the_master(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    """An experiment stored by an older version with a value that is refused now (here a
    zero-length searcher) ends as ERROR at the next start, its process killed; the master
    itself starts and serves."""
    pid_file = tmp_path / "pid"
    cfg, ctx = make_context(
        tmp_path,
        f"""
        import os, pathlib, time
        pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))
        time.sleep(600)
        """,
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        max_restarts: 0
        """,
    )
    exp_id = cluster.create(cfg, ctx)
    wait_until(pid_file.exists, 60, "the trial to start")
    pid = int(pid_file.read_text())
    cluster.stop_master(signal.SIGKILL)
    ((text,),) = cluster.sql("SELECT config FROM experiments WHERE id = ?", (exp_id,))
    stored = json.loads(text)
    stored["searcher"]["max_length"] = {"batches": 0}
    cluster.sql("UPDATE experiments SET config = ? WHERE id = ?", (json.dumps(stored), exp_id))
    cluster.start_master()
    assert cluster.wait_state(exp_id, "ERROR", "COMPLETED", timeout=60) == "ERROR"
    assert [t["state"] for t in cluster.trials(exp_id)] == ["ERROR"]

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 30, "the orphaned trial process to be killed")
    assert "no longer valid" in (cluster.root / "master.log").read_text()


def test_kill_stops_a_running_experiment_promptly(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    cfg, ctx = make_context(
        tmp_path,
        """
        import time
        print("started", flush=True)
        time.sleep(600)
        """,
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        """,
    )
    exp_id = cluster.create(cfg, ctx)
    trial_id = wait_until(lambda: cluster.trials(exp_id), 30, "a trial")[0]["id"]
    wait_until(lambda: "started" in cluster.logs(trial_id), 60, "the trial to start")
    # Shown as Determined shows it (what its e2e tests wait for); ACTIVE is never shown.
    assert cluster.wait_state(exp_id, "RUNNING", timeout=10) == "RUNNING"
    assert [t["state"] for t in cluster.trials(exp_id)] == ["RUNNING"]
    listed = cluster.det("experiment", "list").stdout
    assert "RUNNING" in listed and "ACTIVE" not in listed
    began = time.monotonic()
    cluster.det("experiment", "kill", str(exp_id))
    assert cluster.wait_state(exp_id, "CANCELED", timeout=30) == "CANCELED"
    assert time.monotonic() - began < 15
    assert all(not a["containers"] for a in cluster.agents_json())


def test_master_restart_keeps_a_running_trial(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    cfg, ctx = make_context(
        tmp_path,
        """
        import time
        for i in range(40):
            print(f"tick {i}", flush=True)
            time.sleep(0.25)
        """,
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        max_restarts: 0
        """,
    )
    exp_id = cluster.create(cfg, ctx)
    trial_id = wait_until(lambda: cluster.trials(exp_id), 30, "a trial")[0]["id"]
    wait_until(lambda: "tick 2" in cluster.logs(trial_id), 60, "the trial to run")
    cluster.stop_master(signal.SIGKILL)
    time.sleep(1.0)
    cluster.start_master()
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", timeout=60) == "COMPLETED"
    (trial,) = cluster.trials(exp_id)
    assert trial["restarts"] == 0
    logs = cluster.logs(trial_id)
    assert "tick 0" in logs and "tick 39" in logs


def test_ranks_are_stored_and_filterable(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    cfg, ctx = make_context(
        tmp_path,
        """
        import sys
        print(f"hello from {sys.argv[1]}", flush=True)
        """,
        """
        entrypoint: >-
          python3 -m determined.launch.wrap_rank 0 python3 train.py zero &&
          python3 -m determined.launch.wrap_rank 1 python3 train.py one
        searcher: {name: single, metric: x, max_length: 1}
        """,
    )
    exp_id = cluster.create(cfg, ctx)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
    trial_id = cluster.trials(exp_id)[0]["id"]
    only_one = cluster.logs(trial_id, "--rank-id", "1")
    assert "hello from one" in only_one
    assert "hello from zero" not in only_one
    assert "[rank=1]" in only_one


def test_local_test_mode_runs_without_a_deployed_cluster(tmp_path: pathlib.Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pydet.cli",
            "experiment",
            "create",
            "--local",
            "--test-mode",
            str(EXAMPLES / "minimal" / "const.yaml"),
            str(EXAMPLES / "minimal"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "step 5/5" in proc.stdout
    assert "finished with state COMPLETED" in proc.stdout


def test_a_warm_started_trial_shows_its_checkpoint(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    script = """
        import determined as det
        from determined import core

        info = det.get_cluster_info()
        with core.init() as ctx:
            print("starting from", info.latest_checkpoint, flush=True)
            with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
                (path / "w").write_text("1")
        """
    cfg, ctx = make_context(
        tmp_path,
        script,
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        """,
    )
    first = cluster.create(cfg, ctx)
    assert cluster.wait_state(first, "COMPLETED", "ERROR") == "COMPLETED"
    (source,) = cluster.trials(first)
    assert source["warm_start_checkpoint_uuid"] == ""
    uuid = source["latest_checkpoint_uuid"]
    assert uuid

    warm = tmp_path / "warm.yaml"
    warm.write_text(
        "entrypoint: python3 train.py\n"
        f"searcher: {{name: single, metric: x, max_length: 1, source_trial_id: {source['id']}}}\n"
    )
    second = cluster.create(warm, ctx)
    assert cluster.wait_state(second, "COMPLETED", "ERROR") == "COMPLETED"
    (trial,) = cluster.trials(second)
    assert trial["warm_start_checkpoint_uuid"] == uuid
    assert f"starting from {uuid}" in cluster.logs(trial["id"])
    described = cluster.det("trial", "describe", str(trial["id"])).stdout
    assert "Warm Start Checkpoint" in described and uuid in described


def test_logs_of_an_experiment_past_its_retention_go_when_the_master_checks(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    # log_retention_days: 0 keeps the logs until the next retention pass, which a master
    # makes when it starts (and every hour); the experiment, trial and metrics stay.
    cfg, ctx = make_context(
        tmp_path,
        """
        print("a line to forget", flush=True)
        """,
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        max_restarts: 0
        retention_policy: {log_retention_days: 0}
        """,
    )
    exp_id = cluster.create(cfg, ctx)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", timeout=60) == "COMPLETED"
    (trial,) = cluster.trials(exp_id)
    wait_until(lambda: "a line to forget" in cluster.logs(trial["id"]), 30, "the trial's log")
    cluster.stop_master()
    cluster.start_master()
    wait_until(lambda: cluster.logs(trial["id"]).strip() == "", 30, "the logs to be deleted")
    assert cluster.state(exp_id) == "COMPLETED"
    assert [t["id"] for t in cluster.trials(exp_id)] == [trial["id"]]
