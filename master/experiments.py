"""Experiments and trials: their state machines, driven by users, the searcher and the
task manager. Every change is written through to the store before it is acknowledged."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from determined.api.gen import v1
from determined.common import context as ctx
from determined.common import entrypoint, errors, expconf
from master import queries, task_spec
from master import trial_lifecycle as lifecycle
from master.allocation import Allocation
from master.db import Database, Row
from master.events import EventBus
from master.search import searcher
from master.states import STOPPED, State
from master.task_list import JobInfo, TaskList, TaskRequest
from master.trial_lifecycle import TrialEvent, TrialPhase

log = logging.getLogger(__name__)

E = TrialEvent
P = TrialPhase

_Args = ParamSpec("_Args")
_R = TypeVar("_R")


def _transition(
    method: Callable[Concatenate[Experiments, _Args], Awaitable[_R]],
) -> Callable[Concatenate[Experiments, _Args], Coroutine[Any, Any, _R]]:
    """One transition, one database transaction: every write the method makes (trial and
    allocation rows, the searcher's state, the experiment's state, checkpoint retention
    marks) commits together or not at all. Callers hold the master's lock."""

    async def transition(self: Experiments, /, *args: _Args.args, **kwargs: _Args.kwargs) -> _R:
        async with self._db.atomic():
            return await method(self, *args, **kwargs)

    transition.__name__ = method.__name__
    transition.__doc__ = method.__doc__
    return transition


@dataclass
class Trial:
    id: int
    experiment_id: int
    request_id: str
    # Changed only by Experiments._fire, through the lifecycle's transition table.
    phase: TrialPhase
    hparams: dict[str, Any]
    seed: int
    restarts: int = 0
    run_id: int = 0
    steps_completed: int = 0
    latest_checkpoint: str | None = None
    searcher_length: int = 0
    completed_length: int = 0
    # Why its code said it exits early ("invalid_hp", "errored", "user_canceled"), or "".
    early_exit: str = ""

    @property
    def state(self) -> State:
        return lifecycle.trial_state(self.phase)

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


class CheckpointRecords(Protocol):
    """Where trials' checkpoints are recorded, and pruned by the retention policy."""

    async def record(self, checkpoint: v1.Checkpoint) -> None: ...

    async def apply_retention(self, exp: Experiment) -> None:
        """Delete the checkpoints the experiment's retention policy no longer keeps."""


class Experiments:
    def __init__(
        self,
        db: Database,
        tasks: TaskList,
        checkpoints: CheckpointRecords,
        info: MasterInfo,
        events: EventBus,
    ) -> None:
        self._db = db
        self._events = events
        self._tasks = tasks
        self._checkpoints = checkpoints
        self._info = info
        # Experiments that are not yet terminal; terminal ones live only in the store.
        self.live: dict[int, Experiment] = {}
        self._trials: dict[int, Trial] = {}

    # -- lookups -----------------------------------------------------------------------------

    def live_trial(self, trial_id: int) -> tuple[Experiment, Trial] | None:
        trial = self._trials.get(trial_id)
        if trial is None:
            return None
        return self.live[trial.experiment_id], trial

    async def ensure_experiment(self, experiment_id: int) -> None:
        await queries.ensure_experiment(self._db, experiment_id)

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

    @_transition
    async def create(
        self, text: str, context: bytes, *, paused: bool, username: str, parent_id: int = 0
    ) -> int:
        cfg = self.validate(text)
        if not context and parent_id:
            context = await queries.context(self._db, parent_id)
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
            found = exp.by_request(op.request_id)
            if found is None or found.phase.terminal:
                continue
            trial = found
            if isinstance(op, searcher.ValidateAfter):
                event, length = E.PROMOTED, op.length
            else:
                event = E.CLOSED if isinstance(op, searcher.Close) else E.STOPPED
                length = trial.searcher_length
            try:
                lifecycle.next_phase(trial.phase, event)
            except lifecycle.IllegalTransition as e:
                log.error("experiment %d: the searcher's %s was refused: %s", exp.id, op, e)
                continue
            trial.searcher_length = length
            queue += await self._fire(exp, trial, event)
        await self._db.execute(
            "UPDATE experiments SET searcher_state = ?, progress = ? WHERE id = ?",
            (
                json.dumps({"method": exp.search.state_dict(), "done": exp.searcher_done}),
                exp.search.progress(),
                exp.id,
            ),
        )
        await self._maybe_finish(exp)

    async def _fire(
        self, exp: Experiment, trial: Trial, event: TrialEvent
    ) -> list[searcher.Operation]:
        """Move the trial by ``event`` (through the lifecycle's table; a trial left waiting
        for slots or for the verdict then follows its paused or stopping experiment), carry
        out the orders that go with it, and persist it. Returns the searcher's operations
        when the move ended the trial."""
        before = trial.phase
        after = lifecycle.next_phase(before, event)
        cause = event
        follow = lifecycle.experiment_event(exp.state)
        if after in lifecycle.FOLLOWS_EXPERIMENT and follow is not None:
            cause = follow
            after = lifecycle.next_phase(after, follow)
        trial.phase = after
        if after is not P.QUEUED:
            self._tasks.withdraw(trial.task_id)
        elif before is not P.QUEUED or event is E.MASTER_RESTORED:
            self._request(exp, trial)
        alloc = self._tasks.allocation_of(trial.task_id)
        if alloc is not None and after.has_process:
            if event is E.KILLED:
                await self._kill(alloc)
            elif event in (E.PAUSED, E.CANCELED, E.STOPPED) and after is not P.KILLING:
                await self._preempt(exp, alloc, reason=event.value)
        if not after.terminal:
            await self._save_trial(trial)
            return []
        await self._save_trial(trial, ended=True)
        self._trials.pop(trial.id, None)
        try:
            await self._checkpoints.apply_retention(exp)
        except Exception:
            # Retention is housekeeping: the trial has ended whatever happens to its files.
            log.exception("experiment %d: checkpoint retention failed", exp.id)
        report = lifecycle.searcher_report(cause, after)
        if report == lifecycle.CLOSED:
            return exp.search.on_trial_closed(trial.request_id)
        if report is not None:
            return exp.search.on_trial_exited_early(trial.request_id, report)
        return []

    async def _kill(self, alloc: Allocation) -> None:
        """Order the allocation's containers killed once the transition has committed (a
        master restarted before that gives the order again, from the trial's phase)."""
        alloc.stop_reason = "killed"

        async def order() -> None:
            self._tasks.kill(alloc, reason="killed", grace=3.0)

        await self._db.after_commit(order)

    async def _preempt(self, exp: Experiment, alloc: Allocation, *, reason: str) -> None:
        """Ask the allocation to checkpoint and exit once the transition has committed."""

        async def order() -> None:
            self._tasks.preempt(alloc, reason=reason, timeout=exp.config.preemption_timeout)

        await self._db.after_commit(order)

    async def _create_trial(self, exp: Experiment, op: searcher.Create) -> Trial:
        # A new trial waits for slots, or is paused with its experiment.
        phase = P.QUEUED
        follow = lifecycle.experiment_event(exp.state)
        if follow is not None:
            phase = lifecycle.next_phase(phase, follow)
        trial_id = await self._db.execute(
            "INSERT INTO trials (experiment_id, request_id, state, phase, hparams, seed,"
            " start_time, latest_checkpoint) VALUES (?,?,?,?,?,?,?,?)",
            (
                exp.id,
                op.request_id,
                lifecycle.trial_state(phase).value,
                phase.value,
                json.dumps(op.hparams),
                op.seed,
                time.time(),
                exp.source_checkpoint,
            ),
        )
        trial = Trial(
            id=trial_id,
            experiment_id=exp.id,
            request_id=op.request_id,
            phase=phase,
            hparams=op.hparams,
            seed=op.seed,
            latest_checkpoint=exp.source_checkpoint,
        )
        exp.trials[trial.id] = trial
        self._trials[trial.id] = trial
        self._events.publish(
            "trial", id=trial.id, experiment_id=exp.id, state=trial.state.value, phase=phase.value
        )
        if phase is P.QUEUED:
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

    @_transition
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
            "UPDATE trials SET state = ?, phase = ?, restarts = ?, run_id = ?,"
            " steps_completed = ?, latest_checkpoint = ?, searcher_length = ?,"
            " completed_length = ?, early_exit = ?, end_time = COALESCE(?, end_time) WHERE id = ?",
            (
                t.state.value,
                t.phase.value,
                t.restarts,
                t.run_id,
                t.steps_completed,
                t.latest_checkpoint,
                t.searcher_length,
                t.completed_length,
                t.early_exit,
                time.time() if ended else None,
                t.id,
            ),
        )
        self._events.publish(
            "trial",
            id=t.id,
            experiment_id=t.experiment_id,
            state=t.state.value,
            phase=t.phase.value,
        )

    async def _set_state(self, exp: Experiment, state: State) -> None:
        exp.state = state
        await self._db.execute(
            "UPDATE experiments SET state = ?, end_time = ? WHERE id = ?",
            (state.value, time.time() if state.terminal else None, exp.id),
        )
        self._events.publish("experiment", id=exp.id, state=state.value)

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

    @_transition
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
        await self._fire(exp, trial, E.PLACED)
        steps = 0
        if trial.latest_checkpoint:
            row = await self._db.fetch_one(
                "SELECT steps_completed FROM checkpoints WHERE uuid = ?", (trial.latest_checkpoint,)
            )
            steps = int(row["steps_completed"]) if row is not None else 0
        return task_spec.start_orders(
            task_spec.TrialLaunch(
                cluster_id=self._info.cluster_id,
                master_address=self._info.master_address,
                experiment_id=exp.id,
                trial_id=trial.id,
                task_id=trial.task_id,
                seed=trial.seed,
                hparams=trial.hparams,
                run_id=trial.run_id,
                steps_completed=steps,
                latest_checkpoint=trial.latest_checkpoint,
                config=exp.config,
            ),
            allocation,
            self._tasks.agents,
        )

    @_transition
    async def allocation_started(self, alloc: Allocation) -> None:
        found = self.live_trial(alloc.trial_id or 0)
        if found is not None:
            await self._fire(*found, E.STARTED)

    @_transition
    async def allocation_preempted(self, alloc: Allocation) -> None:
        found = self.live_trial(alloc.trial_id or 0)
        if found is not None:
            await self._fire(*found, E.PREEMPTED)

    @_transition
    async def allocation_exited(self, alloc: Allocation) -> None:
        found = self.live_trial(alloc.trial_id or 0)
        if found is None:
            return
        exp, trial = found
        current = self._tasks.allocation_of(trial.task_id)
        if not trial.phase.has_process or current not in (None, alloc):
            log.warning("trial %d: allocation %s of no run has exited", trial.id, alloc.id)
            return
        failure = alloc.first_failure()
        event = lifecycle.exit_event(
            early_exit=trial.early_exit,
            failed=failure is not None,
            lost=alloc.lost,
            preempted=alloc.preempt.is_set(),
            acknowledged=alloc.preemption_acked,
            restarts_left=trial.restarts < exp.config.max_restarts,
        )
        # A trial being killed or stopped by the searcher is not restarted: its failure
        # does not count.
        counted = event in lifecycle.COUNTED_FAILURES and trial.phase not in (
            P.KILLING,
            P.EARLY_STOPPING,
        )
        if counted:
            trial.restarts += 1
        ops = await self._fire(exp, trial, event)
        if counted and failure is not None:
            code = failure.exit_code
            if trial.phase is P.ERRORED:
                text = (
                    f"trial {trial.id} failed (exit code {code}) and used all "
                    f"{exp.config.max_restarts} restarts; it ends in ERROR"
                )
            elif trial.phase in (P.QUEUED, P.PAUSED):
                text = (
                    f"trial {trial.id} failed (exit code {code}); restarting "
                    f"({trial.restarts} of {exp.config.max_restarts})"
                )
            else:
                text = (
                    f"trial {trial.id} failed (exit code {code}) after it had done its work; "
                    f"it is {trial.phase.value} ({trial.restarts} of "
                    f"{exp.config.max_restarts} restarts used)"
                )
            await self._tasks.master_log(alloc, text)
        await self._apply(exp, ops)

    # -- what running trials ask of the searcher -------------------------------------------------

    async def current_operation(self, trial_id: int) -> int | None:
        """The length the trial should train to, or None when the searcher is done with it."""
        found = self.live_trial(trial_id)
        if found is None:
            await queries.ensure_trial(self._db, trial_id)
            return None
        trial = found[1]
        if trial.phase not in lifecycle.TRAINING:
            return None
        return trial.searcher_length

    @_transition
    async def complete_operation(self, trial_id: int, length: int, metric: float) -> None:
        found = self.live_trial(trial_id)
        if found is None:
            raise errors.FailedPrecondition(f"trial {trial_id} is not running")
        exp, trial = found
        if length >= trial.searcher_length:
            # It did what the searcher asked; a report for an earlier, shorter length (a
            # retried call) changes nothing.
            lifecycle.next_phase(trial.phase, E.REPORTED)
            trial.completed_length = max(trial.completed_length, length)
            await self._fire(exp, trial, E.REPORTED)
        elif length > trial.completed_length:
            trial.completed_length = length
            await self._save_trial(trial)
        await self._apply(exp, exp.search.on_validation_completed(trial.request_id, metric, length))

    @_transition
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

    @_transition
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

    async def report_checkpoint(self, checkpoint: v1.Checkpoint) -> None:
        """Record a checkpoint; a live trial resumes from it from now on."""
        await self._checkpoints.record(checkpoint)
        found = self.live_trial(checkpoint.trial_id)
        if found is not None:
            found[1].latest_checkpoint = checkpoint.uuid

    # -- user actions ----------------------------------------------------------------------------

    async def _live(self, experiment_id: int, action: str) -> Experiment | None:
        exp = self.live.get(experiment_id)
        if exp is None:
            await self.ensure_experiment(experiment_id)
        return exp

    @_transition
    async def kill(self, experiment_id: int) -> None:
        exp = await self._live(experiment_id, "kill")
        if exp is None:
            return
        await self._set_state(exp, State.STOPPING_KILLED)
        await self._to_trials(exp, E.KILLED)

    @_transition
    async def kill_trial(self, trial_id: int) -> None:
        found = self.live_trial(trial_id)
        if found is None:
            await queries.ensure_trial(self._db, trial_id)
            return
        exp, trial = found
        await self._apply(exp, await self._fire(exp, trial, E.KILLED))

    @_transition
    async def pause(self, experiment_id: int) -> None:
        exp = await self._live(experiment_id, "pause")
        if exp is None or exp.state != State.ACTIVE:
            return
        await self._set_state(exp, State.PAUSED)
        await self._to_trials(exp, E.PAUSED)

    @_transition
    async def cancel(self, experiment_id: int) -> None:
        exp = await self._live(experiment_id, "cancel")
        if exp is None or exp.state.stopping:
            return
        await self._set_state(exp, State.STOPPING_CANCELED)
        await self._to_trials(exp, E.CANCELED)

    async def _to_trials(self, exp: Experiment, event: TrialEvent) -> None:
        """An experiment's pause, cancel or kill, passed to each of its unfinished trials:
        those with a process are asked to exit, the others move at once."""
        ops: list[searcher.Operation] = []
        for trial in list(exp.trials.values()):
            if not trial.phase.terminal:
                ops += await self._fire(exp, trial, event)
        await self._apply(exp, ops)

    @_transition
    async def activate(self, experiment_id: int) -> None:
        exp = await self._live(experiment_id, "activate")
        if exp is None:
            raise errors.FailedPrecondition(f"experiment {experiment_id} has ended")
        if exp.state != State.PAUSED:
            return
        await self._set_state(exp, State.ACTIVE)
        for trial in list(exp.trials.values()):
            if trial.phase in (P.PAUSED, P.PAUSED_AWAITING_VERDICT):
                await self._fire(exp, trial, E.ACTIVATED)

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
            async with self._db.atomic():
                await self._restore_experiment(row, running)
        log.info("restored %d live experiments", len(self.live))

    async def _restore_experiment(self, row: Row, running: dict[int | None, Allocation]) -> None:
        """One experiment and its trials, moved on by what the restart means for each: one
        transaction."""
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
            "SELECT * FROM trials WHERE experiment_id = ? ORDER BY id", (exp.id,)
        ):
            trial = Trial(
                id=t["id"],
                experiment_id=exp.id,
                request_id=t["request_id"],
                phase=TrialPhase(t["phase"]),
                hparams=json.loads(t["hparams"]),
                seed=t["seed"],
                restarts=t["restarts"],
                run_id=t["run_id"],
                steps_completed=t["steps_completed"],
                latest_checkpoint=t["latest_checkpoint"],
                searcher_length=t["searcher_length"],
                completed_length=t["completed_length"],
                early_exit=t["early_exit"],
            )
            exp.trials[trial.id] = trial
            if not trial.phase.terminal:
                self._trials[trial.id] = trial
        # Every trial is loaded before any moves: a move may end a trial, and the
        # searcher's answer may name any other.
        for trial in list(exp.trials.values()):
            if not trial.phase.terminal:
                await self._restore_trial(exp, trial, running.get(trial.id))
        await self._maybe_finish(exp)

    async def _restore_trial(self, exp: Experiment, trial: Trial, alloc: Allocation | None) -> None:
        if trial.phase.terminal:
            return  # the searcher's answer to an earlier move ended it
        if alloc is None or not trial.phase.has_process:
            if alloc is not None:
                # Its process belongs to no run the store knows of: stop it.
                log.warning("trial %d: killing allocation %s of no run", trial.id, alloc.id)
                self._tasks.kill(alloc, reason="orphaned", grace=3.0)
            await self._apply(exp, await self._fire(exp, trial, E.MASTER_RESTORED))
            return
        alloc.job = exp.job
        # Its process runs on. The orders given to it before the restart were in memory only:
        # give them again.
        follow = lifecycle.experiment_event(exp.state)
        if follow is not None:
            await self._apply(exp, await self._fire(exp, trial, follow))
        if trial.phase is P.KILLING:
            await self._kill(alloc)
        elif trial.phase is P.EARLY_STOPPING:
            await self._preempt(exp, alloc, reason="stopped")
        elif trial.phase is P.STOPPING:
            await self._preempt(exp, alloc, reason="preempted")
