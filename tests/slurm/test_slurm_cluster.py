"""The single-machine Slurm cluster of scripts/slurm does what pydet's Slurm pool will need.

These are checks of Slurm itself (22.05.8 from Debian 12) as configured by
scripts/slurm/start.sh: batch jobs run and write their output file, an impossible request
pends with a reason, scancel's end is visible without an accounting daemon, and srun
inside a batch job starts ranked tasks. The last tests run what master/slurm builds.
"""

from __future__ import annotations

import pathlib

import pytest

from pydet.master.slurm.sbatch import SlurmPoolConfig, TrialJob, job_dir, sbatch_script
from pydet.master.slurm.squeue import SQUEUE_ARGS, parse_squeue, parse_squeue_json
from tests.cluster import wait_until
from tests.slurm.conftest import CPUS, SlurmCluster

pytestmark = pytest.mark.slurm


def test_sbatch_wrap_runs_and_writes_its_output(slurm: SlurmCluster) -> None:
    out = slurm.dir / "wrap-%j.out"
    job = slurm.sbatch(
        "--job-name=wrap", f"--output={out}", "--wrap", "echo hello from $SLURM_JOB_ID"
    )
    assert slurm.wait_state(job, "COMPLETED", "FAILED", "CANCELLED") == "COMPLETED"
    path = slurm.dir / f"wrap-{job}.out"
    text = wait_until(lambda: path.exists() and path.read_text(), 10, f"{path}")
    assert text.strip() == f"hello from {job}"
    assert slurm.job(job)["ExitCode"] == "0:0"


def test_a_failing_job_ends_failed_with_its_exit_code(slurm: SlurmCluster) -> None:
    job = slurm.sbatch(f"--output={slurm.dir}/fail-%j.out", "--wrap", "exit 3")
    assert slurm.wait_state(job, "COMPLETED", "FAILED", "CANCELLED") == "FAILED"
    assert slurm.job(job)["ExitCode"] == "3:0"


def test_more_cpus_than_the_node_has_pends_with_a_reason(slurm: SlurmCluster) -> None:
    # Slurm 22.05 accepts both jobs (EnforcePartLimits=NO) and leaves them pending for good:
    # more CPUs than the node has says PartitionConfig; more nodes than the partition has
    # says PartitionNodeLimit once the scheduler has looked (PartitionConfig before that).
    too_many_cpus = slurm.sbatch("-c", str(CPUS * 2), "--wrap", "true")
    too_many_nodes = slurm.sbatch("-N", "2", "--wrap", "true")
    try:
        for job, want in (
            (too_many_cpus, "PartitionConfig"),
            (too_many_nodes, "PartitionNodeLimit"),
        ):
            wait_until(lambda j=job, w=want: slurm.state(j) == ("PENDING", w), 30, want, 0.3)
    finally:
        slurm.run("scancel", str(too_many_cpus), str(too_many_nodes))


def test_a_job_waiting_for_busy_cpus_pends_with_resources(slurm: SlurmCluster) -> None:
    whole_node = slurm.sbatch("-c", str(CPUS), "--wrap", "sleep 60")
    waiting = slurm.sbatch("-c", "1", "--wrap", "true")
    try:
        slurm.wait_state(whole_node, "RUNNING")
        wait_until(lambda: slurm.state(waiting) == ("PENDING", "Resources"), 30, "Resources", 0.3)
    finally:
        slurm.run("scancel", str(whole_node))
    assert slurm.wait_state(waiting, "COMPLETED", "FAILED", "CANCELLED") == "COMPLETED"


def test_scancel_ends_a_running_job_visibly(slurm: SlurmCluster) -> None:
    out = slurm.dir / "cancel-%j.out"
    job = slurm.sbatch(f"--output={out}", "--wrap", "echo started; sleep 300")
    slurm.wait_state(job, "RUNNING")
    slurm.run("scancel", str(job))
    assert slurm.wait_state(job, "CANCELLED") == "CANCELLED"
    # Without slurmdbd, sacct has nothing; scontrol keeps the job for MinJobAge, with the
    # signal that ended the batch script (SIGTERM) as the second half of ExitCode, and
    # jobcomp/filetxt records it for good.
    fields = slurm.job(job)
    assert fields["JobState"] == "CANCELLED"
    assert fields["ExitCode"] == "0:15"
    comp = slurm.dir / "log" / "jobcomp.txt"
    wait_until(
        lambda: f"JobId={job} " in comp.read_text(),
        10,
        "the jobcomp record",
    )
    line = next(x for x in comp.read_text().splitlines() if x.startswith(f"JobId={job} "))
    assert "JobState=CANCELLED" in line
    log = wait_until(
        lambda: "CANCELLED" in (text := (slurm.dir / f"cancel-{job}.out").read_text()) and text,
        10,
        "slurmstepd's cancel line in the output",
    )
    assert log.startswith("started")
    assert f"*** JOB {job} ON" in log
    sacct = slurm.run("sacct", "-j", str(job), check=False)
    assert "accounting storage is disabled" in sacct.stdout + sacct.stderr


def test_srun_in_sbatch_starts_ranked_tasks(slurm: SlurmCluster) -> None:
    script = slurm.dir / "ranks.sh"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --nodes=1\n"
        "#SBATCH --ntasks-per-node=2\n"
        "srun bash -c 'echo rank=$SLURM_PROCID ntasks=$SLURM_NTASKS nodes=$SLURM_JOB_NODELIST'\n"
    )
    job = slurm.sbatch(f"--output={slurm.dir}/ranks-%j.out", str(script))
    assert slurm.wait_state(job, "COMPLETED", "FAILED", "CANCELLED") == "COMPLETED"
    lines = sorted((slurm.dir / f"ranks-{job}.out").read_text().split("\n"))
    lines = [x for x in lines if x]
    assert lines == [
        "rank=0 ntasks=2 nodes=pydet1",
        "rank=1 ntasks=2 nodes=pydet1",
    ]


def test_a_trial_batch_script_runs_its_command_through_srun(slurm: SlurmCluster) -> None:
    pool = SlurmPoolConfig(
        pool_name="slurm",
        partition="pydet",
        slots_per_node=CPUS,
        sbatch_args=("--time=00:10:00",),
        job_storage_root=str(slurm.dir / "jobs"),
    )
    job = TrialJob(
        allocation_id="1.1.1",
        slots=2,
        env={"DET_TRIAL_ID": "1", "DET_HPARAMS": '{"a": "b c"}'},
        sbatch_args=("--time=00:05:00",),
        command=(
            "bash",
            "-c",
            "echo rank=$DET_CONTAINER_RANK trial=$DET_TRIAL_ID hp=$DET_HPARAMS"
            " cpus=$SLURM_CPUS_PER_TASK",
        ),
    )
    out = pathlib.Path(str(job_dir(pool, job.allocation_id)))
    out.mkdir(parents=True)
    script = out / "job.sh"
    script.write_text(sbatch_script(pool, job))
    job_id = slurm.sbatch(str(script))
    assert slurm.wait_state(job_id, "COMPLETED", "FAILED", "CANCELLED") == "COMPLETED"
    assert (out / f"slurm-{job_id}.out").read_text() == 'rank=0 trial=1 hp={"a": "b c"} cpus=2\n'
    assert slurm.job(job_id)["TimeLimit"] == "00:05:00"


def test_the_queue_parsers_read_what_squeue_prints(slurm: SlurmCluster) -> None:
    never = slurm.sbatch("-c", str(CPUS * 2), "--wrap", "true")
    try:
        wait_until(lambda: slurm.state(never)[1] == "PartitionConfig", 30, "PartitionConfig", 0.3)
        jobs = parse_squeue(slurm.run(*SQUEUE_ARGS).stdout)
        assert jobs[never].never_runs
        json_jobs = parse_squeue_json(slurm.run("squeue", "--json").stdout)
        assert json_jobs[never] == jobs[never]
    finally:
        slurm.run("scancel", str(never))
    slurm.wait_state(never, "CANCELLED")
    assert parse_squeue(slurm.run(*SQUEUE_ARGS).stdout)[never].phase == "CANCELED"
