"""The master's operations, shared by both transports (gRPC servicer and HTTP gateway).

Messages in and out are the API's; state changes run under the master's one lock so that
experiment, trial and allocation state move together."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from determined.api.gen import v1
from determined.common import errors, pareto, structs, timestamps
from pydet.master import convert, queries
from pydet.master.agents.table import AgentTable
from pydet.master.auth import redaction
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
from pydet.master.experiments.live import LiveExperiments
from pydet.master.experiments.manager import Experiments
from pydet.master.experiments.reports import Reports
from pydet.master.experiments.templates import Templates
from pydet.master.jobs.queue import Jobs
from pydet.master.logs.log_store import LogStore
from pydet.master.provisioner.pools import ElasticPools
from pydet.master.search import preview
from pydet.master.states import State
from pydet.master.store.db import Database
from pydet.master.tasks import task_summaries
from pydet.master.tasks.task_list import TaskList
from pydet.master.tasks.task_spec import MasterInfo
from pydet.master.tasks.tensorboards import Tensorboards
from pydet.master.webhooks.dispatch import Webhooks

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


def _scrubbed(e: errors.InvalidArgument, config_text: str) -> errors.InvalidArgument:
    """``e`` without the config's secrets in its message (``e`` itself if it had none)."""
    message = redaction.scrubbed(e.message, config_text)
    return e if message == e.message else errors.InvalidArgument(message)


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
        elastic: ElasticPools | None = None,
    ) -> None:
        self.elastic = elastic or ElasticPools()
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
        self.master_id = str(uuid.uuid4())  # this process's, as Determined's master_id

    async def locked(self, awaitable: Awaitable[T]) -> T:
        async with self.lock:
            return await awaitable

    def master_info(self) -> v1.GetMasterResponse:
        return v1.GetMasterResponse(
            version=self.version,
            cluster_id=self.info.cluster_id,
            cluster_name="pydet",
            master_id=self.master_id,
            user_management_enabled=True,
            product=v1.GetMasterResponseProduct.COMMUNITY,
        )

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
            if req.validate_only and not unmanaged:
                cfg = self.experiments.validate(text)
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
                )
        except errors.InvalidArgument as e:
            raise _scrubbed(e, text) from None
        resp = await self.get_experiment(created.id)
        return v1.CreateExperimentResponse(
            experiment=resp.experiment,
            config=resp.config,
            warning_messages=list(created.warnings),
        )

    async def get_experiments(self, req: v1.GetExperimentsRequest) -> v1.GetExperimentsResponse:
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
        head, tail = max(0, req.head), max(0, req.tail)
        if req.limit > 0:  # Determined's: the first lines, or the last ones ordered DESC
            if req.order_by == v1.OrderBy.DESC:
                tail = min(tail, req.limit) if tail else req.limit
            else:
                head = min(head, req.limit) if head else req.limit
        f = queries.LogFilter(
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
            timestamp_before=timestamps.to_seconds(req.timestamp_before),
            timestamp_after=timestamps.to_seconds(req.timestamp_after),
        )

        async def done() -> bool:
            return self.live.trial(req.trial_id) is None

        async for rows in self.logs.stream(req.trial_id, f, follow=req.follow, is_done=done):
            yield [convert.task_log(r) for r in rows]

    async def task_logs(self, req: v1.TaskLogsRequest) -> list[v1.TaskLog]:
        f = queries.LogFilter(head=max(0, req.head), tail=max(0, req.tail))
        rows = await queries.task_logs(self.db, 0, f, task_id=req.task_id)
        if not rows and self.tasks.allocation_of(req.task_id) is None:
            await self.tensorboards.get(req.task_id)  # NotFound for an unknown task
        return [convert.task_log(r) for r in rows]

    async def get_trial_metrics(self, req: v1.GetTrialMetricsRequest) -> list[v1.MetricReport]:
        rows = await queries.metrics(
            self.db,
            req.trial_id,
            group=req.group,
            after_steps=req.after_steps if req.after_steps else -1,
            limit=req.limit,
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
        async with self.lock:
            tb = await self.tensorboards.launch(
                username=username,
                experiment_ids=list(req.experiment_ids),
                trial_ids=list(req.trial_ids),
            )
        return tb.to_proto()

    async def kill_tensorboard(self, tensorboard_id: str) -> v1.Tensorboard:
        async with self.lock:
            return (await self.tensorboards.kill(tensorboard_id)).to_proto()

    # -- the job queue, pools and agent control --------------------------------------------

    def get_jobs(self, req: v1.GetJobsRequest) -> v1.GetJobsResponse:
        jobs = self.jobs.queue(req.resource_pool)
        page = convert.pagination(len(jobs), req.offset, req.limit)
        return v1.GetJobsResponse(jobs=jobs[page.start_index : page.end_index], pagination=page)

    def get_tasks(self) -> dict[str, v1.AllocationSummary]:
        return task_summaries.summaries(self.tasks, self.jobs.scheduler_of)

    async def update_job_queue(self, updates: list[v1.JobUpdate]) -> None:
        async with self.lock:
            await self.jobs.update(updates)

    async def set_experiment_resources(self, req: v1.SetExperimentResourcesRequest) -> None:
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
