"""Experiments and trials driven by what happens to them: created and steered by users,
placed, started, preempted and ended by the task manager, advanced by what their code
reports. Each of those is one transition and one database transaction; how a trial moves is
in ``trial_moves``, how the searcher's answers are carried out in ``search_runner``, and
how a restarted master picks everything up in ``restore``."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

from determined.api.gen import v1
from determined.common import checkpoint_info, entrypoint, errors, expconf
from determined.common import context as ctx
from pydet.master import queries
from pydet.master.experiments import log_policies, warm_start
from pydet.master.experiments import trial_lifecycle as lifecycle
from pydet.master.experiments.continuation import Continuation
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import Experiment, LiveExperiments, Trial
from pydet.master.experiments.restore import Restore
from pydet.master.experiments.search_runner import SearchRunner
from pydet.master.experiments.trial_lifecycle import TrialEvent, TrialPhase
from pydet.master.experiments.trial_moves import CheckpointRecords, TrialMoves
from pydet.master.experiments.unmanaged import UnmanagedRuns
from pydet.master.search import searcher
from pydet.master.states import State
from pydet.master.store.db import Database
from pydet.master.tasks import task_spec
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.task_list import TaskList, TaskRequest
from pydet.master.tasks.task_spec import MasterInfo

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


@dataclasses.dataclass(frozen=True)
class Created:
    """A new experiment, and what its creator should be told (a missing entrypoint file)."""

    id: int
    warnings: tuple[str, ...] = ()


class Experiments:
    def __init__(
        self,
        db: Database,
        store: ExperimentStore,
        live: LiveExperiments,
        tasks: TaskList,
        checkpoints: CheckpointRecords,
        info: MasterInfo,
    ) -> None:
        self._db = db
        self._store = store
        self._live = live
        self._tasks = tasks
        self._checkpoints = checkpoints
        self._info = info
        self._moves = TrialMoves(db, store, live, tasks, checkpoints)
        self._runner = SearchRunner(store, live, self._moves)
        self._restore = Restore(db, store, live, tasks, self._moves, self._runner)
        self._unmanaged = UnmanagedRuns(
            db=db,
            store=store,
            live=live,
            moves=self._moves,
            runner=self._runner,
            restore=self._restore,
            validate=self.validate,
        )
        self._continuation = Continuation(
            store=store,
            live=live,
            moves=self._moves,
            runner=self._runner,
            restore=self._restore,
            checked=self._checked,
        )

    async def load(self) -> None:
        """After a master restart: load every live experiment and its trials (before the
        task manager restores its allocations, which need their jobs)."""
        await self._restore.load()

    async def restore(self, allocations: list[Allocation]) -> None:
        """Move the loaded experiments on from where the restart left them (``allocations``
        are those the task manager found still running)."""
        await self._restore.run(allocations)

    # -- creation ----------------------------------------------------------------------------

    def validate(
        self, text: str, defaults: Mapping[str, Any] | None = None
    ) -> expconf.ExperimentConfig:
        """The config, parsed with ``defaults`` (its workspace's) over the master's; its
        resource pool is always set (an experiment's config is where its job settings are
        kept)."""
        merged = self._info.defaults
        if defaults:
            merged = expconf.merge_defaults(defaults, self._info.defaults)
        return self._checked(expconf.parse_experiment_config(expconf.load_yaml(text), merged))

    def _checked(self, cfg: expconf.ExperimentConfig) -> expconf.ExperimentConfig:
        if isinstance(cfg.searcher, expconf.UnsupportedSearcher):
            raise errors.InvalidArgument(
                f"searcher.name: pydet does not run the {cfg.searcher.name} searcher (Determined "
                "no longer does either); use single, random, grid, adaptive_asha, async_halving, "
                "optuna or pbt"
            )
        searcher_cfg = cfg.searcher
        if (
            isinstance(searcher_cfg, expconf.OptunaSearcher)
            and searcher_cfg.sampler == "gp"
            and importlib.util.find_spec("torch") is None
        ):
            raise errors.InvalidArgument(
                "searcher.sampler: Optuna's gp sampler needs torch, which the master's Python "
                "lacks (pip install torch), or choose tpe"
            )
        pool = cfg.resources.resource_pool or self._info.default_pool
        if pool not in self._info.pools:
            raise errors.InvalidArgument(
                f"resources.resource_pool: no resource pool named {pool!r}; "
                f"the pools are {', '.join(self._info.pools)}"
            )
        log_policies.compile_policies(cfg.log_policies)  # their bounds, and RE2 accepts them
        if pool != cfg.resources.resource_pool:
            cfg = dataclasses.replace(
                cfg, resources=dataclasses.replace(cfg.resources, resource_pool=pool)
            )
        return cfg

    @_transition
    async def create(
        self,
        text: str,
        context: bytes,
        *,
        paused: bool,
        username: str,
        parent_id: int = 0,
        unmanaged: bool = False,
        external_id: str = "",
        project_id: int = 1,
        defaults: Mapping[str, Any] | None = None,
    ) -> Created:
        """A new experiment in project ``project_id``, its config filled from ``defaults``
        (its workspace's: ``workspaces.placement``) before the master's."""
        if unmanaged:
            exp_id = await self._unmanaged.create(
                text,
                username=username,
                external_id=external_id,
                project_id=project_id,
                defaults=defaults,
            )
            return Created(exp_id)
        cfg = self.validate(text, defaults)
        if not context and parent_id:
            context = await queries.context(self._db, parent_id)
        source = await self._store.source_checkpoint(cfg)
        imported = await warm_start.source_trials(self._db, cfg)
        try:
            # Unpacked size and entry count too: a small archive may unpack to gigabytes.
            files = {path for path, _ in ctx.check_context(context)}
        except ctx.InvalidContext:
            raise
        except Exception as e:
            raise errors.InvalidArgument(f"the context is not a valid archive: {e}") from None
        warnings = [w for w in [entrypoint.warning(cfg.entrypoint, files)] if w]
        seed = cfg.reproducibility.experiment_seed
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
            cfg = cfg.with_seed(seed)
        search = searcher.new_search(cfg, seed)
        skipped = search.import_trials(imported)
        state = State.PAUSED if paused else State.ACTIVE
        job_id = uuid.uuid4().hex[:8]
        start_time = time.time()
        experiment_id = await self._store.insert(
            cfg,
            text=text,
            context=context,
            state=state,
            username=username,
            start_time=start_time,
            parent_id=parent_id,
            job_id=job_id,
            project_id=project_id,
        )
        exp = Experiment(
            id=experiment_id,
            config=cfg,
            state=state,
            search=search,
            job_id=job_id,
            username=username,
            start_time=start_time,
            source_checkpoint=source,
            context_sha256=hashlib.sha256(context).hexdigest(),
            may_have_checkpoints=False,
        )
        if imported:
            await warm_start.save_imports(
                self._db,
                experiment_id,
                imported,
                skipped,
                smaller_is_better=cfg.searcher.smaller_is_better,
            )
        self._live.add(exp)
        await self._runner.apply(exp, search.initial_operations())
        log.info("created experiment %d", exp.id)
        for warning in warnings:
            log.warning("experiment %d: %s", exp.id, warning)
        unused = expconf.unused_settings(cfg)
        if unused:
            log.info(
                "experiment %d sets %s: accepted for compatibility with Determined, "
                "not acted on by pydet",
                exp.id,
                ", ".join(unused),
            )
        return Created(exp.id, tuple(warnings))

    @_transition
    async def create_trial(
        self, experiment_id: int, hparams: dict[str, Any], external_id: str = ""
    ) -> int:
        """A trial of an unmanaged experiment (``unmanaged.UnmanagedRuns.create_trial``)."""
        return await self._unmanaged.create_trial(experiment_id, hparams, external_id)

    @_transition
    async def start_trial(self, trial_id: int) -> Trial:
        """A new run of an unmanaged trial, its script starting to report."""
        return await self._unmanaged.start_trial(trial_id)

    @_transition
    async def end_trial(self, trial_id: int, state: State) -> None:
        """An unmanaged trial's script ended; its experiment ends with its last trial."""
        await self._unmanaged.end_trial(trial_id, state)

    # -- the task manager's callbacks (TaskOwner) --------------------------------------------------

    @_transition
    async def allocation_placed(
        self, request: TaskRequest, allocation: Allocation
    ) -> list[v1.StartContainer]:
        found = self._live.trial(request.trial_id or 0)
        if found is None:
            raise RuntimeError(
                f"allocation {allocation.id} placed for unknown task {request.task_id}"
            )
        exp, trial = found
        trial.run_id += 1
        trial.stored_steps = {}  # a new run has stored nothing
        await self._moves.fire(exp, trial, E.PLACED)
        steps = 0
        if trial.latest_checkpoint:
            steps = await self._store.checkpoint_steps(trial.latest_checkpoint)
        await self._store.archive_reports_after(trial, steps)
        if not exp.context_sha256:
            context = await queries.context(self._db, exp.id)
            exp.context_sha256 = hashlib.sha256(context).hexdigest()
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
                context_sha256=exp.context_sha256,
            ),
            allocation,
            self._tasks.agents,
        )

    @_transition
    async def allocation_started(self, alloc: Allocation) -> None:
        found = self._live.trial(alloc.trial_id or 0)
        if found is not None:
            await self._moves.fire(*found, E.STARTED)

    @_transition
    async def allocation_preempted(self, alloc: Allocation) -> None:
        found = self._live.trial(alloc.trial_id or 0)
        if found is not None:
            await self._moves.fire(*found, E.PREEMPTED)

    @_transition
    async def allocation_exited(self, alloc: Allocation) -> None:
        found = self._live.trial(alloc.trial_id or 0)
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
            # After a log policy with cancel_retries matched this run, its failure is final.
            restarts_left=trial.restarts < exp.config.max_restarts and not trial.retries_canceled,
        )
        # Only a failure after which the trial runs again is a restart (the last one, or one
        # while it was killed or stopped by the searcher, is not).
        if lifecycle.is_restart(trial.phase, event):
            trial.restarts += 1
        ops = await self._moves.fire(exp, trial, event)
        if event in lifecycle.COUNTED_FAILURES and failure is not None:
            code = failure.exit_code
            if trial.phase is P.ERRORED and trial.retries_canceled:
                text = (
                    f"trial {trial.id} failed (exit code {code}) after its logs matched a log"
                    " policy with cancel_retries; it is not restarted and ends in ERROR"
                )
            elif trial.phase is P.ERRORED:
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
        await self._runner.apply(exp, ops)

    # -- what running trials ask of the searcher -------------------------------------------------

    async def current_operation(self, trial_id: int) -> int | None:
        """The length the trial should train to, or None when the searcher is done with it."""
        found = self._live.trial(trial_id)
        if found is None:
            await queries.ensure_trial(self._db, trial_id)
            return None
        trial = found[1]
        if trial.phase not in lifecycle.TRAINING:
            return None
        return trial.searcher_length

    @_transition
    async def complete_operation(self, trial_id: int, length: int, metric: float) -> None:
        found = self._live.trial(trial_id)
        if found is None:
            raise errors.FailedPrecondition(f"trial {trial_id} is not running")
        exp, trial = found
        if length >= trial.searcher_length:
            # It did what the searcher asked; a report for an earlier, shorter length (a
            # retried call) changes nothing.
            lifecycle.next_phase(trial.phase, E.REPORTED)
            trial.completed_length = max(trial.completed_length, length)
            await self._moves.fire(exp, trial, E.REPORTED)
        elif length > trial.completed_length:
            trial.completed_length = length
            await self._store.save_trial(trial)
        await self._runner.apply(
            exp, exp.search.on_validation_completed(trial.request_id, metric, length)
        )

    def acts_on_reports(self, trial_id: int) -> bool:
        """Whether ``validation_reported`` can matter for a trial: it is live, managed, and
        its search acts on plain reports (others learn at the completed operation)."""
        found = self._live.trial(trial_id)
        return found is not None and not found[0].unmanaged and found[0].search.acts_on_reports

    @_transition
    async def validation_reported(
        self, trial_id: int, metrics: dict[str, Any], steps_completed: int
    ) -> None:
        found = self._live.trial(trial_id)
        if found is None or found[0].unmanaged:
            return
        exp, trial = found
        ops = exp.search.on_validation_reported(trial.request_id, metrics, steps_completed)
        # Saved even without operations: a report changes what the searcher knows (an
        # Optuna pruner's intermediate values, stop-driven ASHA's rungs), and a restarted
        # master must continue from it.
        await self._runner.apply(exp, ops)

    @_transition
    async def early_exit(self, trial_id: int, reason: str) -> None:
        found = self._live.trial(trial_id)
        if found is None:
            raise errors.FailedPrecondition(f"trial {trial_id} is not running")
        if reason not in ("invalid_hp", "errored", "user_canceled"):
            raise errors.InvalidArgument(
                f"early exit reason {reason!r}: expected invalid_hp, errored or user_canceled"
            )
        trial = found[1]
        trial.early_exit = reason
        await self._store.save_trial(trial)

    async def report_checkpoint(self, checkpoint: v1.Checkpoint) -> None:
        """Record a checkpoint; a live trial resumes from it from now on."""
        exp = self._live.get(checkpoint_info.experiment_id(checkpoint))
        if exp is not None:
            # Before its row exists: a trial ending meanwhile applies the retention policy.
            exp.may_have_checkpoints = True
        await self._checkpoints.record(checkpoint)
        found = self._live.trial(checkpoint_info.trial_id(checkpoint))
        if found is not None:
            found[1].latest_checkpoint = checkpoint.uuid

    # -- user actions ----------------------------------------------------------------------------

    async def _running(self, experiment_id: int) -> Experiment | None:
        """The experiment if it has not ended; None if it has, NotFound if there is none."""
        exp = self._live.get(experiment_id)
        if exp is None:
            await queries.ensure_experiment(self._db, experiment_id)
        return exp

    @_transition
    async def kill(self, experiment_id: int) -> None:
        exp = await self._running(experiment_id)
        if exp is None:
            return
        await self._runner.set_state(exp, State.STOPPING_KILLED)
        await self._to_trials(exp, E.KILLED)

    @_transition
    async def kill_trial(self, trial_id: int) -> None:
        found = self._live.trial(trial_id)
        if found is None:
            await queries.ensure_trial(self._db, trial_id)
            return
        exp, trial = found
        await self._runner.apply(exp, await self._moves.fire(exp, trial, E.KILLED))

    @_transition
    async def pause(self, experiment_id: int) -> None:
        exp = await self._running(experiment_id)
        if exp is None or exp.state != State.ACTIVE:
            return
        if exp.unmanaged:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is unmanaged: its script runs off the cluster, "
                "where the master cannot pause it (kill or cancel it instead)"
            )
        await self._runner.set_state(exp, State.PAUSED)
        await self._to_trials(exp, E.PAUSED)

    @_transition
    async def cancel(self, experiment_id: int) -> None:
        exp = await self._running(experiment_id)
        if exp is None or exp.state.stopping:
            return
        await self._runner.set_state(exp, State.STOPPING_CANCELED)
        await self._to_trials(exp, E.CANCELED)

    async def _to_trials(self, exp: Experiment, event: TrialEvent) -> None:
        """An experiment's pause, cancel or kill, passed to each of its unfinished trials:
        those with a process are asked to exit, the others move at once."""
        ops: list[searcher.Operation] = []
        for trial in list(exp.trials.values()):
            if not trial.phase.terminal:
                ops += await self._moves.fire(exp, trial, event)
                if exp.unmanaged and trial.phase.has_process:
                    # Its script is no process of the master's to wait for: it is told on
                    # its next report that the trial has ended.
                    await self._moves.fire(exp, trial, E.EXITED_USER_CANCELED)
        await self._runner.apply(exp, ops)

    @_transition
    async def activate(self, experiment_id: int) -> None:
        exp = await self._running(experiment_id)
        if exp is None:
            raise errors.FailedPrecondition(f"experiment {experiment_id} has ended")
        if exp.state != State.PAUSED:
            return
        await self._runner.set_state(exp, State.ACTIVE)
        for trial in list(exp.trials.values()):
            if trial.phase in (P.PAUSED, P.PAUSED_AWAITING_VERDICT):
                await self._moves.fire(exp, trial, E.ACTIVATED)

    @_transition
    async def grow(self, experiment_id: int, max_trials: int) -> None:
        """``det experiment continue --max-trials`` (``continuation.Continuation.grow``)."""
        await self._continuation.grow(experiment_id, max_trials)

    @_transition
    async def resume(self, experiment_id: int, override: dict[str, Any]) -> None:
        """``det experiment continue`` (``continuation.Continuation.resume``)."""
        await self._continuation.resume(experiment_id, override)

    async def set_archived(self, experiment_id: int, archived: bool) -> None:
        await queries.ensure_experiment(self._db, experiment_id)
        if archived and self._live.get(experiment_id) is not None:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is still running; only ended experiments can be "
                "archived"
            )
        await self._store.set_archived(experiment_id, archived)

    async def delete(self, experiment_id: int) -> list[tuple[str, str]]:
        """Delete an ended experiment; returns (uuid, storage) of checkpoints to remove."""
        await queries.ensure_experiment(self._db, experiment_id)
        if self._live.get(experiment_id) is not None:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} is still running; kill it before deleting it"
            )
        held = await queries.experiment_registrations(self._db, experiment_id)
        if held:
            raise errors.FailedPrecondition(
                f"experiment {experiment_id} has checkpoints in the model registry and cannot be"
                " deleted: "
                + "; ".join(r.describe() for r in held)
                + " (delete those model versions first, or archive the experiment)"
            )
        return await self._store.delete(experiment_id)
