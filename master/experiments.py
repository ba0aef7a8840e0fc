"""Experiments and trials: their state machines, driven by users, the searcher and the
task manager. Every change is written through to the store before it is acknowledged."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from determined.api.gen import v1
from determined.common import context as ctx
from determined.common import entrypoint, errors, expconf
from master import searcher
from master.allocation import Allocation
from master.db import Database
from master.events import EventBus
from master.states import STOPPED, State
from master.tasks import JobInfo, TaskManager, TaskRequest

log = logging.getLogger(__name__)

PAUSE_REASONS = ("paused", "canceled", "preempted")


@dataclass
class Trial:
    id: int
    experiment_id: int
    request_id: str
    state: State
    hparams: dict[str, Any]
    seed: int
    restarts: int = 0
    run_id: int = 0
    steps_completed: int = 0
    latest_checkpoint: str | None = None
    searcher_length: int = 0
    completed_length: int = 0
    searcher_closed: bool = False
    early_exit: str = ""

    @property
    def task_id(self) -> str:
        return f"{self.experiment_id}.{self.id}"


@dataclass
class Experiment:
    id: int
    config: expconf.ExperimentConfig
    state: State
    search: searcher.SearchMethod
    job_id: str = ""
    username: str = ""
    start_time: float = 0.0
    # A position set by `det job update --ahead-of/--behind-of`; 0 keeps submission order.
    queue_order: float = 0.0
    # Where new trials start from (searcher.source_trial_id / source_checkpoint_uuid).
    source_checkpoint: str | None = None
    job: JobInfo = field(default_factory=lambda: JobInfo(job_id="", resource_pool=""))
    searcher_done: bool = False
    trials: dict[int, Trial] = field(default_factory=dict)

    def by_request(self, request_id: str) -> Trial | None:
        return next((t for t in self.trials.values() if t.request_id == request_id), None)


@dataclass(frozen=True)
class MasterInfo:
    cluster_id: str
    master_address: str
    pools: tuple[str, ...]
    default_pool: str
    defaults: dict[str, Any]


_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def shm_bytes(size: int | str | None) -> int:
    """``resources.shm_size`` in bytes (``4G``, ``512M``, or a number); 0 means the default."""
    if size is None:
        return 0
    if isinstance(size, int):
        return size
    text = size.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1] if text and text[-1] in _SIZE_UNITS else ""
    number = text[: len(text) - len(unit)]
    return int(float(number) * _SIZE_UNITS[unit])


class Experiments:
    def __init__(
        self, db: Database, tasks: TaskManager, info: MasterInfo, events: EventBus
    ) -> None:
        self._db = db
        self._events = events
        self._tasks = tasks
        self._info = info
        # Experiments that are not yet terminal; terminal ones live only in the store.
        self.live: dict[int, Experiment] = {}
        self._trials: dict[int, Trial] = {}
        # Applies the checkpoint retention policy after a trial ends (set by the server).
        self.on_trial_end: Callable[[Experiment], Awaitable[None]] | None = None

    # -- lookups -----------------------------------------------------------------------------

    def live_trial(self, trial_id: int) -> tuple[Experiment, Trial] | None:
        trial = self._trials.get(trial_id)
        if trial is None:
            return None
        return self.live[trial.experiment_id], trial

    async def ensure_experiment(self, experiment_id: int) -> None:
        row = await self._db.fetch_one("SELECT id FROM experiments WHERE id = ?", (experiment_id,))
        if row is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")

    # -- creation ----------------------------------------------------------------------------

    def validate(self, text: str) -> expconf.ExperimentConfig:
        cfg = expconf.parse_experiment_config(expconf.load_yaml(text), self._info.defaults)
        pool = cfg.resources.resource_pool or self._info.default_pool
        if pool not in self._info.pools:
            raise errors.InvalidArgument(
                f"resources.resource_pool: no resource pool named {pool!r}; "
                f"the pools are {', '.join(self._info.pools)}"
            )
        return cfg

    async def create(
        self, text: str, context: bytes, *, paused: bool, username: str, parent_id: int = 0
    ) -> int:
        cfg = self.validate(text)
        if not context and parent_id:
            row = await self._db.fetch_one(
                "SELECT data FROM contexts WHERE experiment_id = ?", (parent_id,)
            )
            if row is None:
                raise errors.NotFound(f"experiment {parent_id} not found")
            context = bytes(row["data"])
        source = await self._source_checkpoint(cfg)
        try:
            files = {path for path, _ in ctx.context_files(context)}
        except Exception as e:
            raise errors.InvalidArgument(f"the context is not a valid archive: {e}") from None
        if len(context) > ctx.MAX_CONTEXT_BYTES:
            raise errors.InvalidArgument("the context is over the 95 MiB limit")
        entrypoint.check(cfg.entrypoint, files)
        seed = cfg.reproducibility.experiment_seed
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
            cfg = cfg.with_seed(seed)
        search = searcher.new_search(cfg, seed)
        state = State.PAUSED if paused else State.ACTIVE
        job_id = uuid.uuid4().hex[:8]
        start_time = time.time()
        ids = await self._db.transaction(
            [
                (
                    "INSERT INTO experiments (name, description, labels, state, config,"
                    " original_config, username, start_time, parent_id, job_id)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        cfg.name or "",
                        cfg.description or "",
                        json.dumps(list(cfg.labels)),
                        state.value,
                        json.dumps(cfg.to_dict()),
                        text,
                        username,
                        start_time,
                        parent_id or None,
                        job_id,
                    ),
                ),
                (
                    "INSERT INTO contexts (experiment_id, data) VALUES (last_insert_rowid(), ?)",
                    (context,),
                ),
            ]
        )
        exp = Experiment(
            id=ids[0],
            config=cfg,
            state=state,
            search=search,
            job_id=job_id,
            username=username,
            start_time=start_time,
            source_checkpoint=source,
        )
        exp.job = self.job_info(exp.id, job_id, cfg, 0.0)
        self.live[exp.id] = exp
        self._events.publish("experiment", id=exp.id, state=state.value)
        await self._apply(exp, search.initial_operations())
        log.info("created experiment %d", exp.id)
        return exp.id

    async def _source_checkpoint(self, cfg: expconf.ExperimentConfig) -> str | None:
        """The checkpoint new trials continue from, checked before anything is created."""
        uuid_ = cfg.searcher.source_checkpoint_uuid
        if uuid_:
            row = await self._db.fetch_one(
                "SELECT uuid FROM checkpoints WHERE uuid = ? AND state != 'DELETED'", (uuid_,)
            )
            if row is None:
                raise errors.NotFound(
                    f"searcher.source_checkpoint_uuid: checkpoint {uuid_} not found"
                )
            return uuid_
        trial_id = cfg.searcher.source_trial_id
        if trial_id:
            row = await self._db.fetch_one(
                "SELECT latest_checkpoint FROM trials WHERE id = ?", (trial_id,)
            )
            if row is None:
                raise errors.NotFound(f"searcher.source_trial_id: trial {trial_id} not found")
            if row["latest_checkpoint"] is None:
                raise errors.FailedPrecondition(
                    f"searcher.source_trial_id: trial {trial_id} has no checkpoint to continue from"
                )
            return str(row["latest_checkpoint"])
        return None

    # -- searcher operations -----------------------------------------------------------------

    async def _apply(self, exp: Experiment, ops: list[searcher.Operation]) -> None:
        queue = list(ops)
        while queue:
            op = queue.pop(0)
            if isinstance(op, searcher.Create):
                if exp.state.stopping:
                    continue  # the experiment is ending: no new trials
                trial = await self._create_trial(exp, op)
                queue += exp.search.on_trial_created(trial.request_id)
                continue
            if isinstance(op, searcher.Shutdown):
                exp.searcher_done = True
                continue
            trial_or_none = exp.by_request(op.request_id)
            if trial_or_none is None or trial_or_none.state.terminal:
                continue
            trial = trial_or_none
            idle = self._idle(trial)
            if isinstance(op, searcher.ValidateAfter):
                trial.searcher_length = op.length
                await self._save_trial(trial)
                # A trial waiting for the searcher's verdict was promoted: run it again,
                # from its latest checkpoint, to the longer length.
                if idle and exp.state == State.ACTIVE and trial.state == State.ACTIVE:
                    self._request(exp, trial)
            elif isinstance(op, searcher.Close):
                trial.searcher_closed = True
                await self._save_trial(trial)
                if idle:
                    self._tasks.withdraw(trial.task_id)
                    await self._end_trial(exp, trial, State.COMPLETED)
                    queue += exp.search.on_trial_closed(trial.request_id)
            elif isinstance(op, searcher.Stop):
                trial.searcher_closed = True
                await self._save_trial(trial)
                alloc = self._tasks.allocation_of(trial.task_id)
                if alloc is not None:
                    self._tasks.preempt(
                        alloc, reason="stopped", timeout=exp.config.preemption_timeout
                    )
                else:
                    self._tasks.withdraw(trial.task_id)
                    await self._end_trial(exp, trial, State.COMPLETED)
                    queue += exp.search.on_trial_closed(trial.request_id)
        await self._db.execute(
            "UPDATE experiments SET searcher_state = ?, progress = ? WHERE id = ?",
            (
                json.dumps({"method": exp.search.state_dict(), "done": exp.searcher_done}),
                exp.search.progress(),
                exp.id,
            ),
        )
        await self._maybe_finish(exp)

    def _idle(self, trial: Trial) -> bool:
        """Neither running nor waiting for slots (e.g. waiting for the searcher's verdict)."""
        return (
            self._tasks.allocation_of(trial.task_id) is None
            and trial.task_id not in self._tasks.pending
        )

    async def _create_trial(self, exp: Experiment, op: searcher.Create) -> Trial:
        trial_id = await self._db.execute(
            "INSERT INTO trials (experiment_id, request_id, state, hparams, seed, start_time)"
            " VALUES (?,?,?,?,?,?)",
            (
                exp.id,
                op.request_id,
                State.ACTIVE.value,
                json.dumps(op.hparams),
                op.seed,
                time.time(),
            ),
        )
        trial = Trial(
            id=trial_id,
            experiment_id=exp.id,
            request_id=op.request_id,
            state=State.ACTIVE if exp.state == State.ACTIVE else State.PAUSED,
            hparams=op.hparams,
            seed=op.seed,
            latest_checkpoint=exp.source_checkpoint,
        )
        exp.trials[trial.id] = trial
        self._trials[trial.id] = trial
        await self._save_trial(trial)
        if trial.state == State.ACTIVE:
            self._request(exp, trial)
        return trial

    def _request(self, exp: Experiment, trial: Trial) -> None:
        res = exp.config.resources
        self._tasks.request(
            TaskRequest(
                task_id=trial.task_id,
                trial_id=trial.id,
                slots=res.slots_per_trial,
                job=exp.job,
                single_node=bool(res.is_single_node),
            )
        )

    def job_info(
        self, exp_id: int, job_id: str, cfg: expconf.ExperimentConfig, order: float
    ) -> JobInfo:
        res = cfg.resources
        return JobInfo(
            job_id=job_id,
            resource_pool=res.resource_pool or self._info.default_pool,
            priority=res.priority if res.priority is not None else 42,
            weight=res.weight,
            order=order or float(exp_id),
            max_slots=res.max_slots,
            preemption_timeout=float(cfg.preemption_timeout),
        )

    async def update_job(
        self,
        exp: Experiment,
        *,
        priority: int | None = None,
        weight: float | None = None,
        resource_pool: str | None = None,
        max_slots: int | None = None,
        order: float | None = None,
    ) -> None:
        """Change where a job stands; its requests and allocations see it at once."""
        res = exp.config.resources
        changes: dict[str, Any] = {}
        if priority is not None:
            changes["priority"] = exp.job.priority = priority
        if weight is not None:
            changes["weight"] = exp.job.weight = weight
        if resource_pool is not None:
            if resource_pool not in self._info.pools:
                raise errors.NotFound(f"resource pool {resource_pool!r} not found")
            changes["resource_pool"] = exp.job.resource_pool = resource_pool
        if max_slots is not None:
            changes["max_slots"] = exp.job.max_slots = max_slots
        if changes:
            exp.config = dataclasses.replace(
                exp.config, resources=dataclasses.replace(res, **changes)
            )
        if order is not None:
            exp.job.order = exp.queue_order = order
        await self._db.execute(
            "UPDATE experiments SET config = ?, queue_order = ? WHERE id = ?",
            (json.dumps(exp.config.to_dict()), exp.queue_order, exp.id),
        )
        self._tasks.wake()

    async def _save_trial(self, t: Trial, *, ended: bool = False) -> None:
        await self._db.execute(
            "UPDATE trials SET state = ?, restarts = ?, run_id = ?, steps_completed = ?,"
            " latest_checkpoint = ?, searcher_length = ?, completed_length = ?,"
            " searcher_closed = ?, early_exit = ?, end_time = COALESCE(?, end_time) WHERE id = ?",
            (
                t.state.value,
                t.restarts,
                t.run_id,
                t.steps_completed,
                t.latest_checkpoint,
                t.searcher_length,
                t.completed_length,
                int(t.searcher_closed),
                t.early_exit,
                time.time() if ended else None,
                t.id,
            ),
        )
        self._events.publish("trial", id=t.id, experiment_id=t.experiment_id, state=t.state.value)

    async def _set_state(self, exp: Experiment, state: State) -> None:
        exp.state = state
        await self._db.execute(
            "UPDATE experiments SET state = ?, end_time = ? WHERE id = ?",
            (state.value, time.time() if state.terminal else None, exp.id),
        )
        self._events.publish("experiment", id=exp.id, state=state.value)

    async def _end_trial(self, exp: Experiment, trial: Trial, state: State) -> None:
        trial.state = state
        await self._save_trial(trial, ended=True)
        self._trials.pop(trial.id, None)
        if self.on_trial_end is not None:
            try:
                await self.on_trial_end(exp)
            except Exception:
                # Retention is housekeeping: the trial has ended whatever happens to its files.
                log.exception("experiment %d: checkpoint retention failed", exp.id)

    async def _maybe_finish(self, exp: Experiment) -> None:
        if exp.state.terminal or any(not t.state.terminal for t in exp.trials.values()):
            return
        if exp.state.stopping:
            final = STOPPED[exp.state]
        elif exp.state == State.ACTIVE and exp.searcher_done:
            states = [t.state for t in exp.trials.values()]
            if State.COMPLETED in states:
                final = State.COMPLETED
            elif states and all(s == State.ERROR for s in states):
                final = State.ERROR
            else:
                final = State.CANCELED
        else:
            return
        await self._set_state(exp, final)
        await self._db.execute(
            "UPDATE experiments SET progress = ? WHERE id = ?",
            (1.0 if final == State.COMPLETED else exp.search.progress(), exp.id),
        )
        del self.live[exp.id]
        log.info("experiment %d finished: %s", exp.id, final.value)

    # -- the task manager's callbacks (TaskOwner) --------------------------------------------------

    async def allocation_placed(
        self, request: TaskRequest, allocation: Allocation
    ) -> list[v1.StartContainer]:
        found = self.live_trial(request.trial_id or 0)
        if found is None:
            raise RuntimeError(
                f"allocation {allocation.id} placed for unknown task {request.task_id}"
            )
        exp, trial = found
        trial.run_id += 1
        await self._save_trial(trial)
        steps = 0
        if trial.latest_checkpoint:
            row = await self._db.fetch_one(
                "SELECT steps_completed FROM checkpoints WHERE uuid = ?", (trial.latest_checkpoint,)
            )
            steps = int(row["steps_completed"]) if row is not None else 0
        return self._start_orders(exp, trial, allocation, steps)

    def _start_orders(
        self, exp: Experiment, trial: Trial, alloc: Allocation, steps_completed: int
    ) -> list[v1.StartContainer]:
        cfg = exp.config
        containers = sorted(alloc.containers.values(), key=lambda c: c.rank)
        agents = self._tasks.agents
        addrs = [agents[c.agent_id].address for c in containers]
        counts = [len(c.slot_ids) for c in containers]
        orders = []
        for c in containers:
            agent = agents[c.agent_id]
            slots = [agent.slots[s] for s in c.slot_ids if s in agent.slots]
            cuda = any(s.type == "cuda" for s in slots)
            env = {
                "DET_MASTER": self._info.master_address,
                "DET_CLUSTER_ID": self._info.cluster_id,
                "DET_AGENT_ID": c.agent_id,
                "DET_SLOT_IDS": json.dumps([int(s) if s.isdigit() else s for s in c.slot_ids]),
                "DET_TASK_ID": trial.task_id,
                "DET_ALLOCATION_ID": alloc.id,
                "DET_SESSION_TOKEN": alloc.token,
                "DET_TASK_TYPE": "TRIAL",
                "DET_TRIAL_ID": str(trial.id),
                "DET_EXPERIMENT_ID": str(exp.id),
                "DET_TRIAL_SEED": str(trial.seed),
                "DET_HPARAMS": json.dumps(trial.hparams),
                "DET_EXPERIMENT_CONFIG": json.dumps(cfg.to_dict()),
                "DET_STEPS_COMPLETED": str(steps_completed),
                "DET_TRIAL_RUN_ID": str(trial.run_id),
                "DET_CONTAINER_ADDRS": json.dumps(addrs),
                "DET_CONTAINER_RANK": str(c.rank),
                "DET_CONTAINER_SLOT_COUNTS": json.dumps(counts),
                "DET_GPU_UUIDS": json.dumps([s.uuid for s in slots if s.type == "cuda"]),
            }
            if trial.latest_checkpoint:
                env["DET_LATEST_CHECKPOINT"] = trial.latest_checkpoint
            variables = cfg.environment.environment_variables
            for item in variables.cuda if cuda else variables.cpu:
                key, _, value = item.partition("=")
                env[key] = value
            image = cfg.environment.image
            auth = cfg.environment.registry_auth
            orders.append(
                v1.StartContainer(
                    container_id=c.id,
                    allocation_id=alloc.id,
                    task_id=trial.task_id,
                    argv=["python3", "-m", "determined.exec.launch"],
                    env=env,
                    slot_ids=list(c.slot_ids),
                    spec=v1.ContainerSpec(
                        image=(image.cuda if cuda else image.cpu) or "",
                        force_pull=cfg.environment.force_pull_image,
                        bind_mounts=[
                            v1.BindMount(
                                host_path=m.host_path,
                                container_path=m.container_path,
                                read_only=m.read_only,
                                propagation=m.propagation,
                            )
                            for m in cfg.bind_mounts
                        ],
                        shm_size=shm_bytes(cfg.resources.shm_size),
                        registry_auth=json.dumps(auth.to_dict()) if auth is not None else "",
                        devices=[
                            v1.Device(
                                host_path=d.host_path, container_path=d.container_path, mode=d.mode
                            )
                            for d in cfg.resources.devices
                        ],
                        add_capabilities=list(cfg.environment.add_capabilities),
                        drop_capabilities=list(cfg.environment.drop_capabilities),
                        labels={
                            "ai.pydet.allocation": alloc.id,
                            "ai.pydet.container": c.id,
                            "ai.pydet.task": trial.task_id,
                        },
                    ),
                )
            )
        return orders

    async def allocation_exited(self, alloc: Allocation) -> None:
        found = self.live_trial(alloc.trial_id or 0)
        if found is None:
            return
        exp, trial = found
        ops: list[searcher.Operation] = []
        failure = alloc.first_failure()
        if alloc.stop_reason == "killed":
            await self._end_trial(exp, trial, State.CANCELED)
            ops = exp.search.on_trial_exited_early(trial.request_id, "user_canceled")
        elif trial.early_exit:
            # The code said it cannot go on (det.InvalidHP, or an explicit early exit).
            end = {"invalid_hp": State.COMPLETED, "user_canceled": State.CANCELED}
            await self._end_trial(exp, trial, end.get(trial.early_exit, State.ERROR))
            ops = exp.search.on_trial_exited_early(trial.request_id, trial.early_exit)
        elif alloc.stop_reason == "stopped":
            # Stopped early by the searcher: a finished trial, not a failed one.
            await self._end_trial(exp, trial, State.COMPLETED)
            ops = exp.search.on_trial_closed(trial.request_id)
        elif failure is None and not alloc.preemption_acked:
            if self._promoted_while_exiting(trial):
                # The searcher gave it a longer operation after it had run out of work.
                await self._resume_or_park(exp, trial)
            elif self._waiting_for_verdict(trial):
                # It finished its operation; the searcher will promote or close it later.
                await self._park_waiting(exp, trial)
            else:
                await self._end_trial(exp, trial, State.COMPLETED)
                ops = exp.search.on_trial_closed(trial.request_id)
        elif failure is None or alloc.stop_reason in PAUSE_REASONS:
            # It acknowledged preemption and exited, or was killed after the preemption
            # timeout: either way it resumes from its latest checkpoint.
            await self._resume_or_park(exp, trial)
        else:
            trial.restarts += 1
            code = failure.exit_code
            if trial.restarts > exp.config.max_restarts:
                await self._tasks.master_log(
                    alloc,
                    f"trial {trial.id} failed (exit code {code}) and used all "
                    f"{exp.config.max_restarts} restarts; it ends in ERROR",
                )
                await self._end_trial(exp, trial, State.ERROR)
                ops = exp.search.on_trial_exited_early(trial.request_id, "errored")
            else:
                await self._tasks.master_log(
                    alloc,
                    f"trial {trial.id} failed (exit code {code}); restarting "
                    f"({trial.restarts} of {exp.config.max_restarts})",
                )
                await self._resume_or_park(exp, trial)
        await self._apply(exp, ops)

    @staticmethod
    def _promoted_while_exiting(trial: Trial) -> bool:
        return (
            not trial.searcher_closed
            and trial.completed_length > 0
            and trial.searcher_length > trial.completed_length
        )

    @staticmethod
    def _waiting_for_verdict(trial: Trial) -> bool:
        return (
            not trial.searcher_closed
            and trial.searcher_length > 0
            and trial.completed_length >= trial.searcher_length
        )

    async def _park_waiting(self, exp: Experiment, trial: Trial) -> None:
        """A trial with no process that waits for the searcher's verdict: it waits as ACTIVE,
        is PAUSED with its experiment, and ends when its experiment is being stopped."""
        if exp.state == State.ACTIVE:
            await self._save_trial(trial)
        else:
            await self._resume_or_park(exp, trial)

    async def _resume_or_park(self, exp: Experiment, trial: Trial) -> None:
        if exp.state == State.ACTIVE:
            self._request(exp, trial)
            await self._save_trial(trial)
        elif exp.state == State.PAUSED:
            trial.state = State.PAUSED
            await self._save_trial(trial)
        else:
            await self._end_trial(exp, trial, STOPPED.get(exp.state, State.CANCELED))

    # -- what running trials ask of the searcher -------------------------------------------------

    async def current_operation(self, trial_id: int) -> int | None:
        """The length the trial should train to, or None when the searcher is done with it."""
        found = self.live_trial(trial_id)
        if found is None:
            row = await self._db.fetch_one("SELECT id FROM trials WHERE id = ?", (trial_id,))
            if row is None:
                raise errors.NotFound(f"trial {trial_id} not found")
            return None
        trial = found[1]
        if trial.searcher_closed or trial.completed_length >= trial.searcher_length > 0:
            return None
        return trial.searcher_length

    async def complete_operation(self, trial_id: int, length: int, metric: float) -> None:
        found = self.live_trial(trial_id)
        if found is None:
            raise errors.FailedPrecondition(f"trial {trial_id} is not running")
        exp, trial = found
        trial.completed_length = max(trial.completed_length, length)
        await self._save_trial(trial)
        await self._apply(exp, exp.search.on_validation_completed(trial.request_id, metric, length))

    async def validation_reported(
        self, trial_id: int, metrics: dict[str, Any], steps_completed: int
    ) -> None:
        found = self.live_trial(trial_id)
        if found is None:
            return
        exp, trial = found
        ops = exp.search.on_validation_reported(trial.request_id, metrics, steps_completed)
        if ops:
            await self._apply(exp, ops)

    async def early_exit(self, trial_id: int, reason: str) -> None:
        found = self.live_trial(trial_id)
        if found is None:
            raise errors.FailedPrecondition(f"trial {trial_id} is not running")
        if reason not in ("invalid_hp", "errored", "user_canceled"):
            raise errors.InvalidArgument(
                f"early exit reason {reason!r}: expected invalid_hp, errored or user_canceled"
            )
        trial = found[1]
        trial.early_exit = reason
        await self._save_trial(trial)

    # -- user actions ----------------------------------------------------------------------------

    async def _live(self, experiment_id: int, action: str) -> Experiment | None:
        exp = self.live.get(experiment_id)
        if exp is None:
            await self.ensure_experiment(experiment_id)
        return exp

    async def kill(self, experiment_id: int) -> None:
        exp = await self._live(experiment_id, "kill")
        if exp is None:
            return
        await self._set_state(exp, State.STOPPING_KILLED)
        for trial in list(exp.trials.values()):
            await self._kill_trial(exp, trial)
        await self._maybe_finish(exp)

    async def kill_trial(self, trial_id: int) -> None:
        found = self.live_trial(trial_id)
        if found is None:
            row = await self._db.fetch_one("SELECT id FROM trials WHERE id = ?", (trial_id,))
            if row is None:
                raise errors.NotFound(f"trial {trial_id} not found")
            return
        exp, trial = found
        await self._kill_trial(exp, trial)
        await self._maybe_finish(exp)

    async def _kill_trial(self, exp: Experiment, trial: Trial) -> None:
        if trial.state.terminal:
            return
        alloc = self._tasks.allocation_of(trial.task_id)
        if alloc is not None:
            alloc.stop_reason = "killed"
            self._tasks.kill(alloc, reason="killed", grace=3.0)
            return
        self._tasks.withdraw(trial.task_id)
        await self._end_trial(exp, trial, State.CANCELED)
        await self._apply(exp, exp.search.on_trial_exited_early(trial.request_id, "user_canceled"))

    async def pause(self, experiment_id: int) -> None:
        exp = await self._live(experiment_id, "pause")
        if exp is None or exp.state != State.ACTIVE:
            return
        await self._set_state(exp, State.PAUSED)
        await self._stop_trials(exp, "paused")

    async def cancel(self, experiment_id: int) -> None:
        exp = await self._live(experiment_id, "cancel")
        if exp is None or exp.state.stopping:
            return
        await self._set_state(exp, State.STOPPING_CANCELED)
        await self._stop_trials(exp, "canceled")
        await self._maybe_finish(exp)

    async def _stop_trials(self, exp: Experiment, reason: str) -> None:
        """Ask running trials to checkpoint and exit; pause or cancel the others (waiting for
        slots, already paused, or waiting for the searcher's verdict)."""
        for trial in list(exp.trials.values()):
            if trial.state.terminal:
                continue
            alloc = self._tasks.allocation_of(trial.task_id)
            if alloc is not None:
                self._tasks.preempt(alloc, reason=reason, timeout=exp.config.preemption_timeout)
                continue
            self._tasks.withdraw(trial.task_id)
            if reason != "paused":
                await self._end_trial(exp, trial, State.CANCELED)
            elif trial.state != State.PAUSED:
                trial.state = State.PAUSED
                await self._save_trial(trial)

    async def activate(self, experiment_id: int) -> None:
        exp = await self._live(experiment_id, "activate")
        if exp is None:
            raise errors.FailedPrecondition(f"experiment {experiment_id} has ended")
        if exp.state != State.PAUSED:
            return
        await self._set_state(exp, State.ACTIVE)
        for trial in exp.trials.values():
            if trial.state == State.PAUSED:
                trial.state = State.ACTIVE
                await self._save_trial(trial)
                if self._waiting_for_verdict(trial):
                    continue  # nothing to run until the searcher promotes it
                if self._tasks.allocation_of(trial.task_id) is None:
                    self._request(exp, trial)

    async def set_archived(self, experiment_id: int, archived: bool) -> None:
        await self.ensure_experiment(experiment_id)
        if archived and experiment_id in self.live:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is still running; only ended experiments can be "
                "archived"
            )
        await self._db.execute(
            "UPDATE experiments SET archived = ? WHERE id = ?", (int(archived), experiment_id)
        )

    async def delete(self, experiment_id: int) -> list[tuple[str, str]]:
        """Delete an ended experiment; returns (uuid, storage) of checkpoints to remove."""
        await self.ensure_experiment(experiment_id)
        if experiment_id in self.live:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is still running; kill it before deleting it"
            )
        rows = await self._db.fetch_all(
            "SELECT uuid, storage FROM checkpoints WHERE experiment_id = ? AND state != 'DELETED'",
            (experiment_id,),
        )
        await self._db.transaction(
            [
                (
                    "DELETE FROM task_logs WHERE trial_id IN "
                    "(SELECT id FROM trials WHERE experiment_id = ?)",
                    (experiment_id,),
                ),
                ("DELETE FROM checkpoints WHERE experiment_id = ?", (experiment_id,)),
                ("DELETE FROM experiments WHERE id = ?", (experiment_id,)),
            ]
        )
        return [(r["uuid"], r["storage"]) for r in rows]

    # -- restore after a master restart -------------------------------------------------------

    async def restore(self, allocations: list[Allocation]) -> None:
        running = {a.trial_id: a for a in allocations}
        rows = await self._db.fetch_all(
            "SELECT * FROM experiments WHERE state NOT IN ('COMPLETED', 'CANCELED', 'ERROR')"
        )
        for row in rows:
            cfg = expconf.parse_experiment_config(json.loads(row["config"]))
            seed = cfg.reproducibility.experiment_seed or 0
            search = searcher.new_search(cfg, seed)
            state = json.loads(row["searcher_state"] or "{}")
            search.load_state_dict(state.get("method", {}))
            exp = Experiment(
                id=row["id"],
                config=cfg,
                state=State(row["state"]),
                search=search,
                job_id=row["job_id"],
                username=row["username"],
                start_time=row["start_time"],
                queue_order=row["queue_order"] or 0.0,
                searcher_done=bool(state.get("done", False)),
            )
            exp.job = self.job_info(exp.id, exp.job_id, cfg, exp.queue_order)
            try:
                exp.source_checkpoint = await self._source_checkpoint(cfg)
            except errors.DetError:
                exp.source_checkpoint = None
            self.live[exp.id] = exp
            for t in await self._db.fetch_all(
                "SELECT * FROM trials WHERE experiment_id = ?", (exp.id,)
            ):
                trial = Trial(
                    id=t["id"],
                    experiment_id=exp.id,
                    request_id=t["request_id"],
                    state=State(t["state"]),
                    hparams=json.loads(t["hparams"]),
                    seed=t["seed"],
                    restarts=t["restarts"],
                    run_id=t["run_id"],
                    steps_completed=t["steps_completed"],
                    latest_checkpoint=t["latest_checkpoint"],
                    searcher_length=t["searcher_length"],
                    completed_length=t["completed_length"],
                    searcher_closed=bool(t["searcher_closed"]),
                    early_exit=t["early_exit"],
                )
                exp.trials[trial.id] = trial
                if trial.state.terminal:
                    continue
                self._trials[trial.id] = trial
                alloc = running.get(trial.id)
                if alloc is not None:
                    alloc.job = exp.job
                    if exp.state == State.PAUSED:
                        self._tasks.preempt(alloc, reason="paused", timeout=cfg.preemption_timeout)
                    elif exp.state == State.STOPPING_CANCELED:
                        self._tasks.preempt(
                            alloc, reason="canceled", timeout=cfg.preemption_timeout
                        )
                    elif exp.state == State.STOPPING_KILLED:
                        self._tasks.kill(alloc, reason="killed", grace=3.0)
                elif exp.state == State.ACTIVE and trial.state == State.ACTIVE:
                    if not self._waiting_for_verdict(trial):
                        self._request(exp, trial)
                elif exp.state.stopping:
                    await self._end_trial(exp, trial, STOPPED[exp.state])
            await self._maybe_finish(exp)
        log.info("restored %d live experiments", len(self.live))
