"""A Slurm resource pool: virtual agents whose orders become Slurm batch jobs.

For each ``type: slurm`` pool the master registers virtual agents in its agent table, so
that the scheduler, allocations, the trial lifecycle, restarts and preemption run exactly
as they do on real agents. Instead of a gRPC stream, this bridge takes the orders off the
virtual agents' outboxes and reports back through the same ``AgentEvents`` receiver:

- the start orders of one allocation (one per container) become ONE job, ``pydet-<alloc>``,
  with one Slurm task per container (``sbatch.allocation_script``), submitted once all of
  them are in; its id is stored (``slurm_jobs``) right after ``sbatch`` answers;
- ``squeue`` is polled about once a second for all the pool's jobs: a task whose job runs
  and whose ``started.N`` file exists is reported started, its ``out.N``/``err.N`` files
  are tailed into its logs, its ``exit.N`` file is its exit; a pending reason is shown in
  the trial's log (and ``det job list``) when it changes, and one that never clears fails
  the run; a job that Slurm ended without a task's exit code fails that task, naming the
  Slurm state;
- a kill order becomes ``scancel --signal=TERM`` and, after its grace, ``scancel``;
- after a master restart, ``adopt`` finds each restored allocation's job (by stored id,
  else by name) and reports it running or ended, as a reconnecting agent would.

Virtual agents: with a ``gres`` (GPUs) one agent per node with ``slots_per_node`` slots,
one container per node; with CPU slots one agent per slot, so that a trial of N slots is N
containers (N Slurm tasks) that Slurm may place on one node.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pathlib
import sys
import time
from dataclasses import dataclass, field

from determined.api.gen import v1
from pydet.master.agents.table import Agent, AgentEvents, AgentTable, Slot
from pydet.master.slurm import sbatch
from pydet.master.slurm.commands import SlurmCommandError, slurm_command
from pydet.master.slurm.squeue import SQUEUE_ARGS, SlurmJob, parse_squeue
from pydet.master.store.db import Database
from pydet.master.tasks.task_spec import TASK_ENTRY

log = logging.getLogger(__name__)

POLL_INTERVAL = 1.0
# How long a job may be missing from squeue right after sbatch before it counts as lost.
MISSING_GRACE = 10.0
# Exit code of a task that Slurm ended without it writing one (or that never started).
EXIT_SLURM = 1
# Seconds squeue may go unanswered (slurmctld down or unreachable) before the running
# jobs' Note says so; the jobs themselves go on (slurmd runs them without slurmctld).
QUEUE_SILENCE = 60.0
_SILENT = "Slurm has not answered"
# Seconds a failed task's exit waits for its job's end in the queue (an admin's scancel
# shows as CANCELLED a moment after the tasks' SIGTERM).
FAILED_GRACE = 2.0


@dataclass
class _Task:
    rank: int
    container_id: str
    agent: Agent
    order: v1.StartContainer | None = None
    started: bool = False
    exited: bool = False
    # When its exit file first showed a failure (reported after FAILED_GRACE, or with the
    # job's end if Slurm ends it first, so that the error can name Slurm's state).
    failed_at: float | None = None
    # Bytes of out.N / err.N already shipped.
    offsets: dict[str, int] = field(default_factory=lambda: {"stdout": 0, "stderr": 0})


@dataclass
class _Job:
    allocation_id: str
    size: int
    tasks: dict[int, _Task] = field(default_factory=dict)
    job_id: int | None = None
    submitted_at: float = 0.0
    state: str = ""
    reason: str | None = None
    # Orders from the master to kill it: scancel --signal=TERM sent, scancel due at.
    killing: bool = False
    kill_at: float | None = None
    ended_since: float | None = None

    @property
    def complete(self) -> bool:
        return len(self.tasks) == self.size and all(t.order for t in self.tasks.values())


class SlurmPool:
    """One ``type: slurm`` resource pool's virtual agents and jobs."""

    def __init__(
        self,
        cfg: sbatch.SlurmPoolConfig,
        agents: AgentTable,
        events: AgentEvents,
        db: Database,
        *,
        reasons: dict[str, str],
    ) -> None:
        self.cfg = cfg
        self._root = pathlib.Path(cfg.job_storage_root)
        # Allocation id -> what Slurm says of its job (pending reason, failure), for
        # `det job list`.
        self._reasons = reasons
        self._jobs: dict[str, _Job] = {}
        self._mine: list[Agent] = []
        self._agents, self._events, self._db = agents, events, db
        # Why the last submission failed (None once one succeeds): shown on the next
        # allocation's Note while its sbatch runs, so a down controller is visible.
        self._submit_error: str | None = None
        # Since when squeue has failed, and why (None while it answers).
        self._silent_since: float | None = None

    # -- virtual agents -------------------------------------------------------------------

    async def register(self) -> None:
        """Put the pool's virtual agents in the table, connected, with their outboxes."""
        cfg = self.cfg
        nodes = cfg.nodes or await self._partition_nodes()
        name = f"slurm-{cfg.pool_name}"
        if cfg.gres:
            shapes = [(f"{name}-{n}", cfg.slots_per_node) for n in range(nodes)]
        else:
            shapes = [(f"{name}-{n}", 1) for n in range(nodes * cfg.slots_per_node)]
        for agent_id, slots in shapes:
            agent = self._agents.get_or_add(agent_id)
            agent.hostname = f"slurm partition {cfg.partition or '(default)'}"
            agent.address = "127.0.0.1"
            agent.resource_pool = cfg.pool_name
            agent.runtime = "slurm"
            agent.registered_time = agent.registered_time or time.time()
            kind = "cuda" if cfg.gres else "cpu"
            agent.slots = {
                str(i): Slot(id=str(i), type=kind, device=f"{kind}{i}", uuid=f"{agent_id}-{i}")
                for i in range(slots)
            }
            agent.connected = True
            agent.outbox = asyncio.Queue()
            self._mine.append(agent)

    async def _partition_nodes(self) -> int:
        """How many nodes the pool's partition (else the default one) has; 1 if Slurm
        does not say."""
        try:
            text = await slurm_command("sinfo", "-h", "-o", "%P|%D")
        except SlurmCommandError as e:
            log.warning("slurm pool %s: %s; counting 1 node", self.cfg.pool_name, e)
            return 1
        total = 0
        for line in text.splitlines():
            part, _, count = line.strip().partition("|")
            default = part.endswith("*")
            part = part.rstrip("*")
            if count.isdigit() and (
                part == self.cfg.partition or (default and not self.cfg.partition)
            ):
                total += int(count)
        return max(total, 1)

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for agent in self._mine:
                tg.create_task(self._take_orders(agent))
            tg.create_task(self._poll_loop())

    async def _take_orders(self, agent: Agent) -> None:
        assert agent.outbox is not None
        while True:
            msg = await agent.outbox.get()
            if msg is None:
                continue
            try:
                if msg.start is not None:
                    await self._start_order(agent, msg.start)
                elif msg.kill is not None:
                    await self._kill_order(msg.kill)
            except Exception:
                log.exception("slurm pool %s: handling an order failed", self.cfg.pool_name)

    async def _poll_loop(self) -> None:
        while True:
            await asyncio.sleep(POLL_INTERVAL)
            try:
                await self.poll()
            except Exception:
                log.exception("slurm pool %s: a poll failed", self.cfg.pool_name)

    # -- orders ---------------------------------------------------------------------------

    async def _start_order(self, agent: Agent, order: v1.StartContainer) -> None:
        rank = int(order.env.get("DET_CONTAINER_RANK", "0"))
        size = len(json.loads(order.env.get("DET_CONTAINER_SLOT_COUNTS", "[0]")))
        job = self._jobs.get(order.allocation_id)
        if job is None:
            job = self._jobs[order.allocation_id] = _Job(order.allocation_id, size)
        job.tasks[rank] = _Task(rank, order.container_id, agent, order)
        if job.complete and job.job_id is None:
            await self._submit(job)

    async def _submit(self, job: _Job) -> None:
        if self._submit_error is not None:
            self._reasons[job.allocation_id] = (
                f"submitting to Slurm; the last submission failed: {self._submit_error}"
            )
        try:
            alloc_job = self._allocation_job(job)
            job_id = await self._sbatch(alloc_job)
        except (sbatch.SbatchError, SlurmCommandError, OSError) as e:
            # A refused submission fails the run, which the trial retries per its
            # max_restarts: a controller down for good ends the experiment instead of
            # leaving it queued without a word.
            self._submit_error = str(e)
            reason = f"the Slurm job could not be submitted: {e}"
            log.error("allocation %s: %s", job.allocation_id, reason)
            await self._fail_all(job, reason)
            return
        self._submit_error = None
        self._reasons.pop(job.allocation_id, None)
        job.job_id = job_id
        job.submitted_at = time.time()
        log.info("allocation %s is Slurm job %d", job.allocation_id, job_id)
        await self._db.execute(
            "INSERT INTO slurm_jobs (allocation_id, pool, job_id, submit_time) VALUES (?,?,?,?)",
            (job.allocation_id, self.cfg.pool_name, job_id, job.submitted_at),
        )
        await self._log(job, f"submitted as Slurm job {job_id}")

    def _allocation_job(self, job: _Job) -> sbatch.AllocationJob:
        first = job.tasks[0].order
        assert first is not None
        config = json.loads(first.env.get("DET_EXPERIMENT_CONFIG", "{}"))
        slurm_section = config.get("slurm") or {}
        tasks = []
        for rank in range(job.size):
            order = job.tasks[rank].order
            assert order is not None
            tasks.append(sbatch.ContainerTask(rank, len(order.slot_ids), dict(order.env)))
        return sbatch.AllocationJob(
            allocation_id=job.allocation_id,
            tasks=tuple(tasks),
            sbatch_args=tuple(slurm_section.get("sbatch_args") or ()),
            command=tuple(first.argv) or tuple(TASK_ENTRY),
            bindir=os.path.dirname(sys.executable),
        )

    async def _sbatch(self, job: sbatch.AllocationJob) -> int:
        script = sbatch.allocation_script(self.cfg, job)
        out = pathlib.Path(str(sbatch.job_dir(self.cfg, job.allocation_id)))

        def write() -> None:
            out.mkdir(parents=True, exist_ok=True, mode=0o700)
            files = {"task.sh": sbatch.task_wrapper(), "job.sh": script}
            for task in job.tasks:
                files[f"env.{task.rank}"] = sbatch.env_file(task, job.bindir)
            for name, text in files.items():
                path = out / name
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(text)

        await asyncio.to_thread(write)
        text = await slurm_command("sbatch", "--parsable", str(out / "job.sh"))
        first = text.strip().split(";")[0]
        if not first.isdigit():
            raise SlurmCommandError(f"sbatch answered {text.strip()!r}, not a job id")
        return int(first)

    async def _kill_order(self, kill: v1.KillContainer) -> None:
        alloc_id = kill.container_id.rsplit(".", 1)[0]
        job = self._jobs.get(alloc_id)
        if job is None:
            return
        if job.job_id is None:
            await self._fail_all(job, "killed before its Slurm job was submitted")
            return
        if job.killing:
            return
        job.killing = True
        if job.state in ("", "PENDING"):
            # Nothing runs yet that could stop gracefully.
            await self._scancel(job)
            return
        job.kill_at = time.time() + max(kill.grace_seconds, 1.0)
        await self._scancel(job, "--signal=TERM")

    async def _scancel(self, job: _Job, *options: str) -> None:
        try:
            await slurm_command("scancel", *options, str(job.job_id))
        except SlurmCommandError as e:
            log.warning("allocation %s: %s", job.allocation_id, e)

    # -- the queue ------------------------------------------------------------------------

    async def poll(self) -> None:
        """One look at the queue and the jobs' files: what changed is reported."""
        live = [j for j in self._jobs.values() if j.job_id is not None]
        if not live:
            return
        try:
            queue = parse_squeue(await slurm_command(*SQUEUE_ARGS))
        except (SlurmCommandError, ValueError) as e:
            await self._queue_silent(live, str(e))
            # The files need no controller: running tasks' output still reaches their logs.
            for job in live:
                await self._read_files(job, time.time(), final=False)
            return
        if self._silent_since is not None:
            log.info("slurm pool %s: squeue answers again", self.cfg.pool_name)
            self._silent_since = None
            for job in live:
                if self._reasons.get(job.allocation_id, "").startswith(_SILENT):
                    self._reasons.pop(job.allocation_id)
        now = time.time()
        for job in live:
            await self._follow(job, queue.get(job.job_id or 0), now)

    async def _queue_silent(self, live: list[_Job], error: str) -> None:
        """squeue failed: the jobs go on as they were (a controller restart must not fail
        running trials); past QUEUE_SILENCE their Note and log say why nothing moves."""
        now = time.time()
        if self._silent_since is None:
            self._silent_since = now
            log.warning("slurm pool %s: %s", self.cfg.pool_name, error)
        silent = now - self._silent_since
        if silent < QUEUE_SILENCE:
            return
        text = f"{_SILENT} for {silent:.0f}s: {error}"
        for job in live:
            announced = self._reasons.get(job.allocation_id, "").startswith(_SILENT)
            self._reasons[job.allocation_id] = text
            if not announced:
                log.error("allocation %s: %s", job.allocation_id, text)
                await self._log(job, text)

    async def _follow(self, job: _Job, seen: SlurmJob | None, now: float) -> None:
        if job.kill_at is not None and now >= job.kill_at:
            job.kill_at = None
            await self._scancel(job)
        if seen is not None and seen.state != job.state:
            job.state = seen.state
        if seen is not None and seen.phase == "PENDING":
            if seen.reason != job.reason:
                job.reason = seen.reason
                text = f"Slurm job {job.job_id} is pending ({seen.reason or 'no reason given'})"
                self._reasons[job.allocation_id] = text
                await self._log(job, text)
            if seen.never_runs:
                reason = f"Slurm job {job.job_id} can never run: {seen.reason}"
                await self._scancel(job)
                await self._fail_all(job, reason)
            return
        if seen is not None and seen.phase == "RUNNING":
            self._reasons.pop(job.allocation_id, None)
        ended = seen is None or seen.phase not in ("PENDING", "RUNNING")
        await self._read_files(job, now, final=ended)
        if not ended:
            return
        if seen is None and now - job.submitted_at < MISSING_GRACE:
            return
        # Give the exit files written on other nodes a moment to show on the shared root.
        if job.ended_since is None:
            job.ended_since = now
            return
        what = (
            f"Slurm job {job.job_id} ended {seen.state}"
            + (f" ({seen.reason})" if seen.reason else "")
            if seen is not None
            else f"Slurm job {job.job_id} is gone from the queue"
        )
        # A job that Slurm ended other than on its own (cancelled by an admin, timed out,
        # node failure) is a failed run even if its tasks wrote 0.
        by_slurm = seen is None or (seen.phase != "COMPLETED" and not job.killing)
        for task in job.tasks.values():
            if task.exited:
                continue
            code = self._exit_code(job, task)
            if code is None:
                await self._exited(job, task, EXIT_SLURM, f"{what} without an exit code")
            elif by_slurm and code == 0:
                await self._exited(job, task, EXIT_SLURM, f"{what} (the task had exited 0)")
            else:
                await self._exited(job, task, code, what if by_slurm else "")
        self._reasons.pop(job.allocation_id, None)
        self._jobs.pop(job.allocation_id, None)

    async def _read_files(self, job: _Job, now: float, *, final: bool) -> None:
        running = job.state in ("RUNNING", "COMPLETING") or final
        for task in job.tasks.values():
            if task.exited:
                continue
            if not task.started and running and self._file(job, f"started.{task.rank}").exists():
                task.started = True
                await self._events.container_started(
                    task.agent,
                    v1.ContainerStarted(
                        container_id=task.container_id,
                        allocation_id=job.allocation_id,
                        timestamp=time.time(),
                    ),
                )
            await self._ship_logs(job, task)
            code = self._exit_code(job, task)
            # A task that ended well waits for its job's end (Slurm may yet cancel the job);
            # one that failed is reported soon, so that its siblings are stopped.
            if code is not None and code != 0 and not final:
                task.failed_at = task.failed_at or now
                if now - task.failed_at >= FAILED_GRACE:
                    await self._exited(job, task, code, "")

    def _file(self, job: _Job, name: str) -> pathlib.Path:
        return self._root / job.allocation_id / name

    def _exit_code(self, job: _Job, task: _Task) -> int | None:
        try:
            return int(self._file(job, f"exit.{task.rank}").read_text().strip())
        except (OSError, ValueError):
            return None

    async def _ship_logs(self, job: _Job, task: _Task) -> None:
        lines = []
        for stdtype, prefix in (("stdout", "out"), ("stderr", "err")):
            path = self._file(job, f"{prefix}.{task.rank}")
            try:
                with path.open("rb") as f:
                    f.seek(task.offsets[stdtype])
                    data = f.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            if not end:
                continue
            task.offsets[stdtype] += end
            now = time.time()
            for text in data[:end].decode(errors="replace").splitlines():
                lines.append(v1.LogLine(timestamp=now, stdtype=stdtype, text=text))
        if lines:
            await self._events.container_logs(
                task.agent,
                v1.ContainerLogs(
                    container_id=task.container_id, allocation_id=job.allocation_id, lines=lines
                ),
            )

    async def _exited(self, job: _Job, task: _Task, code: int, error: str) -> None:
        if task.exited:
            return
        task.exited = True
        await self._ship_logs(job, task)
        await self._events.container_exited(
            task.agent,
            v1.ContainerExited(
                container_id=task.container_id,
                allocation_id=job.allocation_id,
                exit_code=code,
                error=error,
                timestamp=time.time(),
            ),
        )

    async def _fail_all(self, job: _Job, reason: str) -> None:
        # The reason reaches the trial's log once, as its containers' exit error.
        for task in job.tasks.values():
            await self._exited(job, task, EXIT_SLURM, reason)
        self._jobs.pop(job.allocation_id, None)
        self._reasons.pop(job.allocation_id, None)

    async def _log(self, job: _Job, text: str) -> None:
        """A line in the allocation's log (on its first container) from the pool."""
        task = job.tasks.get(0) or next(iter(job.tasks.values()))
        await self._events.container_logs(
            task.agent,
            v1.ContainerLogs(
                container_id=task.container_id,
                allocation_id=job.allocation_id,
                lines=[v1.LogLine(timestamp=time.time(), stdtype="stderr", text=f"slurm: {text}")],
            ),
        )

    # -- after a master restart -------------------------------------------------------------

    async def adopt(self) -> None:
        """Report the restored allocations' jobs, as a reconnecting agent reports its
        containers: running ones are adopted (never submitted again), ended ones exit, and
        ``pydet-`` jobs of no known allocation are cancelled."""
        restored: dict[str, _Job] = {}
        for agent in self._mine:
            for cid in sorted(agent.containers):
                alloc_id, _, rank = cid.rpartition(".")
                job = restored.setdefault(alloc_id, _Job(alloc_id, 0))
                job.tasks[int(rank)] = _Task(int(rank), cid, agent)
        stored = {
            row["allocation_id"]: int(row["job_id"])
            for row in await self._db.fetch_all(
                "SELECT allocation_id, job_id FROM slurm_jobs WHERE pool = ?", (self.cfg.pool_name,)
            )
        }
        try:
            names = await self._job_names()
            queue = parse_squeue(await slurm_command(*SQUEUE_ARGS))
        except (SlurmCommandError, ValueError) as e:
            log.error(
                "slurm pool %s: cannot read the queue after a restart: %s", self.cfg.pool_name, e
            )
            names, queue = {}, {}
        now = time.time()
        running: dict[str, list[v1.RunningContainer]] = {}
        for alloc_id, job in restored.items():
            job.size = len(job.tasks)
            job.job_id = stored.get(alloc_id) or names.get(alloc_id)
            job.submitted_at = now
            seen = queue.get(job.job_id or 0)
            if job.job_id is None:
                await self._fail_all(job, "its Slurm job was never submitted (the master stopped)")
                continue
            self._jobs[alloc_id] = job
            log.info("allocation %s: adopting Slurm job %d", alloc_id, job.job_id)
            if seen is not None and seen.phase in ("PENDING", "RUNNING"):
                job.state = seen.state
                for task in job.tasks.values():
                    # Output already shipped before the restart is not shipped again.
                    for stdtype, prefix in (("stdout", "out"), ("stderr", "err")):
                        with contextlib.suppress(OSError):
                            task.offsets[stdtype] = (
                                self._file(job, f"{prefix}.{task.rank}").stat().st_size
                            )
                    task.started = seen.phase == "RUNNING"
                    running.setdefault(task.agent.id, []).append(
                        v1.RunningContainer(container_id=task.container_id, allocation_id=alloc_id)
                    )
            else:
                job.ended_since = now - 1.0
                await self._follow(job, seen, now + MISSING_GRACE)
        known = set(restored)
        for alloc_id, job_id in names.items():
            if (
                alloc_id not in known
                and queue.get(job_id)
                and queue[job_id].phase in ("PENDING", "RUNNING")
            ):
                log.warning(
                    "Slurm job %d (pydet-%s) belongs to no allocation; cancelling it",
                    job_id,
                    alloc_id,
                )
                with contextlib.suppress(SlurmCommandError):
                    await slurm_command("scancel", str(job_id))
        for agent in self._mine:
            await self._events.agent_connected(agent, running.get(agent.id, []))

    async def _job_names(self) -> dict[str, int]:
        """Allocation id -> job id of every ``pydet-`` job Slurm still lists."""
        text = await slurm_command("squeue", "-h", "-t", "all", "-o", "%i|%j")
        out = {}
        for line in text.splitlines():
            job_id, _, name = line.strip().partition("|")
            if job_id.isdigit() and name.startswith("pydet-"):
                out[name.removeprefix("pydet-")] = int(job_id)
        return out
