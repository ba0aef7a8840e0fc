"""The master's operations, shared by both transports (gRPC servicer and HTTP gateway).

Messages in and out are the API's; state changes run under the master's one lock so that
experiment, trial and allocation state move together."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from determined.api.gen import v1
from determined.common import errors
from master import convert, queries, redaction
from master.agents import AgentTable
from master.checkpoints import Checkpoints
from master.db import Database
from master.events import EventBus
from master.experiments import Experiments, MasterInfo
from master.jobs import Jobs
from master.logs import LogFilter, LogStore
from master.reports import Reports
from master.search import preview
from master.states import State, parse
from master.task_list import TaskList

T = TypeVar("T")

_ORDER_COLUMNS = {
    "id": "id",
    "name": "name",
    "state": "state",
    "start_time": "start_time",
    "end_time": "end_time",
    "progress": "progress",
}


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
        reports: Reports,
        checkpoints: Checkpoints,
        info: MasterInfo,
        version: str,
        events: EventBus,
        jobs: Jobs,
    ) -> None:
        self.events = events
        self.jobs = jobs
        self.db = db
        self.lock = lock
        self.agents = agents
        self.logs = logs
        self.tasks = tasks
        self.experiments = experiments
        self.reports = reports
        self.checkpoints = checkpoints
        self.info = info
        self.version = version

    async def locked(self, awaitable: Awaitable[T]) -> T:
        async with self.lock:
            return await awaitable

    def master_info(self) -> v1.GetMasterResponse:
        return v1.GetMasterResponse(
            version=self.version, cluster_id=self.info.cluster_id, cluster_name="pydet"
        )

    # -- experiments -------------------------------------------------------------------------

    async def create_experiment(
        self, req: v1.CreateExperimentRequest
    ) -> v1.CreateExperimentResponse:
        text = req.config
        if req.parent_id:
            # A fork of a config as it was shown: its hidden secrets are the parent's.
            parent = await self.db.fetch_one(
                "SELECT config FROM experiments WHERE id = ?", (req.parent_id,)
            )
            if parent is not None:
                text = redaction.restore_secrets(text, parent["config"])
        try:
            if req.validate_only:
                cfg = self.experiments.validate(text)
                return v1.CreateExperimentResponse(
                    config=json.dumps(redaction.redacted(cfg.to_dict()))
                )
            async with self.lock:
                exp_id = await self.experiments.create(
                    text,
                    req.context,
                    paused=req.paused,
                    username=req.username or "determined",
                    parent_id=req.parent_id,
                )
        except errors.InvalidArgument as e:
            raise _scrubbed(e, text) from None
        resp = await self.get_experiment(exp_id)
        return v1.CreateExperimentResponse(experiment=resp.experiment, config=resp.config)

    async def _experiment_message(self, row: object) -> v1.Experiment:
        from master.db import Row

        assert isinstance(row, Row)
        stats = await self.db.fetch_one(
            "SELECT COUNT(*) AS n, MIN(best_validation) AS lo, MAX(best_validation) AS hi"
            " FROM trials WHERE experiment_id = ?",
            (row["id"],),
        )
        smaller = json.loads(row["config"])["searcher"].get("smaller_is_better", True)
        best = None
        if stats is not None:
            best = stats["lo"] if smaller else stats["hi"]
        return convert.experiment(row, num_trials=stats["n"] if stats else 0, best=best)

    async def get_experiments(self, req: v1.GetExperimentsRequest) -> v1.GetExperimentsResponse:
        where = ["1 = 1"]
        params: list[object] = []
        if req.states:
            states = [parse(s.name).value for s in req.states]
            where.append(f"state IN ({','.join('?' * len(states))})")
            params += states
        if req.archived is not None:
            where.append("archived = ?")
            params.append(int(req.archived))
        if req.name:
            where.append("instr(lower(name), lower(?)) > 0")
            params.append(req.name)
        column = _ORDER_COLUMNS.get(req.order_by or "id")
        if column is None:
            raise errors.InvalidArgument(
                f"order_by: expected one of {', '.join(_ORDER_COLUMNS)}; got {req.order_by!r}"
            )
        clause = " AND ".join(where)
        total = await self.db.fetch_one(
            f"SELECT COUNT(*) AS n FROM experiments WHERE {clause}", params
        )
        rows = await self.db.fetch_all(
            f"SELECT e.*, (SELECT COUNT(*) FROM trials t WHERE t.experiment_id = e.id) AS n,"
            f" (SELECT MIN(best_validation) FROM trials t WHERE t.experiment_id = e.id) AS lo,"
            f" (SELECT MAX(best_validation) FROM trials t WHERE t.experiment_id = e.id) AS hi"
            f" FROM experiments e WHERE {clause}"
            f" ORDER BY {column} {'DESC' if req.descending else 'ASC'} LIMIT ? OFFSET ?",
            [*params, req.limit or -1, req.offset],
        )
        experiments = []
        for row in rows:
            smaller = json.loads(row["config"])["searcher"].get("smaller_is_better", True)
            best = row["lo"] if smaller else row["hi"]
            experiments.append(convert.experiment(row, num_trials=row["n"], best=best))
        return v1.GetExperimentsResponse(
            experiments=experiments, total=total["n"] if total is not None else 0
        )

    async def get_experiment(self, experiment_id: int) -> v1.GetExperimentResponse:
        row = await self.db.fetch_one("SELECT * FROM experiments WHERE id = ?", (experiment_id,))
        if row is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        return v1.GetExperimentResponse(
            experiment=await self._experiment_message(row),
            config=redaction.redacted_json(row["config"]),
            original_config=redaction.redacted_yaml(row["original_config"]),
        )

    async def get_experiment_trials(self, experiment_id: int) -> list[v1.Trial]:
        await self.experiments.ensure_experiment(experiment_id)
        rows = await self.db.fetch_all(
            "SELECT * FROM trials WHERE experiment_id = ? ORDER BY id", (experiment_id,)
        )
        return [convert.trial(r) for r in rows]

    async def get_experiment_context(self, experiment_id: int) -> bytes:
        row = await self.db.fetch_one(
            "SELECT data FROM contexts WHERE experiment_id = ?", (experiment_id,)
        )
        if row is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        return bytes(row["data"])

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
                uuids = await exps.delete(experiment_id)
                await self.checkpoints.delete_files(uuids)
                return v1.ExperimentActionResponse()
            else:
                raise errors.InvalidArgument(f"unknown experiment action {action!r}")
        return v1.ExperimentActionResponse(
            experiment=(await self.get_experiment(experiment_id)).experiment
        )

    # -- trials ----------------------------------------------------------------------------

    async def get_trial(self, trial_id: int) -> v1.Trial:
        row = await self.db.fetch_one("SELECT * FROM trials WHERE id = ?", (trial_id,))
        if row is None:
            raise errors.NotFound(f"trial {trial_id} not found")
        return convert.trial(row)

    async def kill_trial(self, trial_id: int) -> None:
        async with self.lock:
            await self.experiments.kill_trial(trial_id)

    async def trial_logs(self, req: v1.TrialLogsRequest) -> AsyncIterator[list[v1.TaskLog]]:
        await self.get_trial(req.trial_id)
        f = LogFilter(
            head=max(0, req.head),
            tail=max(0, req.tail),
            rank_ids=tuple(req.rank_ids),
            levels=tuple(req.levels),
            min_level=req.min_level,
            search=req.search,
            after_id=req.after_id,
        )

        async def done() -> bool:
            return self.experiments.live_trial(req.trial_id) is None

        async for rows in self.logs.stream(req.trial_id, f, follow=req.follow, is_done=done):
            yield [convert.task_log(r) for r in rows]

    async def get_trial_metrics(self, req: v1.GetTrialMetricsRequest) -> list[v1.MetricReport]:
        await self.get_trial(req.trial_id)
        where = "trial_id = ? AND steps_completed > ?"
        params: list[object] = [req.trial_id, req.after_steps if req.after_steps else -1]
        if req.group:
            where += " AND grp = ?"
            params.append(req.group)
        rows = await self.db.fetch_all(
            f"SELECT * FROM metrics WHERE {where} ORDER BY steps_completed, id LIMIT ?",
            [*params, req.limit or -1],
        )
        return [convert.metric(r) for r in rows]

    # -- agents and allocations ------------------------------------------------------------------

    def get_agents(self) -> list[v1.Agent]:
        return [a.to_proto() for a in sorted(self.agents.agents.values(), key=lambda a: a.id)]

    async def allgather(self, req: v1.AllGatherRequest) -> list[bytes]:
        alloc = self.tasks.get(req.allocation_id)
        timeout = req.timeout_seconds if req.timeout_seconds > 0 else 3600.0
        return await alloc.allgather(
            req.group, req.seq, req.rank, req.size, req.data, timeout, req.request_id
        )

    async def report_metrics(self, req: v1.ReportTrialMetricsRequest) -> None:
        await self.reports.metrics(req.trial_id, req.run_id, req.reports)
        for r in req.reports:
            if r.group == "validation":
                metrics = json.loads(r.metrics)
                await self.locked(
                    self.experiments.validation_reported(req.trial_id, metrics, r.steps_completed)
                )

    def preview_search(self, config_text: str) -> v1.PreviewSearchResponse:
        try:
            cfg = self.experiments.validate(config_text)
        except errors.InvalidArgument as e:
            raise _scrubbed(e, config_text) from None
        entries, unit = preview.preview(cfg)
        return v1.PreviewSearchResponse(
            entries=[v1.SearchPreviewEntry(num_trials=n, length=length) for n, length in entries],
            unit=unit,
            total_trials=sum(n for n, _ in entries),
        )

    # -- the job queue, pools and agent control --------------------------------------------

    def get_jobs(self, pool: str) -> list[v1.Job]:
        return self.jobs.queue(pool)

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

    def get_resource_pools(self) -> list[v1.ResourcePool]:
        return self.jobs.pools()

    async def set_agent_enabled(self, agent_id: str, *, enabled: bool, drain: bool) -> v1.Agent:
        async with self.lock:
            return self.jobs.set_agent_enabled(agent_id, enabled=enabled, drain=drain)

    def trial_state(self, trial_id: int) -> State | None:
        found = self.experiments.live_trial(trial_id)
        return None if found is None else found[1].state

    # -- read-only queries for the HTTP gateway ----------------------------------------------

    async def get_checkpoints(
        self, *, experiment_id: int = 0, trial_id: int = 0
    ) -> list[v1.Checkpoint]:
        """An experiment's or a trial's checkpoints, oldest first."""
        return await self.checkpoints.get_checkpoints(
            experiment_id=experiment_id, trial_id=trial_id
        )

    async def get_trial_metrics_json(
        self, req: v1.GetTrialMetricsRequest, *, max_points: int = 0
    ) -> str:
        """``get_trial_metrics`` as the JSON list of MetricReport the HTTP API returns,
        built by SQLite in one statement: a trial can have 100,000 reports, which as API
        messages take seconds to encode and as one JSON text a fraction of one.

        With ``max_points``, each group is thinned to about that many reports for a chart's
        first view (``queries.trial_metrics_json``)."""
        await self.get_trial(req.trial_id)
        return await queries.trial_metrics_json(
            self.db,
            req.trial_id,
            group=req.group,
            after_steps=req.after_steps if req.after_steps else -1,
            limit=req.limit,
            max_points=max_points,
        )
