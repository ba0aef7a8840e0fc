"""The master's operations, shared by both transports (gRPC servicer and HTTP gateway).

Messages in and out are the API's; state changes run under the master's one lock so that
experiment, trial and allocation state move together."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import yaml

from determined.api.gen import v1
from determined.common import errors, expconf, pareto, structs, timestamps
from pydet.master import convert, queries
from pydet.master.agents.table import AgentTable
from pydet.master.auth import redaction
from pydet.master.cluster import policies
from pydet.master.cluster.messages import ClusterMessages
from pydet.master.cluster.policies import ConfigPolicies
from pydet.master.commands.commands import Commands
from pydet.master.commands.generic_tasks import NewTask, shown_config
from pydet.master.events import EventBus
from pydet.master.experiments import (
    json_input,
    model_definition,
    shown_state,
    templates,
    warm_start,
)
from pydet.master.experiments.checkpoints import Checkpoints
from pydet.master.experiments.continuation import max_trials_override, parse_override
from pydet.master.experiments.edits import ExperimentEdits
from pydet.master.experiments.gc_policy import GcPolicies
from pydet.master.experiments.live import LiveExperiments
from pydet.master.experiments.manager import Experiments
from pydet.master.experiments.reports import Reports
from pydet.master.experiments.templates import Templates
from pydet.master.jobs.queue import Jobs
from pydet.master.logs import retention as log_retention
from pydet.master.logs.log_store import LogStore
from pydet.master.models.registry import Registry
from pydet.master.organizing import Organizing
from pydet.master.provisioner.pools import ElasticPools
from pydet.master.search import preview
from pydet.master.states import State
from pydet.master.store.db import Database
from pydet.master.tasks import task_summaries, tensorboards
from pydet.master.tasks.generic import GenericTask, GenericTasks, TaskType
from pydet.master.tasks.task_list import TaskList
from pydet.master.tasks.task_spec import MasterInfo
from pydet.master.tasks.tensorboards import Tensorboards
from pydet.master.webhooks.dispatch import Webhooks
from pydet.master.workspaces.organization import Organization
from pydet.master.workspaces.workspaces import DEFAULT_ID as DEFAULT_WORKSPACE

T = TypeVar("T")

_TrialSort = v1.GetExperimentTrialsRequestSortBy
# How GetExperimentTrials sorts (by id among equals; trials without the value last).
_TRIAL_ORDER: dict[_TrialSort, Callable[[v1.Trial], Any]] = {
    _TrialSort.UNSPECIFIED: lambda t: t.id,
    _TrialSort.ID: lambda t: t.id,
    _TrialSort.START_TIME: lambda t: t.start_time,
    _TrialSort.END_TIME: lambda t: t.end_time,
    _TrialSort.STATE: lambda t: int(t.state),
    _TrialSort.BEST_VALIDATION_METRIC: lambda t: t.best_validation_metric,
    _TrialSort.BATCHES_PROCESSED: lambda t: t.total_batches_processed,
    _TrialSort.RESTARTS: lambda t: t.restarts,
    _TrialSort.CHECKPOINT_SIZE: lambda t: t.total_checkpoint_size,
}

# Bytes of JSON a trial's metadata may take.
MAX_TRIAL_METADATA = 1 << 20
# Reports per message of GetMetrics' stream (Determined's page size).
METRICS_PAGE = 1000


def _scrubbed(e: errors.InvalidArgument, config_text: str) -> errors.InvalidArgument:
    """``e`` without the config's secrets in its message (``e`` itself if it had none)."""
    message = redaction.scrubbed(e.message, config_text)
    return e if message == e.message else errors.InvalidArgument(message)


def _task_job_priority(update: v1.JobUpdate, task: GenericTask) -> int:
    """The new priority of a task's job (a notebook's, shell's, command's, TensorBoard's),
    the only thing it takes: its weight, pool and place in the queue stay as launched."""
    noun = task.task_type.noun
    for name in ("weight", "resource_pool", "ahead_of", "behind_of"):
        if getattr(update, name) is not None:
            raise errors.InvalidArgument(
                f"{name}: job {update.job_id} is a {noun}, whose {name.replace('_', ' ')}"
                " cannot be changed; only its priority can"
            )
    if update.priority is None:
        raise errors.InvalidArgument(f"job {update.job_id}: nothing to change (give a priority)")
    if not 1 <= update.priority <= 99:
        raise errors.InvalidArgument(f"priority: must be between 1 and 99, got {update.priority}")
    return update.priority


TaskListRequest = (
    v1.GetCommandsRequest | v1.GetNotebooksRequest | v1.GetShellsRequest | v1.GetTensorboardsRequest
)

# Determined's SortBy of those requests (the same numbers in each): id, description, start
# time, workspace; unspecified is the launch order.
_TASK_SORT_KEYS: dict[int, Callable[[GenericTask], Any]] = {
    0: lambda t: t.start_time,
    1: lambda t: t.id,
    2: lambda t: t.description,
    4: lambda t: t.start_time,
    5: lambda t: (t.workspace_id, t.start_time),
}


def _log_filter(req: v1.TrialLogsRequest | v1.TaskLogsRequest) -> queries.LogFilter:
    """The filter of a TrialLogs or TaskLogs request (they have the same fields)."""
    head, tail = max(0, req.head), max(0, req.tail)
    if req.limit > 0:  # Determined's: the first lines, or the last ones ordered DESC
        if req.order_by == v1.OrderBy.DESC:
            tail = min(tail, req.limit) if tail else req.limit
        else:
            head = min(head, req.limit) if head else req.limit
    return queries.LogFilter(
        head=head,
        tail=tail,
        rank_ids=tuple(req.rank_ids),
        # LOG_LEVEL_UNSPECIFIED: the lines that named no level (stored as "").
        levels=tuple(level.name if level else "" for level in req.levels),
        min_level=req.min_level.name if req.min_level else "",
        search=req.search_text,
        after_id=req.after_id,
        allocation_ids=tuple(req.allocation_ids),
        agent_ids=tuple(req.agent_ids),
        container_ids=tuple(req.container_ids),
        stdtypes=tuple(req.stdtypes),
        sources=tuple(req.sources),
        timestamp_before=timestamps.to_seconds(req.timestamp_before),
        timestamp_after=timestamps.to_seconds(req.timestamp_after),
    )


class Service:
    def __init__(
        self,
        *,
        db: Database,
        lock: asyncio.Lock,
        agents: AgentTable,
        logs: LogStore,
        tasks: TaskList,
        experiments: Experiments,
        live: LiveExperiments,
        reports: Reports,
        checkpoints: Checkpoints,
        info: MasterInfo,
        version: str,
        events: EventBus,
        jobs: Jobs,
        webhooks: Webhooks,
        templates: Templates,
        tensorboards: Tensorboards,
        organization: Organization,
        registry: Registry,
        messages: ClusterMessages,
        policies: ConfigPolicies,
        gc_policies: GcPolicies,
        generic: GenericTasks,
        commands: Commands,
        elastic: ElasticPools | None = None,
    ) -> None:
        self.messages = messages
        self.policies = policies
        self.gc_policies = gc_policies
        self.elastic = elastic or ElasticPools()
        self.organization = organization
        # Workspaces, projects, moves and models: requests in, responses out (both
        # transports).
        self.org = Organizing(organization, registry, db)
        self.generic = generic
        self.commands = commands
        self.templates = templates
        self.webhooks = webhooks
        self.tensorboards = tensorboards
        self.events = events
        self.jobs = jobs
        self.db = db
        self.lock = lock
        self.agents = agents
        self.logs = logs
        self.tasks = tasks
        self.experiments = experiments
        self.live = live
        self.reports = reports
        self.checkpoints = checkpoints
        self.info = info
        self.version = version
        self.edits = ExperimentEdits(db, live)
        self.master_id = str(uuid.uuid4())  # this process's, as Determined's master_id

    async def locked(self, awaitable: Awaitable[T]) -> T:
        async with self.lock:
            return await awaitable

    def master_info(self) -> v1.GetMasterResponse:
        return v1.GetMasterResponse(
            version=self.version,
            cluster_id=self.info.cluster_id,
            cluster_name="pydet",
            cluster_message=self._banner(),
            master_id=self.master_id,
            user_management_enabled=True,
            product=v1.GetMasterResponseProduct.COMMUNITY,
        )

    def _banner(self) -> v1.ClusterMessage | None:
        """The message every client shows: a full disk under the store outranks the admins'
        message, since every change anyone makes is refused until there is space."""
        disk = self.db.disk
        if disk.full:
            return v1.ClusterMessage(
                message=f"The master's disk is full at {disk.where}: changes are refused"
                " until there is space.",
                start_time=convert.timestamp(disk.since),
                created_time=convert.timestamp(disk.since),
            )
        shown = self.messages.shown()
        return None if shown is None else shown.to_proto()

    # -- experiments -------------------------------------------------------------------------

    async def create_experiment(
        self, req: v1.CreateExperimentRequest
    ) -> v1.CreateExperimentResponse:
        text = req.config
        if req.parent_id:
            # A fork of a config as it was shown: its hidden secrets are the parent's.
            parent = await queries.stored_config(self.db, req.parent_id)
            if parent is not None:
                text = redaction.restore_secrets(text, parent)
        context = req.context
        if req.model_definition:
            if context:
                raise errors.InvalidArgument(
                    "modelDefinition: send the context as files or as one archive, not both"
                )
            context = model_definition.archive(req.model_definition)
        unmanaged = bool(req.unmanaged)
        if not context and not req.parent_id and not unmanaged:
            # No code sent (Determined's `echo yo`): the entrypoint is in the image.
            context = model_definition.archive([])
        try:
            if req.template is not None:
                text = templates.named(text, req.template)
            text = await self.templates.apply(text)
            # Where it goes (its project), and what its workspace fills its config with.
            place = await self.organization.placements.place(
                expconf.load_yaml(text), req.project_id
            )
            workspace_id = place.project.workspace_id
            text = await self.policies.apply_invariant(text, workspace_id)
            if not unmanaged:
                cfg = self.experiments.validate(text, place.defaults)
                await self._check_constraints(cfg, workspace_id)
                await self.organization.bindings.check(
                    cfg.resources.resource_pool,
                    place.project.workspace_id,
                    place.project.workspace_name,
                    field="resources.resource_pool",
                )
            if req.validate_only and not unmanaged:
                return v1.CreateExperimentResponse(
                    config=structs.struct(redaction.redacted(cfg.to_dict()))
                )
            async with self.lock:
                created = await self.experiments.create(
                    text,
                    context,
                    paused=not req.activate,
                    username=req.username or "determined",
                    parent_id=req.parent_id,
                    unmanaged=unmanaged,
                    external_id=req.external_experiment_id,
                    project_id=place.project.id,
                    defaults=place.defaults,
                )
        except errors.InvalidArgument as e:
            raise _scrubbed(e, text) from None
        resp = await self.get_experiment(created.id)
        return v1.CreateExperimentResponse(
            experiment=resp.experiment,
            config=resp.config,
            warning_messages=list(created.warnings),
        )

    async def _check_constraints(self, cfg: expconf.ExperimentConfig, workspace_id: int) -> None:
        """The experiment config policies' constraints (master/cluster/policies.py): its
        workspace's under the global ones."""
        found = await self.policies.effective(policies.EXPERIMENT, workspace_id)
        resources = cfg.resources
        policies.check_slots(found, slots=resources.slots_per_trial, max_slots=resources.max_slots)
        # Agent pools run a smaller priority first, whatever their scheduler (as Determined's
        # agent resource manager says).
        policies.check_priority(found, resources.priority, smaller_is_higher=True)

    async def _check_changes(
        self, experiment_id: int, *, priority: int | None, max_slots: int | None
    ) -> None:
        """A later change of an experiment's priority or max slots, held to the policies:
        what the invariant config sets cannot change, and the constraints still apply."""
        workspace_id = await queries.experiment_workspace(self.db, experiment_id) or 0
        found = await self.policies.effective(policies.EXPERIMENT, workspace_id)
        fixed = policies.invariant_value(found, "resources", "max_slots")
        if max_slots is not None and fixed is not None and max_slots != fixed:
            raise errors.InvalidArgument(
                f"max slots is already set in an invariant config policy: max_slots of {fixed} "
                "is enforced"
            )
        policies.check_slots(found, slots=None, max_slots=max_slots)
        if priority is None:
            return
        if policies.invariant_value(found, "resources", "priority") is not None:
            raise errors.InvalidArgument(
                "priority cannot be modified: an invariant config policy sets it"
            )
        policies.check_priority(found, priority, smaller_is_higher=True)

    async def get_experiments(self, req: v1.GetExperimentsRequest) -> v1.GetExperimentsResponse:
        if req.project_id:
            await self.organization.projects.get(req.project_id)  # NotFound naming it
        sort = req.sort_by.name.lower() if req.sort_by else "id"
        if sort not in queries.ORDER_COLUMNS:
            choices = ", ".join(f"SORT_BY_{k.upper()}" for k in queries.ORDER_COLUMNS)
            raise errors.InvalidArgument(
                f"sortBy: pydet does not sort by {req.sort_by.proto_name}; one of {choices}"
            )
        rows, total = await queries.experiments(
            self.db,
            queries.ExperimentFilter(
                states=sorted({shown_state.stored(s) for s in req.states}, key=str),
                archived=req.archived,
                name=req.name,
                order_by=sort,
                descending=req.order_by == v1.OrderBy.DESC,
                limit=req.limit,
                offset=req.offset,
                users=tuple(req.users),
                project_id=req.project_id,
                labels=tuple(req.labels),
                description=req.description,
            ),
        )
        return v1.GetExperimentsResponse(
            experiments=[convert.experiment(r, pulling=self._pulling(r.id)) for r in rows],
            pagination=convert.pagination(total, req.offset, req.limit),
        )

    def _pulling(self, experiment_id: int) -> int:
        """How many of the experiment's trials wait for an agent to pull their image."""
        exp = self.live.get(experiment_id)
        if exp is None:
            return 0
        return sum(1 for trial_id in self.tasks.pulling_trials() if trial_id in exp.trials)

    async def get_experiment(self, experiment_id: int) -> v1.GetExperimentResponse:
        row = await queries.experiment(self.db, experiment_id)
        goals = pareto.objectives(row.config_dict)
        front: list[int] = []
        if goals:
            points = [
                (t.id, found)
                for t in await queries.trials(self.db, experiment_id)
                if t.state == State.COMPLETED
                and (found := pareto.values(t.latest_validation, goals)) is not None
            ]
            front = pareto.front(points, goals)
        experiment = convert.experiment(row, pulling=self._pulling(experiment_id), full=True)
        return v1.GetExperimentResponse(
            pareto_front=front,
            experiment=experiment,
            job_summary=self.jobs.summary(row.job_id),
            config=experiment.config,
            imported_trials=[
                v1.ImportedTrial(
                    source_experiment_id=i.source_experiment_id,
                    source_trial_id=i.source_trial_id,
                    hparams=structs.struct(json.loads(i.hparams or "{}")),
                    latest_validation=structs.struct(json.loads(i.latest_validation or "{}")),
                    best_validation_metric=i.best_validation,
                    steps_completed=i.steps_completed,
                    note=i.note,
                )
                for i in await warm_start.imports(self.db, experiment_id)
            ],
        )

    async def get_experiment_trials(
        self, req: v1.GetExperimentTrialsRequest
    ) -> v1.GetExperimentTrialsResponse:
        pulling = self.tasks.pulling_trials()
        rows = await queries.trials(self.db, req.experiment_id, details=True)
        trials = [convert.trial(r, pulling=r.id in pulling) for r in rows]
        if req.states:
            trials = [t for t in trials if t.state in req.states]
        key = _TRIAL_ORDER.get(req.sort_by)
        if key is None:
            choices = ", ".join(str(k.proto_name) for k in _TRIAL_ORDER if k)
            raise errors.InvalidArgument(
                f"sortBy: pydet does not sort trials by {req.sort_by.proto_name}; one of {choices}"
            )
        trials.sort(key=lambda t: (key(t) is None, key(t) or 0, t.id))
        if req.order_by == v1.OrderBy.DESC:
            trials.reverse()
        page = convert.pagination(len(trials), req.offset, req.limit)
        return v1.GetExperimentTrialsResponse(
            trials=trials[page.start_index : page.end_index], pagination=page
        )

    async def get_experiment_context(self, experiment_id: int) -> bytes:
        return await queries.context(self.db, experiment_id)

    async def experiment_action(
        self, action: str, experiment_id: int
    ) -> v1.ExperimentActionResponse:
        exps = self.experiments
        async with self.lock:
            if action == "activate":
                await exps.activate(experiment_id)
            elif action == "pause":
                await exps.pause(experiment_id)
            elif action == "cancel":
                await exps.cancel(experiment_id)
            elif action == "kill":
                await exps.kill(experiment_id)
            elif action in ("archive", "unarchive"):
                await exps.set_archived(experiment_id, action == "archive")
            elif action == "delete":
                config = await queries.stored_config(self.db, experiment_id)
                uuids = await exps.delete(experiment_id)
                await self.checkpoints.delete_files(uuids)
                await self.tensorboards.remove_files(experiment_id, config)
                return v1.ExperimentActionResponse()
            else:
                raise errors.InvalidArgument(f"unknown experiment action {action!r}")
        return v1.ExperimentActionResponse(
            experiment=(await self.get_experiment(experiment_id)).experiment
        )

    async def patch_experiment(self, change: v1.PatchExperiment) -> v1.Experiment:
        async with self.lock:
            await self.edits.patch(change)
        return (await self.get_experiment(change.id)).experiment or v1.Experiment()

    async def set_experiment_label(self, experiment_id: int, label: str, *, on: bool) -> list[str]:
        async with self.lock:
            if on:
                return await self.edits.add_label(experiment_id, label)
            return await self.edits.remove_label(experiment_id, label)

    async def delete_tensorboard_files(self, experiment_id: int) -> None:
        config = await queries.stored_config(self.db, experiment_id)
        if config is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        await self.tensorboards.remove_files(experiment_id, config)

    def user_renamed(self, old: str, new: str) -> None:
        """What the master holds in memory of a renamed user's experiments and tasks
        (TensorBoards, commands, notebooks, shells; its store already says the new name).
        Under the lock."""
        for exp in self.live:
            if exp.username == old:
                exp.username = new
        for task in self.generic.live():
            if task.username == old:
                task.username = new

    async def continue_experiment(
        self, experiment_id: int, override_config: str
    ) -> v1.ContinueExperimentResponse:
        override = parse_override(override_config)
        max_trials = max_trials_override(override)
        async with self.lock:
            if max_trials is not None:
                await self.experiments.grow(experiment_id, max_trials)
            else:
                await self.experiments.resume(experiment_id, override)
        return v1.ContinueExperimentResponse(
            experiment=(await self.get_experiment(experiment_id)).experiment
        )

    # -- trials ----------------------------------------------------------------------------

    async def get_trial(self, trial_id: int) -> v1.Trial:
        return convert.trial(
            await queries.trial(self.db, trial_id), pulling=trial_id in self.tasks.pulling_trials()
        )

    # -- unmanaged trials: their script makes, starts and ends them -----------------------------

    async def create_trial(self, req: v1.CreateTrialRequest) -> v1.Trial:
        try:
            hparams = json.loads(req.hparams or "{}")
        except ValueError:
            raise errors.InvalidArgument("hparams: expected a JSON object") from None
        if not isinstance(hparams, dict):
            raise errors.InvalidArgument("hparams: expected a JSON object")
        async with self.lock:
            trial_id = await self.experiments.create_trial(
                req.experiment_id, hparams, req.external_trial_id
            )
        return await self.get_trial(trial_id)

    async def start_trial(self, trial_id: int) -> v1.StartTrialResponse:
        async with self.lock:
            trial = await self.experiments.start_trial(trial_id)
        return v1.StartTrialResponse(
            trial_run_id=trial.run_id,
            steps_completed=trial.steps_completed,
            latest_checkpoint=trial.latest_checkpoint,
        )

    async def patch_trial(self, req: v1.PatchTrialRequest) -> v1.Trial:
        try:
            state = State(req.state.name)
        except ValueError:
            raise errors.InvalidArgument(f"state: {req.state.name} is not a trial state") from None
        async with self.lock:
            await self.experiments.end_trial(req.trial_id, state)
        return await self.get_trial(req.trial_id)

    # -- trial metadata (Determined's run metadata) ----------------------------------------------

    async def set_trial_metadata(self, trial_id: int, text: str) -> str:
        """Replace the trial's metadata with the JSON object ``text``; returns it as stored."""
        metadata = json_input.json_object(text, field="metadata", limit=MAX_TRIAL_METADATA)
        stored = json.dumps(metadata)
        await queries.ensure_trial(self.db, trial_id)
        await self.db.execute("UPDATE trials SET metadata = ? WHERE id = ?", (stored, trial_id))
        return stored

    async def trial_metadata(self, trial_id: int) -> str:
        return (await queries.trial(self.db, trial_id)).metadata or "{}"

    async def kill_trial(self, trial_id: int) -> None:
        async with self.lock:
            await self.experiments.kill_trial(trial_id)

    async def trial_logs(self, req: v1.TrialLogsRequest) -> AsyncIterator[list[v1.TaskLog]]:
        await queries.ensure_trial(self.db, req.trial_id)
        f = _log_filter(req)

        async def done() -> bool:
            return self.live.trial(req.trial_id) is None

        async for rows in self.logs.stream(req.trial_id, f, follow=req.follow, is_done=done):
            yield [convert.task_log(r) for r in rows]

    async def task_logs(self, req: v1.TaskLogsRequest) -> AsyncIterator[list[v1.TaskLog]]:
        """A task's lines by its task id (a trial's, or any other task's); with ``follow``
        until it has ended."""
        f = _log_filter(req)
        if "." not in req.task_id:  # not a trial's ("EXPERIMENT.TRIAL")
            await self.generic.get(req.task_id)  # NotFound for an unknown task

        async def done() -> bool:
            return not any(t.id == req.task_id for t in self.generic.live())

        async for rows in self.logs.stream(
            0, f, follow=req.follow, is_done=done, task_id=req.task_id
        ):
            yield [convert.task_log(r) for r in rows]

    async def get_trial_metrics(self, req: v1.GetTrialMetricsRequest) -> list[v1.MetricReport]:
        rows = await queries.metrics(
            self.db,
            req.trial_id,
            group=req.group,
            after_steps=req.after_steps if req.after_steps else -1,
            limit=req.limit,
        )
        return [convert.metric(r) for r in rows]

    async def get_metrics(
        self, trial_ids: list[int], group: str
    ) -> AsyncIterator[list[v1.MetricReport]]:
        """Determined's GetMetrics: one group's reports of each trial (in id order), in
        step order, a page at a time."""
        if not trial_ids:
            raise errors.InvalidArgument("trial_ids: name at least one trial")
        if not group:
            raise errors.InvalidArgument("group: name a metric group (training, validation...)")
        twice = sorted({t for t in trial_ids if trial_ids.count(t) > 1})
        if twice:
            raise errors.InvalidArgument(f"trial_ids: trial {twice[0]} is named twice")
        for trial_id in sorted(trial_ids):
            await queries.ensure_trial(self.db, trial_id)
        for trial_id in sorted(trial_ids):
            after = -1
            while True:
                rows = await queries.metrics(
                    self.db, trial_id, group=group, after_steps=after, limit=METRICS_PAGE
                )
                if rows:
                    yield [convert.metric(r) for r in rows]
                    after = rows[-1].steps_completed
                if len(rows) < METRICS_PAGE:
                    break

    async def report_trial_source_info(self, info: v1.TrialSourceInfo) -> None:
        """Remember that a trial used a checkpoint (its reports are the checkpoint's metrics)."""
        if info.trial_source_info_type == v1.TrialSourceInfoType.UNSPECIFIED:
            raise errors.InvalidArgument("trial_source_info_type: say how the trial used it")
        await queries.ensure_trial(self.db, info.trial_id)
        await queries.checkpoint(self.db, info.checkpoint_uuid)  # NotFound naming it
        await self.db.execute(
            "INSERT OR IGNORE INTO trial_source_infos"
            " (trial_id, checkpoint_uuid, source_type, model_id, model_version)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                info.trial_id,
                info.checkpoint_uuid,
                info.trial_source_info_type.name,
                info.model_id,
                info.model_version,
            ),
        )

    async def trial_metrics_by_checkpoint(
        self, req: v1.GetTrialMetricsByCheckpointRequest
    ) -> list[v1.MetricReport]:
        await queries.checkpoint(self.db, req.checkpoint_uuid)  # NotFound naming it
        kind = req.trial_source_info_type
        rows = await queries.checkpoint_metrics(
            self.db,
            req.checkpoint_uuid,
            source_type="" if kind == v1.TrialSourceInfoType.UNSPECIFIED else kind.name,
            group=req.metric_group,
        )
        return [convert.metric(r) for r in rows]

    # -- agents and allocations ------------------------------------------------------------------

    def get_agents(self) -> v1.GetAgentsResponse:
        """Every agent, and the elastic pools' instances and provisioning beside them."""
        agents = [a.to_proto() for a in sorted(self.agents.agents.values(), key=lambda a: a.id)]
        return v1.GetAgentsResponse(
            agents=agents,
            pagination=convert.pagination(len(agents)),
            instances=self.elastic.instances(),
            provisioners=self.elastic.summaries(),
        )

    async def allgather(self, req: v1.AllGatherRequest) -> list[bytes]:
        alloc = self.tasks.get(req.allocation_id)
        timeout = req.timeout_seconds if req.timeout_seconds > 0 else 3600.0
        return await alloc.allgather(
            req.group, req.seq, req.rank, req.size, req.data, timeout, req.request_id
        )

    async def report_metrics(self, req: v1.ReportTrialMetricsRequest) -> None:
        # Only what changed the store reaches the searcher: a retried batch is not news.
        validations = await self.reports.metrics(req.trial_id, req.run_id, req.reports)
        if not self.experiments.acts_on_reports(req.trial_id):
            return
        for v in validations:
            metrics = json.loads(v.metrics)
            await self.locked(
                self.experiments.validation_reported(req.trial_id, metrics, v.steps_completed)
            )

    async def preview_search(self, config_text: str) -> v1.PreviewSearchResponse:
        try:
            cfg = self.experiments.validate(await self.templates.apply(config_text))
        except errors.InvalidArgument as e:
            raise _scrubbed(e, config_text) from None
        entries, unit = preview.preview(cfg)
        return v1.PreviewSearchResponse(
            entries=[v1.SearchPreviewEntry(num_trials=n, length=length) for n, length in entries],
            unit=unit,
            total_trials=sum(n for n, _ in entries),
            max_concurrent_trials=preview.concurrency(cfg),
        )

    # -- TensorBoards ------------------------------------------------------------------------

    async def launch_tensorboard(
        self, username: str, req: v1.LaunchTensorboardRequest
    ) -> v1.Tensorboard:
        text = json.dumps(structs.python(req.config)) if req.config is not None else ""
        config = await self._templated(text, "")
        await self.check_task_workspace(req.workspace_id)
        try:
            async with self.lock:
                tb = await self.tensorboards.launch(
                    username=username,
                    experiment_ids=list(req.experiment_ids),
                    trial_ids=list(req.trial_ids),
                    config=config,
                    context=req.context,
                    workspace_id=req.workspace_id,
                )
        except errors.InvalidArgument as e:
            raise _scrubbed(e, config) from None
        return tensorboards.to_proto(tb)

    async def set_tensorboard_priority(self, tensorboard_id: str, priority: int) -> v1.Tensorboard:
        tb = await self.set_task_priority(tensorboard_id, priority, TaskType.TENSORBOARD)
        return tensorboards.to_proto(tb)

    async def kill_tensorboard(self, tensorboard_id: str) -> v1.Tensorboard:
        async with self.lock:
            return tensorboards.to_proto(await self.tensorboards.kill(tensorboard_id))

    # -- commands, notebooks and shells ---------------------------------------------------------

    async def _templated(self, config: str, template_name: str) -> str:
        """The config with the named template (or its own ``template:``) merged under it."""
        if template_name:
            raw = expconf.load_yaml(config) if config.strip() else {}
            raw["template"] = template_name
            config = yaml.safe_dump(raw, sort_keys=False)
        return await self.templates.apply(config) if config.strip() else config

    async def launch_task(
        self,
        task_type: TaskType,
        username: str,
        config: str,
        *,
        template_name: str = "",
        context: bytes = b"",
        workspace_id: int = 0,
        preview: bool = False,
    ) -> GenericTask:
        """A command, notebook or shell, queued for its slots (with ``preview``, only made:
        its config as the master fills it, nothing launched)."""
        config = await self._templated(config, template_name)
        await self.check_task_workspace(workspace_id)
        try:
            task = await self.commands.make(
                task_type,
                username=username,
                config=config,
                context=context,
                workspace_id=workspace_id,
            )
        except errors.InvalidArgument as e:
            raise _scrubbed(e, config) from None
        if preview:
            return task
        async with self.lock:
            return await self.commands.queue(task, context)

    async def create_generic_task(
        self, req: v1.CreateGenericTaskRequest, username: str
    ) -> GenericTask:
        new = NewTask(
            config=req.config,
            context=req.context,
            project_id=req.project_id,
            forked_from=req.forked_from or "",
            parent_id=req.parent_id or "",
            inherit_context=req.inherit_context,
            no_pause=req.no_pause,
        )
        try:
            async with self.lock:
                return await self.commands.trees.create(new, username=username)
        except errors.InvalidArgument as e:
            raise _scrubbed(e, req.config) from None

    async def generic_task_config(self, task_id: str) -> str:
        """A generic task's config (JSON), as it was filled."""
        return json.dumps(shown_config(await self.commands.trees.get(task_id)))

    async def steer_generic_task(self, task_id: str, action: str, *, root: bool = False) -> None:
        """Pause, unpause or kill a generic task and its children (``root``: its tree)."""
        trees = self.commands.trees
        async with self.lock:
            if action == "pause":
                await trees.pause(task_id)
            elif action == "unpause":
                await trees.unpause(task_id)
            else:
                await trees.kill(task_id, from_root=root)

    async def check_task_workspace(self, workspace_id: int) -> None:
        """A workspace a task may be launched into: one that exists, not archived (0: none
        named, Uncategorized)."""
        if not workspace_id:
            return
        workspace = await self.organization.workspaces.get(workspace_id)
        if workspace.archived:
            raise errors.FailedPrecondition(
                f"workspace {workspace.name!r} is archived; no task can be launched into it"
            )

    async def list_tasks(
        self, task_type: TaskType, req: TaskListRequest
    ) -> tuple[list[GenericTask], v1.Pagination]:
        """The live tasks of one type that a Get{Commands,Notebooks,Shells,Tensorboards}
        request asks for (its users, by name or id; its workspace, all when 0), in its order
        (oldest first by default), cut by its offset (from the end when negative) and limit."""
        users = set(req.users)
        for user_id in req.user_ids:
            row = await queries.user_by_id(self.db, user_id)
            if row is not None:
                users.add(row.username)
        by_user = bool(req.users or req.user_ids)
        found = [
            t
            for t in self.generic.live(task_type)
            if (not by_user or t.username in users)
            and (not req.workspace_id or t.workspace_id == req.workspace_id)
        ]
        key = _TASK_SORT_KEYS.get(int(req.sort_by), _TASK_SORT_KEYS[0])
        found.sort(key=key, reverse=req.order_by == v1.OrderBy.DESC)
        start = req.offset if req.offset >= 0 else max(len(found) + req.offset, 0)
        page = convert.pagination(len(found), start, req.limit)
        page.offset = req.offset
        return found[page.start_index : page.end_index], page

    async def kill_task(self, task_id: str, task_type: TaskType) -> GenericTask:
        async with self.lock:
            return await self.generic.kill(task_id, task_type)

    async def set_task_priority(
        self, task_id: str, priority: int, task_type: TaskType
    ) -> GenericTask:
        """A task's priority (a TensorBoard's, command's, notebook's or shell's), held to the
        NTSC (tasks') config policies (theirs are the default workspace's, under the global
        ones)."""
        found = await self.policies.effective(policies.NTSC, DEFAULT_WORKSPACE)
        policies.check_priority(found, priority, smaller_is_higher=True)
        async with self.lock:
            return await self.generic.set_priority(task_id, priority, task_type)

    # -- the job queue, pools and agent control --------------------------------------------

    def get_jobs(self, req: v1.GetJobsRequest) -> v1.GetJobsResponse:
        jobs = self.jobs.queue(req.resource_pool)
        page = convert.pagination(len(jobs), req.offset, req.limit)
        return v1.GetJobsResponse(jobs=jobs[page.start_index : page.end_index], pagination=page)

    def get_tasks(self) -> dict[str, v1.AllocationSummary]:
        return task_summaries.summaries(
            self.tasks, self.jobs.scheduler_of, self.generic.description_of
        )

    async def update_job_queue(self, updates: list[v1.JobUpdate]) -> None:
        """Apply ``det job update(-batch)``: all of it, or nothing when any part is refused.
        A notebook's, shell's, command's or TensorBoard's job changes its priority only."""
        live = {t.id: t for t in self.generic.live()}
        priorities = {
            u.job_id: _task_job_priority(u, live[u.job_id]) for u in updates if u.job_id in live
        }
        if priorities:
            found = await self.policies.effective(policies.NTSC, DEFAULT_WORKSPACE)
            for priority in priorities.values():
                policies.check_priority(found, priority, smaller_is_higher=True)
        updates = [u for u in updates if u.job_id not in priorities]
        for u in updates:
            exp = self.jobs.experiment_of(u.job_id)
            if u.priority is not None and exp is not None:
                await self._check_changes(exp.id, priority=u.priority, max_slots=None)
            if u.resource_pool and exp is not None:
                await self._check_pool_move(u.resource_pool, exp.id)
        async with self.lock:
            await self.jobs.update(updates)
            for job_id, priority in priorities.items():
                await self.generic.set_priority(job_id, priority)

    async def _check_pool_move(self, pool: str, exp_id: int) -> None:
        """An experiment moved to ``pool`` must be of a workspace the pool is available to."""
        workspace_id = await queries.experiment_workspace(self.db, exp_id) or DEFAULT_WORKSPACE
        workspace = await self.organization.workspaces.get(workspace_id)
        await self.organization.bindings.check(
            pool, workspace.id, workspace.name, field="resource_pool"
        )

    async def set_experiment_resources(self, req: v1.SetExperimentResourcesRequest) -> None:
        await self._check_changes(req.experiment_id, priority=req.priority, max_slots=req.max_slots)
        async with self.lock:
            await self.jobs.set_resources(
                req.experiment_id,
                priority=req.priority,
                weight=req.weight,
                max_slots=req.max_slots,
            )

    def get_resource_pools(self) -> v1.GetResourcePoolsResponse:
        pools = self.jobs.pools()
        return v1.GetResourcePoolsResponse(
            resource_pools=pools, pagination=convert.pagination(len(pools))
        )

    async def set_agent_enabled(self, agent_id: str, *, enabled: bool, drain: bool) -> v1.Agent:
        async with self.lock:
            return self.jobs.set_agent_enabled(agent_id, enabled=enabled, drain=drain)

    async def set_slot_enabled(
        self, agent_id: str, slot_id: str, *, enabled: bool, drain: bool
    ) -> v1.Slot:
        async with self.lock:
            return self.jobs.set_slot_enabled(agent_id, slot_id, enabled=enabled, drain=drain)

    async def set_experiment_log_retention(self, experiment_id: int, days: int) -> None:
        """`det experiment set log-retention`: on its trials, and in its config for those
        to come (the live config too, which the store is written from)."""
        async with self.lock:
            await log_retention.set_experiment_days(self.db, experiment_id, days)
            exp = self.live.get(experiment_id)
            if exp is not None:
                kept = {**exp.config.kept, "retention_policy": {"log_retention_days": days}}
                exp.config = dataclasses.replace(exp.config, kept=kept)

    def trial_state(self, trial_id: int) -> State | None:
        found = self.live.trial(trial_id)
        return None if found is None else found[1].state

    # -- read-only queries for the HTTP gateway ----------------------------------------------

    async def get_checkpoints(
        self, *, experiment_id: int = 0, trial_id: int = 0
    ) -> list[v1.Checkpoint]:
        """An experiment's or a trial's checkpoints, oldest first."""
        if trial_id:
            rows = await queries.trial_checkpoints(self.db, trial_id)
        else:
            rows = await queries.experiment_checkpoints(self.db, experiment_id)
        return [convert.checkpoint(r) for r in rows]

    async def get_checkpoint(self, uuid: str) -> v1.Checkpoint:
        return convert.checkpoint(await queries.checkpoint(self.db, uuid))

    async def get_best_validation(self, experiment_id: int) -> float | None:
        return await queries.best_validation(self.db, experiment_id)

    async def get_trial_metrics_json(
        self, req: v1.GetTrialMetricsRequest, *, max_points: int = 0
    ) -> str:
        """``get_trial_metrics`` as the JSON list of MetricReport the HTTP API returns; with
        ``max_points``, each group is thinned to about that many reports for a chart's
        first view (``queries.trial_metrics_json``)."""
        return await queries.trial_metrics_json(
            self.db,
            req.trial_id,
            group=req.group,
            after_steps=req.after_steps if req.after_steps else -1,
            limit=req.limit,
            max_points=max_points,
        )
