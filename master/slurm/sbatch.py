"""The batch script of one trial allocation on a Slurm pool.

The job has one Slurm task per node, each running pydet's task entry through ``srun``, as
the agents run one container per agent: the task entry starts the per-slot workers itself.
So a trial of ``slots`` slots on a pool of ``slots_per_node`` takes ``slots`` on one node
when it fits, else ``slots / slots_per_node`` whole nodes. Slots are GPUs when the pool
names a ``gres`` (``--gres=gpu:N`` per node), else CPUs (``--cpus-per-task=N``).

The script carries the allocation's launch environment (its session token included), so
whoever writes it should keep it private to the master's user (mode 0600).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import PurePosixPath

from pydet.master.tasks.task_spec import TASK_ENTRY

# sbatch options the pool derives from the allocation; sbatch_args may not set them, or the
# job would no longer match what the scheduler allocated (or where its output goes).
RESERVED_OPTIONS = frozenset(
    {
        "-N",
        "--nodes",
        "-n",
        "--ntasks",
        "--ntasks-per-node",
        "-c",
        "--cpus-per-task",
        "--gres",
        "-G",
        "--gpus",
        "--gpus-per-node",
        "--gpus-per-task",
        "-p",
        "--partition",
        "-o",
        "--output",
        "-e",
        "--error",
        "-D",
        "--chdir",
        "-J",
        "--job-name",
        "-a",
        "--array",
        "--wrap",
    }
)

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SbatchError(ValueError):
    """A trial allocation that cannot become a batch job on this pool."""


@dataclass(frozen=True)
class SlurmPoolConfig:
    """The master's ``{pool_name, type: slurm, ...}`` resource pool entry."""

    pool_name: str
    partition: str | None = None
    slots_per_node: int = 1
    # A generic resource whose units are the slots ("gpu"); None: slots are CPUs.
    gres: str | None = None
    sbatch_args: tuple[str, ...] = ()
    job_storage_root: str = "/var/lib/pydet/slurm"
    # How many of the partition's nodes the master fills at once (its virtual agents);
    # None: as many as the partition has (sinfo, at the master's start).
    nodes: int | None = None
    # Each job's ``--time`` (an experiment's ``--time`` in its sbatch_args wins); None:
    # the partition's default.
    time_limit: timedelta | None = None


@dataclass(frozen=True)
class TrialJob:
    """What one trial allocation asks of Slurm."""

    allocation_id: str
    slots: int
    env: Mapping[str, str] = field(default_factory=dict)
    # The experiment's ``slurm.sbatch_args`` (its kept ``slurm`` section).
    sbatch_args: tuple[str, ...] = ()
    time_limit: timedelta | None = None
    command: tuple[str, ...] = tuple(TASK_ENTRY)


@dataclass(frozen=True)
class JobShape:
    nodes: int
    slots_per_node: int


def job_shape(slots: int, slots_per_node: int) -> JobShape:
    """How many nodes a trial of ``slots`` takes, and how many slots on each."""
    if slots_per_node < 1:
        raise SbatchError(f"slots_per_node must be at least 1, not {slots_per_node}")
    if slots < 0:
        raise SbatchError(f"a trial cannot ask for {slots} slots")
    if slots <= slots_per_node:
        # Zero slots: one CPU on one node, for a trial that needs no accelerator.
        return JobShape(1, max(slots, 1))
    if slots % slots_per_node:
        raise SbatchError(
            f"{slots} slots do not fill whole nodes of {slots_per_node} slots: ask for at "
            f"most {slots_per_node}, or a multiple of it"
        )
    return JobShape(slots // slots_per_node, slots_per_node)


def job_dir(pool: SlurmPoolConfig, allocation_id: str) -> PurePosixPath:
    """Where the allocation's batch script and Slurm output go."""
    if not _SAFE_ID.fullmatch(allocation_id):
        raise SbatchError(f"allocation id {allocation_id!r} is not safe in a path")
    root = PurePosixPath(pool.job_storage_root)
    if not root.is_absolute():
        raise SbatchError(f"job_storage_root must be absolute, not {pool.job_storage_root!r}")
    return root / allocation_id


def format_time_limit(limit: timedelta) -> str:
    """``--time`` as ``D-HH:MM:SS``, rounded up to a whole second (at least one)."""
    total = max(1, int(-(-limit.total_seconds() // 1)))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"


_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def parse_time_limit(value: object, where: str) -> timedelta:
    """A time limit as Slurm's ``--time`` reads it: whole minutes (an integer or
    ``"M"``), ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M`` or ``D-H:M:S``; at least one second."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise SbatchError(f"{where}: expected at least 1 minute, not {value}")
        return timedelta(minutes=value)
    text = value.strip() if isinstance(value, str) else ""
    m = _TIME.fullmatch(text)
    if m is None:
        raise SbatchError(
            f"{where}: expected whole minutes or Slurm's D-HH:MM:SS (as in --time), not {value!r}"
        )
    days, first, second, third = (int(g) if g is not None else None for g in m.groups())
    if days is not None:  # D-H, D-H:M, D-H:M:S
        limit = timedelta(days=days, hours=first or 0, minutes=second or 0, seconds=third or 0)
    elif third is not None:  # H:M:S
        limit = timedelta(hours=first or 0, minutes=second or 0, seconds=third)
    else:  # M, M:S
        limit = timedelta(minutes=first or 0, seconds=second or 0)
    if limit < timedelta(seconds=1):
        raise SbatchError(f"{where}: a time limit of zero would never let a job run")
    return limit


def check_sbatch_args(args: Sequence[str], where: str) -> None:
    """Refuse arguments that are not options or that set what the pool derives."""
    for arg in args:
        if not arg.startswith("-"):
            raise SbatchError(f"{where}: {arg!r} is not an sbatch option")
        name = arg.split("=", 1)[0]
        if name.startswith("-") and not name.startswith("--"):
            name = name[:2]  # -N2, -pdebug
        if name in RESERVED_OPTIONS:
            raise SbatchError(f"{where}: {name} is set by the pool from the trial's resources")


def _placement_options(
    pool: SlurmPoolConfig,
    time_limit: timedelta | None,
    out: PurePosixPath,
    sbatch_args: Sequence[str],
) -> list[str]:
    """The time limit, where output goes, then the pool's and the experiment's options."""
    options = [f"--time={format_time_limit(time_limit)}"] if time_limit is not None else []
    options += [f"--chdir={out}", f"--output={out}/slurm-%j.out"]
    return [*options, *pool.sbatch_args, *sbatch_args]


def sbatch_script(pool: SlurmPoolConfig, job: TrialJob) -> str:
    """The batch script for ``job`` on ``pool``: submit it with ``sbatch SCRIPT``.

    Later ``#SBATCH`` lines win, so the pool's ``sbatch_args`` come before the
    experiment's: an experiment may refine what the pool sets (``--time``, ``--qos``).
    """
    shape = job_shape(job.slots, pool.slots_per_node)
    out = job_dir(pool, job.allocation_id)
    check_sbatch_args(pool.sbatch_args, f"resource pool {pool.pool_name} sbatch_args")
    check_sbatch_args(job.sbatch_args, "slurm.sbatch_args")
    for name in job.env:
        if not _ENV_NAME.fullmatch(name):
            raise SbatchError(f"environment variable name {name!r} is not valid")
    if not job.command:
        raise SbatchError("the task entry command is empty")

    options = [
        f"--job-name=pydet-{job.allocation_id}",
        f"--nodes={shape.nodes}",
        "--ntasks-per-node=1",
    ]
    if pool.partition:
        options.append(f"--partition={pool.partition}")
    if pool.gres and job.slots > 0:
        options.append(f"--gres={pool.gres}:{shape.slots_per_node}")
    else:
        options.append(f"--cpus-per-task={shape.slots_per_node}")
    options += _placement_options(pool, job.time_limit or pool.time_limit, out, job.sbatch_args)

    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {opt}" for opt in options]
    lines.append("")
    lines += [f"export {name}={shlex.quote(value)}" for name, value in sorted(job.env.items())]
    # Each node's task learns its rank from Slurm: one task per node, so the node's rank.
    per_task = 'export DET_CONTAINER_RANK="$SLURM_PROCID"; exec "$@"'
    srun = [
        "srun",
        "--kill-on-bad-exit=1",
        f"--ntasks={shape.nodes}",
        "--ntasks-per-node=1",
        "bash",
        "-c",
        per_task,
        "pydet-task",
        *job.command,
    ]
    lines.append("exec " + " ".join(shlex.quote(a) for a in srun))
    return "\n".join(lines) + "\n"


# -- one allocation, one job: a Slurm task per container ----------------------------------


@dataclass(frozen=True)
class ContainerTask:
    """One container of an allocation: Slurm task ``rank`` of the job."""

    rank: int
    slots: int
    # The container's own launch environment (its rank, slot ids, ...).
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AllocationJob:
    """What one allocation of several containers asks of Slurm."""

    allocation_id: str
    tasks: tuple[ContainerTask, ...]
    sbatch_args: tuple[str, ...] = ()
    time_limit: timedelta | None = None
    command: tuple[str, ...] = tuple(TASK_ENTRY)
    # Put first on each task's PATH (where ``python3`` with ``determined`` lives).
    bindir: str = ""


# The batch script's part that turns the job's nodes into one address per task, in rank
# order (tasks are laid out in blocks: SLURM_TASKS_PER_NODE reads like "2(x3),1").
_ADDRS = r"""addrs=()
mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
i=0
IFS=, read -ra groups <<< "$SLURM_TASKS_PER_NODE"
for g in "${groups[@]}"; do
  if [[ $g =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then n=${BASH_REMATCH[1]}; reps=${BASH_REMATCH[2]}
  else n=$g; reps=1; fi
  for ((r = 0; r < reps; r++)); do
    addr=$(scontrol show node -o "${hosts[i]}" | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p')
    for ((t = 0; t < n; t++)); do addrs+=("\"${addr:-${hosts[i]}}\""); done
    i=$((i + 1))
  done
done
DET_CONTAINER_ADDRS="[$(IFS=,; echo "${addrs[*]}")]"
export DET_CONTAINER_ADDRS
"""

# Each task: its container's environment, its own working directory, output and exit files.
# SIGTERM (scancel --signal=TERM) goes on to the task's command, whose exit code is still
# written; exit.N appears whole (written aside, then renamed).
_WRAPPER = r"""#!/bin/bash
rank=$SLURM_PROCID
dir=$(dirname "$0")
set -a
. "$dir/env.$rank"
set +a
export DET_CONTAINER_RANK=$rank PYTHONUNBUFFERED=1
mkdir -p "$dir/work.$rank" && cd "$dir/work.$rank" || exit 1
touch "$dir/started.$rank"
"$@" >"$dir/out.$rank" 2>"$dir/err.$rank" </dev/null &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM
wait "$child"
code=$?
while kill -0 "$child" 2>/dev/null; do
  wait "$child"
  code=$?
done
echo "$code" >"$dir/exit.$rank.tmp" && mv "$dir/exit.$rank.tmp" "$dir/exit.$rank"
exit "$code"
"""


def task_wrapper() -> str:
    """``task.sh``, run by every Slurm task of an allocation's job."""
    return _WRAPPER


def env_file(task: ContainerTask, bindir: str = "") -> str:
    """``env.N``: the container's environment, sourced by task N (DET_CONTAINER_ADDRS is the
    batch script's, from the nodes Slurm chose)."""
    for name in task.env:
        if not _ENV_NAME.fullmatch(name):
            raise SbatchError(f"environment variable name {name!r} is not valid")
    lines = [
        f"{name}={shlex.quote(value)}"
        for name, value in sorted(task.env.items())
        if name != "DET_CONTAINER_ADDRS"
    ]
    if bindir:
        lines.append(f'PATH={shlex.quote(bindir)}:"$PATH"')
    return "\n".join(lines) + "\n"


def allocation_script(pool: SlurmPoolConfig, job: AllocationJob) -> str:
    """The batch script of an allocation: one Slurm task per container, task N running
    ``task.sh`` with container N's environment (``env.N``) from the job's directory.

    Slots are GPUs when the pool names a ``gres``: one task per node, each with
    ``--gres=GRES:N``. Otherwise they are CPUs and Slurm may put several tasks on a node.
    """
    ntasks = len(job.tasks)
    if not ntasks:
        raise SbatchError("an allocation without containers")
    if sorted(t.rank for t in job.tasks) != list(range(ntasks)):
        raise SbatchError("the containers' ranks are not 0..N-1")
    out = job_dir(pool, job.allocation_id)
    check_sbatch_args(pool.sbatch_args, f"resource pool {pool.pool_name} sbatch_args")
    check_sbatch_args(job.sbatch_args, "slurm.sbatch_args")
    if not job.command:
        raise SbatchError("the task entry command is empty")
    per_task = max(max(t.slots for t in job.tasks), 1)
    if per_task > pool.slots_per_node:
        raise SbatchError(
            f"a container of {per_task} slots does not fit a node of {pool.slots_per_node}"
        )
    options = [f"--job-name=pydet-{job.allocation_id}", f"--ntasks={ntasks}"]
    if pool.partition:
        options.append(f"--partition={pool.partition}")
    if pool.gres:
        options += [f"--nodes={ntasks}", "--ntasks-per-node=1", f"--gres={pool.gres}:{per_task}"]
    else:
        options.append(f"--cpus-per-task={per_task}")
    options += _placement_options(pool, job.time_limit or pool.time_limit, out, job.sbatch_args)
    srun = ["srun", "--kill-on-bad-exit=0", f"--ntasks={ntasks}", "bash", f"{out}/task.sh"]
    lines = ["#!/bin/bash", *(f"#SBATCH {opt}" for opt in options), "", _ADDRS]
    lines.append("exec " + " ".join(shlex.quote(a) for a in [*srun, *job.command]))
    return "\n".join(lines) + "\n"
