"""A master with a Slurm resource pool runs trials as Slurm jobs on the real test cluster.

No agent runs: the master's Slurm pool (master/slurm/pool.py) turns each allocation into
one batch job on the one-node cluster of scripts/slurm, and the trial's lifecycle, logs,
restarts and the master's own restart go through it.
"""

from __future__ import annotations

import json
import pathlib
import signal
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import EXAMPLES, Cluster, running, wait_until
from tests.slurm.conftest import CPUS, SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

CORE_API = EXAMPLES / "core_api"


def pool_config(
    jobs: pathlib.Path,
    partition: str = "pydet",
    slots_per_node: int = CPUS,
    time_limit: str = "00:10:00",
) -> str:
    return textwrap.dedent(
        f"""\
        resource_pools:
          - pool_name: slurm
            type: slurm
            partition: {partition}
            slots_per_node: {slots_per_node}
            time_limit: "{time_limit}"
            job_storage_root: {jobs}
        """
    )


@pytest.fixture
def master(
    slurm: SlurmCluster,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Iterator[Cluster]:
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    cluster = Cluster(tmp_path, master_config=pool_config(tmp_path / "jobs"))
    for started in running(cluster, Cluster.start_master):
        yield started
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            # What the master and the Slurm queue said, in the failed test's report.
            print(started.dump_logs())
            print(slurm.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T|%r").stdout)


def write_config(where: pathlib.Path, text: str) -> pathlib.Path:
    path = where / "exp.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def own_master(
    slurm: SlurmCluster,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    slurm_conf: pathlib.Path | None = None,
    **pool: Any,
) -> Iterator[Cluster]:
    """A master of its own, for a pool unlike the fixture's (``pool_config``'s keywords)
    or a ``slurm_conf`` of its own: ``for cluster in own_master(...)``."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_conf or slurm.env["SLURM_CONF"]))
    config = pool_config(tmp_path / "jobs", **pool)
    yield from running(Cluster(tmp_path, master_config=config), Cluster.start_master)


def script_context(where: pathlib.Path, name: str, text: str) -> pathlib.Path:
    """A model directory holding the one script ``name``."""
    context = where / "context"
    context.mkdir()
    (context / name).write_text(text)
    return context


def slurm_jobs(slurm: SlurmCluster) -> list[str]:
    """Every pydet job Slurm still lists: ``id|name|state``."""
    out = slurm.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T").stdout.split()
    return [line for line in out if "|pydet-" in line]


def test_a_single_slot_trial_completes_with_metrics_and_logs(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    # One virtual agent per CPU slot of the partition's one node (sinfo).
    agents = [a for a in master.agents_json() if a["resourcePools"] == ["slurm"]]
    assert len(agents) == CPUS
    baseline = newest_job_id(slurm)
    exp = master.create(CORE_API / "1_metrics.yaml", CORE_API)
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    trial = master.trials(exp)[0]
    logs = master.logs(trial["id"])
    assert "submitted as Slurm job" in logs
    assert "x is now 100" in logs
    described = json.loads(master.det("trial", "describe", str(trial["id"]), "--json").stdout)
    assert described["trial"]["best_validation_metric"] == 100
    reports = described["workloads"]
    assert [m["steps_completed"] for m in reports if m["group"] == "training"] == list(
        range(10, 101, 10)
    )
    assert [state for _, state in jobs_since(slurm, baseline)] == ["COMPLETED"]


# Twelve one-second steps (time for a pause or a kill to land mid-run under load), a
# checkpoint after each; resumes from the latest one.
STEPS_SCRIPT = """\
import pathlib
import signal
import time

import determined as det

STEPS = 12

info = det.get_cluster_info()
with det.core.init() as core:
    start = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            start = int(pathlib.Path(path, "step").read_text())
        print(f"resumed from step {start}", flush=True)
    for step in range(start + 1, STEPS + 1):
        time.sleep(1)
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1 / step})
        with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
            pathlib.Path(path, "step").write_text(str(step))
        print(f"step {step}", flush=True)
        if core.preempt.should_preempt():
            print("preempted", flush=True)
            break
    else:
        core.train.report_validation_metrics(steps_completed=STEPS, metrics={"loss": 1 / STEPS})
"""


def steps_experiment(
    where: pathlib.Path, max_restarts: int = 0
) -> tuple[pathlib.Path, pathlib.Path]:
    context = script_context(where, "steps.py", STEPS_SCRIPT)
    config = write_config(
        where,
        f"""\
        name: slurm-steps
        entrypoint: python3 steps.py
        searcher: {{name: single, metric: loss, max_length: 12}}
        max_restarts: {max_restarts}
        """,
    )
    return config, context


def newest_job_id(slurm: SlurmCluster) -> int:
    ids = [int(x) for x in slurm.run("squeue", "-h", "-t", "all", "-o", "%i").stdout.split()]
    return max(ids, default=0)


def jobs_since(slurm: SlurmCluster, baseline: int) -> list[tuple[int, str]]:
    """The pydet jobs submitted after ``baseline``: ``(id, state)``."""
    out = []
    for line in slurm_jobs(slurm):
        job_id, _, state = line.split("|")
        if int(job_id) > baseline:
            out.append((int(job_id), state))
    return sorted(out)


def start_steps(
    master: Cluster, slurm: SlurmCluster, where: pathlib.Path, *, max_restarts: int = 0
) -> tuple[int, int, int]:
    """Create the steps experiment and wait for its second step: ``(baseline job id,
    experiment id, trial id)``."""
    baseline = newest_job_id(slurm)
    exp = master.create(*steps_experiment(where, max_restarts))
    trial_id = wait_until(lambda: master.trials(exp), 30, "the trial")[0]["id"]
    wait_until(lambda: "step 2" in master.logs(trial_id), 60, "step 2", 0.5)
    return baseline, exp, trial_id


def test_a_two_task_torch_distributed_trial_completes(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    digits = EXAMPLES / "digits"
    config = write_config(
        tmp_path,
        """\
        name: slurm-distributed
        entrypoint: >-
          python3 -m determined.launch.torch_distributed
          python3 1_distributed.py --epochs 1
        resources: {slots_per_trial: 2}
        searcher: {name: single, metric: val_loss, max_length: 1}
        max_restarts: 0
        """,
    )
    baseline = newest_job_id(slurm)
    exp = master.create(config, digits)
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=180) == "COMPLETED"
    (job,) = jobs_since(slurm, baseline)
    # One job with a Slurm task per container.
    assert slurm.job(job[0])["NumTasks"] == "2"
    logs = master.logs(master.trials(exp)[0]["id"])
    assert "[rank=0]" in logs and "[rank=1]" in logs


def test_an_asha_search_runs_its_trials_as_slurm_jobs(master: Cluster, slurm: SlurmCluster) -> None:
    baseline = newest_job_id(slurm)
    exp = master.create(CORE_API / "3_hpsearch.yaml", CORE_API)
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=180) == "COMPLETED"
    trials = master.trials(exp)
    assert len(trials) >= 4
    assert len(jobs_since(slurm, baseline)) >= len(trials)


def test_pause_then_activate_resumes_from_the_checkpoint(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    _, exp, trial_id = start_steps(master, slurm, tmp_path)
    master.det("experiment", "pause", str(exp))
    master.wait_state(exp, "PAUSED", timeout=60)
    # The experiment says PAUSED at once; its trial once its job has ended.
    wait_until(lambda: master.trials(exp)[0]["state"] == "PAUSED", 60, "the trial to stop", 0.5)
    master.det("experiment", "activate", str(exp))
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    assert "resumed from step" in master.logs(trial_id)


def test_an_admin_scancel_fails_the_run_and_the_trial_restarts(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    baseline, exp, trial_id = start_steps(master, slurm, tmp_path, max_restarts=1)
    ((first, _),) = jobs_since(slurm, baseline)
    slurm.run("scancel", str(first))
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    logs = master.logs(trial_id)
    assert f"Slurm job {first} ended CANCELLED" in logs
    assert "resumed from step" in logs
    assert [state for _, state in jobs_since(slurm, baseline)] == ["CANCELLED", "COMPLETED"]
    assert master.trials(exp)[0]["restarts"] == 1


def test_a_restarted_master_adopts_the_running_job(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    baseline, exp, trial_id = start_steps(master, slurm, tmp_path)
    master.stop_master(signal.SIGKILL)
    master.start_master()
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    # The same job ran to its end: none was submitted again, and the run never restarted.
    assert [state for _, state in jobs_since(slurm, baseline)] == ["COMPLETED"]
    assert master.trials(exp)[0]["restarts"] == 0
    assert "step 12" in master.logs(trial_id)


def test_a_pending_reason_shows_in_det_job_list(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    blocker = slurm.sbatch("-p", "pydet", "-c", str(CPUS), "--wrap", "sleep 300")
    try:
        slurm.wait_state(blocker, "RUNNING")
        exp = master.create(*steps_experiment(tmp_path))

        def note() -> str:
            (job,) = json.loads(
                master.det("job", "list", "--resource-pool", "slurm", "--json").stdout
            )
            return str(job.get("note", ""))

        assert "pending (Resources)" in wait_until(note, 30, "the pending reason", 0.5)
        trial_id = master.trials(exp)[0]["id"]
        assert "is pending (Resources)" in master.logs(trial_id)
        assert "Note" in master.det("job", "list", "--resource-pool", "slurm").stdout
    finally:
        slurm.run("scancel", str(blocker))
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"


def test_an_unknown_partition_fails_the_trial_with_the_sbatch_error(
    slurm: SlurmCluster, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for cluster in own_master(slurm, tmp_path, monkeypatch, partition="nosuch"):
        exp = cluster.create(CORE_API / "1_metrics.yaml", CORE_API)
        assert cluster.wait_state(exp, "ERROR", "COMPLETED", timeout=60) == "ERROR"
        logs = cluster.logs(cluster.trials(exp)[0]["id"])
        assert "the Slurm job could not be submitted: sbatch failed:" in logs
        assert "invalid partition" in logs.lower()


def test_killing_a_trial_cancels_its_job(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    baseline, exp, _ = start_steps(master, slurm, tmp_path)
    master.det("experiment", "kill", str(exp))
    assert master.wait_state(exp, "CANCELED", "ERROR", "COMPLETED", timeout=60) == "CANCELED"
    ((job, _),) = jobs_since(slurm, baseline)
    # scancel --signal=TERM reached the task, which ended (143) before the grace ran out:
    # the batch script then exits non-zero on its own.
    assert slurm.wait_state(job, "CANCELLED", "COMPLETED", "FAILED") in ("FAILED", "CANCELLED")
    (exit_file,) = (tmp_path / "jobs").glob("*/exit.0")
    assert exit_file.read_text().strip() == "143"


def test_a_job_slurm_can_never_run_fails_the_trial_with_the_reason(
    slurm: SlurmCluster, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pool that claims more CPUs per node than the node has: Slurm takes the job and
    # leaves it pending for good (PartitionConfig).
    for cluster in own_master(slurm, tmp_path, monkeypatch, slots_per_node=CPUS * 2):
        context = script_context(tmp_path, "noop.py", "print('never printed')\n")
        exp = cluster.create(
            write_config(
                tmp_path,
                f"""\
                name: slurm-never
                entrypoint: python3 noop.py
                resources: {{slots_per_trial: {CPUS * 2}}}
                searcher: {{name: single, metric: x, max_length: 1}}
                max_restarts: 0
                """,
            ),
            context,
        )
        assert cluster.wait_state(exp, "ERROR", "COMPLETED", timeout=60) == "ERROR"
        logs = cluster.logs(cluster.trials(exp)[0]["id"])
        assert "can never run: PartitionConfig" in logs


def job_note(master: Cluster) -> str:
    """The Note of the pool's one job in ``det job list`` ("" when it has none or none)."""
    jobs = json.loads(master.det("job", "list", "--resource-pool", "slurm", "--json").stdout)
    return str(jobs[0].get("note", "")) if jobs else ""


def master_log(cluster: Cluster) -> str:
    return (cluster.root / "master.log").read_text(errors="replace")


def test_a_down_controller_fails_each_run_with_one_clear_line(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    unreachable = "Unable to contact slurm controller"
    with slurm.controller_down():
        exp = master.create(*steps_experiment(tmp_path, max_restarts=1))
        # The second run's Note names why the first one failed while it tries again.
        assert unreachable in wait_until(
            lambda: job_note(master) if unreachable in job_note(master) else None,
            45,
            "the Note to say the controller is unreachable",
            0.5,
        )
        assert master.wait_state(exp, "ERROR", "COMPLETED", timeout=60) == "ERROR"
    trial = master.trials(exp)[0]
    assert trial["restarts"] == 1
    failures = [
        line
        for line in master.logs(trial["id"]).splitlines()
        if "the Slurm job could not be submitted" in line
    ]
    assert len(failures) == 2
    assert all(unreachable in line and "is slurmctld up" in line for line in failures)
    assert unreachable in master_log(master)


def test_a_running_trial_outlives_a_controller_restart(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    baseline, exp, trial_id = start_steps(master, slurm, tmp_path)
    with slurm.controller_down():
        wait_until(lambda: "step 5" in master.logs(trial_id), 60, "step 5", 0.5)
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    assert [state for _, state in jobs_since(slurm, baseline)] == ["COMPLETED"]
    assert master.trials(exp)[0]["restarts"] == 0


def test_a_master_that_cannot_authenticate_fails_the_run_with_the_munge_error(
    slurm: SlurmCluster, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The master's SLURM_CONF points munge at a socket where no munged listens.
    conf = (slurm.dir / "slurm.conf").read_text()
    wrong = tmp_path / "munge.socket"
    bad = tmp_path / "slurm.conf"
    bad.write_text(
        "\n".join(
            f"AuthInfo=socket={wrong}" if line.startswith("AuthInfo=") else line
            for line in conf.splitlines()
        )
    )
    for cluster in own_master(slurm, tmp_path, monkeypatch, slurm_conf=bad):
        exp = cluster.create(*steps_experiment(tmp_path, max_restarts=1))
        assert cluster.wait_state(exp, "ERROR", "COMPLETED", timeout=60) == "ERROR"
        trial = cluster.trials(exp)[0]
        assert trial["restarts"] == 1
        logs = cluster.logs(trial["id"])
        assert "Protocol authentication error (Munge encode failed" in logs
        assert str(wrong) in logs
        assert "Protocol authentication error" in master_log(cluster)


# Three steps with a checkpoint each, then (on its first run only) a wait far past any
# time limit; resumed, it finishes at once.
OUTLASTS_SCRIPT = """\
import pathlib
import time

import determined as det

info = det.get_cluster_info()
with det.core.init() as core:
    if info.latest_checkpoint:
        print("resumed from the checkpoint", flush=True)
    else:
        for step in (1, 2, 3):
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1 / step})
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
                pathlib.Path(path, "step").write_text(str(step))
        print("waiting past the time limit", flush=True)
        time.sleep(600)
    core.train.report_validation_metrics(steps_completed=3, metrics={"loss": 1 / 3})
"""


def test_a_job_slurm_ends_at_its_time_limit_fails_the_run_and_the_trial_resumes(
    slurm: SlurmCluster, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slurm's smallest limit is a minute, checked about every 30 s: ~90 s in all.
    for cluster in own_master(slurm, tmp_path, monkeypatch, time_limit="1"):
        context = script_context(tmp_path, "outlast.py", OUTLASTS_SCRIPT)
        baseline = newest_job_id(slurm)
        exp = cluster.create(
            write_config(
                tmp_path,
                """\
                name: slurm-time-limit
                entrypoint: python3 outlast.py
                searcher: {name: single, metric: loss, max_length: 3}
                max_restarts: 1
                """,
            ),
            context,
        )
        assert cluster.wait_state(exp, "COMPLETED", "ERROR", timeout=150) == "COMPLETED"
        ((first, _), *_) = jobs_since(slurm, baseline)
        assert slurm.job(first)["TimeLimit"] == "00:01:00"
        assert [state for _, state in jobs_since(slurm, baseline)] == ["TIMEOUT", "COMPLETED"]
        trial = cluster.trials(exp)[0]
        assert trial["restarts"] == 1
        logs = cluster.logs(trial["id"])
        assert f"Slurm job {first} ended TIMEOUT" in logs
        assert "resumed from the checkpoint" in logs
