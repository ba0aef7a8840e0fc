"""The batch script a trial allocation becomes on a Slurm pool (master/slurm/sbatch.py)."""

from __future__ import annotations

import shlex
from datetime import timedelta

import pytest

from pydet.master.slurm.sbatch import (
    AllocationJob,
    ContainerTask,
    JobShape,
    SbatchError,
    SlurmPoolConfig,
    TrialJob,
    allocation_script,
    check_sbatch_args,
    env_file,
    format_time_limit,
    job_dir,
    job_shape,
    sbatch_script,
)

POOL = SlurmPoolConfig(
    pool_name="hpc",
    partition="gpu",
    slots_per_node=4,
    gres="gpu",
    sbatch_args=("--account=ml", "--time=08:00:00"),
    job_storage_root="/shared/pydet-jobs",
)


def directives(script: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")
    ]


def test_shape_fits_one_node_or_fills_whole_nodes() -> None:
    assert job_shape(0, 4) == JobShape(1, 1)
    assert job_shape(1, 4) == JobShape(1, 1)
    assert job_shape(4, 4) == JobShape(1, 4)
    assert job_shape(8, 4) == JobShape(2, 4)
    assert job_shape(12, 4) == JobShape(3, 4)
    with pytest.raises(SbatchError, match="6 slots do not fill whole nodes of 4"):
        job_shape(6, 4)
    with pytest.raises(SbatchError):
        job_shape(1, 0)


def test_a_multi_node_gpu_trial() -> None:
    job = TrialJob(
        allocation_id="7.3.1",
        slots=8,
        env={"DET_TRIAL_ID": "3", "DET_HPARAMS": '{"lr": 0.1, "name": "it\'s"}'},
        sbatch_args=("--qos=high", "--time=02:00:00"),
        time_limit=timedelta(hours=1, minutes=30),
    )
    script = sbatch_script(POOL, job)
    assert script.startswith("#!/bin/bash\n")
    assert directives(script) == [
        "--job-name=pydet-7.3.1",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--partition=gpu",
        "--gres=gpu:4",
        "--time=0-01:30:00",
        "--chdir=/shared/pydet-jobs/7.3.1",
        "--output=/shared/pydet-jobs/7.3.1/slurm-%j.out",
        # The pool's, then the experiment's: the later --time wins.
        "--account=ml",
        "--time=08:00:00",
        "--qos=high",
        "--time=02:00:00",
    ]
    exports = [line for line in script.splitlines() if line.startswith("export ")]
    assert exports == [
        "export DET_HPARAMS=" + shlex.quote('{"lr": 0.1, "name": "it\'s"}'),
        "export DET_TRIAL_ID=3",
    ]
    last = script.splitlines()[-1]
    argv = shlex.split(last)
    assert argv[:5] == ["exec", "srun", "--kill-on-bad-exit=1", "--ntasks=2", "--ntasks-per-node=1"]
    assert argv[5:8] == ["bash", "-c", 'export DET_CONTAINER_RANK="$SLURM_PROCID"; exec "$@"']
    assert argv[8:] == ["pydet-task", "python3", "-m", "determined.exec.launch"]


def test_a_cpu_pool_asks_for_cpus_and_a_zero_slot_trial_for_one() -> None:
    pool = SlurmPoolConfig(pool_name="cpu", slots_per_node=16, job_storage_root="/jobs")
    assert "--cpus-per-task=6" in directives(sbatch_script(pool, TrialJob("1.1.1", slots=6)))
    zero = directives(sbatch_script(POOL, TrialJob("1.1.1", slots=0)))
    assert "--cpus-per-task=1" in zero
    assert not any(d.startswith("--gres") for d in zero)
    assert not any(
        d.startswith("--partition") for d in directives(sbatch_script(pool, TrialJob("1.1.1", 1)))
    )


@pytest.mark.parametrize(
    "arg", ["--nodes=3", "-N2", "-n", "--gres=gpu:8", "--output=/tmp/x", "-pdebug", "--wrap=ls"]
)
def test_sbatch_args_may_not_set_what_the_pool_derives(arg: str) -> None:
    with pytest.raises(SbatchError, match="set by the pool"):
        sbatch_script(POOL, TrialJob("1.1.1", slots=1, sbatch_args=(arg,)))


def test_sbatch_args_must_be_options() -> None:
    with pytest.raises(SbatchError, match="'hostname' is not an sbatch option"):
        check_sbatch_args(["--exclusive", "hostname"], "slurm.sbatch_args")
    check_sbatch_args(["--exclusive", "--mem=8G", "-A", "--constraint=a100"], "x")


def test_unsafe_paths_and_names_are_refused() -> None:
    with pytest.raises(SbatchError, match="not safe in a path"):
        job_dir(POOL, "../etc")
    with pytest.raises(SbatchError, match="must be absolute"):
        job_dir(SlurmPoolConfig(pool_name="p", job_storage_root="jobs"), "1.1.1")
    with pytest.raises(SbatchError, match="not valid"):
        sbatch_script(POOL, TrialJob("1.1.1", slots=1, env={"A B": "x"}))


def test_time_limits_round_up_to_seconds() -> None:
    assert format_time_limit(timedelta(seconds=0)) == "0-00:00:01"
    assert format_time_limit(timedelta(seconds=59.2)) == "0-00:01:00"
    assert format_time_limit(timedelta(days=2, hours=3, minutes=4, seconds=5)) == "2-03:04:05"


def allocation(slots: int = 1, ntasks: int = 2, **kw: object) -> AllocationJob:
    tasks = tuple(
        ContainerTask(rank, slots, {"DET_CONTAINER_RANK": str(rank), "DET_CONTAINER_ADDRS": "[]"})
        for rank in range(ntasks)
    )
    return AllocationJob("7.7.7", tasks, **kw)  # type: ignore[arg-type]


def sbatch_lines(script: str) -> list[str]:
    return [x.removeprefix("#SBATCH ") for x in script.splitlines() if x.startswith("#SBATCH ")]


def test_an_allocation_is_one_job_with_a_task_per_container() -> None:
    cpus = SlurmPoolConfig(pool_name="cpu", partition="pydet", job_storage_root="/jobs")
    script = allocation_script(cpus, allocation(sbatch_args=("--qos=low",)))
    assert sbatch_lines(script) == [
        "--job-name=pydet-7.7.7",
        "--ntasks=2",
        "--partition=pydet",
        "--cpus-per-task=1",
        "--chdir=/jobs/7.7.7",
        "--output=/jobs/7.7.7/slurm-%j.out",
        "--qos=low",
    ]
    assert script.splitlines()[-1].startswith("exec srun --kill-on-bad-exit=0 --ntasks=2 bash")


def test_the_pool_time_limit_is_the_jobs_unless_the_experiment_sets_one() -> None:
    pool = SlurmPoolConfig(pool_name="cpu", job_storage_root="/jobs", time_limit=timedelta(hours=2))
    assert "--time=0-02:00:00" in sbatch_lines(allocation_script(pool, allocation()))
    # The experiment's --time comes later, and sbatch takes the last one.
    options = sbatch_lines(allocation_script(pool, allocation(sbatch_args=("--time=5",))))
    assert options.index("--time=0-02:00:00") < options.index("--time=5")


def test_gpu_slots_put_one_task_on_each_node_with_its_gres() -> None:
    options = sbatch_lines(allocation_script(POOL, allocation(slots=4, ntasks=2)))
    assert "--nodes=2" in options and "--ntasks-per-node=1" in options
    assert "--gres=gpu:4" in options


def test_a_container_larger_than_a_node_is_refused() -> None:
    with pytest.raises(SbatchError, match="does not fit a node of 4"):
        allocation_script(POOL, allocation(slots=8, ntasks=1))


def test_the_env_file_leaves_the_addresses_to_the_batch_script() -> None:
    task = ContainerTask(1, 1, {"DET_HPARAMS": '{"a": "b c"}', "DET_CONTAINER_ADDRS": "[]"})
    text = env_file(task, "/opt/py/bin")
    assert "DET_CONTAINER_ADDRS" not in text
    hparams = '{"a": "b c"}'
    assert "DET_HPARAMS=" + shlex.quote(hparams) + "\n" in text
    assert text.endswith('PATH=/opt/py/bin:"$PATH"\n')
    with pytest.raises(SbatchError, match="not valid"):
        env_file(ContainerTask(0, 1, {"BAD-NAME": "x"}))
