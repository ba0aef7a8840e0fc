"""The gRPC servicer's handlers for running the cluster (api.py's ``DeterminedServicer``
inherits them): the master's config and log, the cluster-wide message, single slots,
resource use, log cleanup, config policies, and what is kept of an experiment (its gc
policy and log retention) and templates made or changed in one step.

Thin like the rest of the servicer: decode, call the domain, encode. Who may call each is
in ``auth/rules.py``.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from determined.api.gen import v1
from determined.common import errors, timestamps
from pydet.master import convert
from pydet.master.auth.callers import UserCaller
from pydet.master.experiments.gc_policy import GcPolicy
from pydet.master.guard import current_caller
from pydet.master.logs import master_log
from pydet.master.logs import retention as log_retention
from pydet.master.queries import usage
from pydet.master.service import Service

# Days (or months) one ResourceAllocationAggregated answers for: ten years by day.
MAX_PERIODS = 3660


def _username() -> str:
    caller = current_caller()
    return caller.username if isinstance(caller, UserCaller) else ""


def _entry(e: master_log.Entry) -> v1.LogEntry:
    return v1.LogEntry(id=e.id, message=e.message, timestamp=e.time, level=e.level)


def _date(text: str, field: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise errors.InvalidArgument(f"{field}: expected a date YYYY-MM-DD, got {text!r}") from None


def _policy(p: v1.GcPolicy | None) -> GcPolicy:
    if p is None:
        raise errors.InvalidArgument("policy is required")
    return GcPolicy(p.save_experiment_best, p.save_trial_best, p.save_trial_latest)


class AdminRpcs:
    """Mixed into the servicer, which sets these."""

    s: Service
    master_log: master_log.MasterLog
    # config.printable's answer, changed by PatchMasterConfig.
    master_config: dict[str, Any]
    # The master config's retention_policy.log_retention_days.
    log_retention_days: int | None

    # -- the master ----------------------------------------------------------------------------

    async def get_master_config(
        self, message: v1.GetMasterConfigRequest
    ) -> v1.GetMasterConfigResponse:
        return v1.GetMasterConfigResponse(config=json.dumps(self.master_config))

    async def patch_master_config(
        self, message: v1.PatchMasterConfigRequest
    ) -> v1.PatchMasterConfigResponse:
        log = message.log or v1.LogConfig()
        paths = list(message.field_mask)
        if not paths:
            raise errors.InvalidArgument("field_mask: name log.level and/or log.color")
        for path in paths:
            if path == "log.level":
                level = master_log.LEVEL_NUMBERS.get(log.level.upper().removeprefix("LOG_LEVEL_"))
                if level is None:
                    raise errors.InvalidArgument(
                        f"log.level: expected one of {', '.join(master_log.LEVEL_NUMBERS)}, "
                        f"got {log.level!r}"
                    )
                logging.getLogger().setLevel(level)
                self.master_config["log"]["level"] = master_log.level_name(level).lower()
            elif path == "log.color":
                # The master's log has no colors; the setting is kept to be shown.
                self.master_config["log"]["color"] = log.color
            else:
                raise errors.InvalidArgument(
                    f"field_mask: {path!r} cannot be changed (only log.level and log.color)"
                )
        return v1.PatchMasterConfigResponse()

    async def master_logs(
        self, message: v1.MasterLogsRequest
    ) -> AsyncIterator[v1.MasterLogsResponse]:
        if message.limit < 0:
            raise errors.InvalidArgument(f"limit: must be 0 or more, got {message.limit}")
        if message.follow and message.limit:
            raise errors.InvalidArgument("limit: not with follow")
        if not message.follow:
            for e in self.master_log.entries(message.offset, message.limit):
                yield v1.MasterLogsResponse(log_entry=_entry(e))
            return
        async for batch in self.master_log.follow(message.offset):
            for e in batch:
                yield v1.MasterLogsResponse(log_entry=_entry(e))

    # -- the cluster-wide message --------------------------------------------------------------

    async def get_cluster_message(
        self, message: v1.GetClusterMessageRequest
    ) -> v1.GetClusterMessageResponse:
        current = self.s.messages.current()
        return v1.GetClusterMessageResponse(
            cluster_message=None if current is None else current.to_proto()
        )

    async def set_cluster_message(
        self, message: v1.SetClusterMessageRequest
    ) -> v1.SetClusterMessageResponse:
        await self.s.messages.set(
            message.message,
            username=_username(),
            start_time=timestamps.to_seconds(message.start_time) or 0.0,
            end_time=timestamps.to_seconds(message.end_time),
            duration=message.duration,
        )
        return v1.SetClusterMessageResponse()

    async def delete_cluster_message(
        self, message: v1.DeleteClusterMessageRequest
    ) -> v1.DeleteClusterMessageResponse:
        await self.s.messages.clear()
        return v1.DeleteClusterMessageResponse()

    # -- slots, resource use, logs -------------------------------------------------------------

    async def enable_slot(self, message: v1.EnableSlotRequest) -> v1.EnableSlotResponse:
        slot = await self.s.set_slot_enabled(
            message.agent_id, message.slot_id, enabled=True, drain=False
        )
        return v1.EnableSlotResponse(slot=slot)

    async def disable_slot(self, message: v1.DisableSlotRequest) -> v1.DisableSlotResponse:
        slot = await self.s.set_slot_enabled(
            message.agent_id, message.slot_id, enabled=False, drain=message.drain
        )
        return v1.DisableSlotResponse(slot=slot)

    async def resource_allocation_raw(
        self, message: v1.ResourceAllocationRawRequest
    ) -> v1.ResourceAllocationRawResponse:
        after, before = message.timestamp_after, message.timestamp_before
        if not after or not before:
            raise errors.InvalidArgument("timestamp_after and timestamp_before: both required")
        if after > before:
            raise errors.InvalidArgument("timestamp_after: the start cannot be after the end")
        now = time.time()
        rows = await usage.allocations(self.s.db, after, before)
        return v1.ResourceAllocationRawResponse(
            resource_entries=[
                v1.ResourceAllocationRawEntry(
                    kind=r.kind,
                    start_time=r.start_time,
                    end_time=r.end_time or 0.0,
                    experiment_id=r.experiment_id,
                    username=r.username,
                    labels=list(r.labels),
                    seconds=r.seconds_within(after, before, now),
                    slots=r.slots,
                    task_id=r.task_id,
                    allocation_id=r.allocation_id,
                    resource_pool=r.resource_pool,
                )
                for r in rows
            ]
        )

    async def resource_allocation_aggregated(
        self, message: v1.ResourceAllocationAggregatedRequest
    ) -> v1.ResourceAllocationAggregatedResponse:
        start = _date(message.start_date, "start_date")
        end = _date(message.end_date, "end_date")
        if start > end:
            raise errors.InvalidArgument("start_date: the start cannot be after the end")
        period = message.period or usage.DAILY
        if period not in (usage.DAILY, usage.MONTHLY):
            raise errors.InvalidArgument(
                f"period: expected {usage.DAILY} or {usage.MONTHLY}, got {period!r}"
            )
        if len(usage.periods(start, end, period)) > MAX_PERIODS:
            raise errors.InvalidArgument(
                f"end_date: at most {MAX_PERIODS} periods after start_date (ask per month)"
            )
        found = await usage.aggregated(self.s.db, start, end, period, now=time.time())
        return v1.ResourceAllocationAggregatedResponse(
            resource_entries=[
                v1.ResourceAllocationAggregatedEntry(
                    period_start=p.start.isoformat(),
                    period=period,
                    seconds=p.seconds,
                    by_username=dict(p.by_username),
                    by_experiment_label=dict(p.by_experiment_label),
                    by_resource_pool=dict(p.by_resource_pool),
                    by_agent_label=dict(p.by_agent_label),
                )
                for p in found
            ]
        )

    async def cleanup_logs(self, message: v1.CleanupLogsRequest) -> v1.CleanupLogsResponse:
        removed = await log_retention.delete_expired_logs(
            self.s.db, now=time.time(), default_days=self.log_retention_days
        )
        return v1.CleanupLogsResponse(removed_count=removed)

    # -- config policies -----------------------------------------------------------------------

    async def put_global_config_policies(
        self, message: v1.PutGlobalConfigPoliciesRequest
    ) -> v1.PutGlobalConfigPoliciesResponse:
        stored = await self.s.policies.put(
            message.workload_type, message.config_policies, username=_username()
        )
        return v1.PutGlobalConfigPoliciesResponse(config_policies=json.dumps(stored.to_dict()))

    async def get_global_config_policies(
        self, message: v1.GetGlobalConfigPoliciesRequest
    ) -> v1.GetGlobalConfigPoliciesResponse:
        found = await self.s.policies.get(message.workload_type)
        return v1.GetGlobalConfigPoliciesResponse(config_policies=json.dumps(found.to_dict()))

    async def delete_global_config_policies(
        self, message: v1.DeleteGlobalConfigPoliciesRequest
    ) -> v1.DeleteGlobalConfigPoliciesResponse:
        await self.s.policies.delete(message.workload_type)
        return v1.DeleteGlobalConfigPoliciesResponse()

    async def put_workspace_config_policies(
        self, message: v1.PutWorkspaceConfigPoliciesRequest
    ) -> v1.PutWorkspaceConfigPoliciesResponse:
        stored = await self.s.policies.put(
            message.workload_type,
            message.config_policies,
            username=_username(),
            workspace_id=message.workspace_id,
        )
        return v1.PutWorkspaceConfigPoliciesResponse(config_policies=json.dumps(stored.to_dict()))

    async def get_workspace_config_policies(
        self, message: v1.GetWorkspaceConfigPoliciesRequest
    ) -> v1.GetWorkspaceConfigPoliciesResponse:
        found = await self.s.policies.get(message.workload_type, message.workspace_id)
        return v1.GetWorkspaceConfigPoliciesResponse(config_policies=json.dumps(found.to_dict()))

    async def delete_workspace_config_policies(
        self, message: v1.DeleteWorkspaceConfigPoliciesRequest
    ) -> v1.DeleteWorkspaceConfigPoliciesResponse:
        await self.s.policies.delete(message.workload_type, message.workspace_id)
        return v1.DeleteWorkspaceConfigPoliciesResponse()

    # -- what is kept of an experiment ---------------------------------------------------------

    async def preview_experiment_gc(
        self, message: v1.PreviewExperimentGcRequest
    ) -> v1.PreviewExperimentGcResponse:
        metric, doomed = await self.s.gc_policies.preview(
            message.experiment_id, _policy(message.policy)
        )
        return v1.PreviewExperimentGcResponse(
            metric_name=metric, checkpoints=[convert.checkpoint(c) for c in doomed]
        )

    async def set_experiment_gc_policy(
        self, message: v1.SetExperimentGcPolicyRequest
    ) -> v1.SetExperimentGcPolicyResponse:
        policy = _policy(message.policy)
        deleted = await self.s.locked(self.s.gc_policies.apply(message.experiment_id, policy))
        return v1.SetExperimentGcPolicyResponse(deleted=deleted)

    async def put_experiment_retain_logs(
        self, message: v1.PutExperimentRetainLogsRequest
    ) -> v1.PutExperimentRetainLogsResponse:
        await self.s.set_experiment_log_retention(message.experiment_id, message.num_days)
        return v1.PutExperimentRetainLogsResponse()

    async def put_trial_retain_logs(
        self, message: v1.PutTrialRetainLogsRequest
    ) -> v1.PutTrialRetainLogsResponse:
        await log_retention.set_trial_days(self.s.db, message.trial_id, message.num_days)
        return v1.PutTrialRetainLogsResponse()

    # -- templates in one step -----------------------------------------------------------------

    async def post_template(self, message: v1.PostTemplateRequest) -> v1.PostTemplateResponse:
        if message.template is None:
            raise errors.InvalidArgument("template is required")
        stored = await self.s.templates.put(message.template, _username(), mode="create")
        return v1.PostTemplateResponse(template=stored.to_proto())

    async def set_tensorboard_priority(
        self, message: v1.SetTensorboardPriorityRequest
    ) -> v1.SetTensorboardPriorityResponse:
        tb = await self.s.set_tensorboard_priority(message.tensorboard_id, message.priority)
        return v1.SetTensorboardPriorityResponse(tensorboard=tb)

    async def patch_template_config(
        self, message: v1.PatchTemplateConfigRequest
    ) -> v1.PatchTemplateConfigResponse:
        template = v1.Template(name=message.template_name, config=message.config)
        stored = await self.s.templates.put(template, _username(), mode="replace")
        return v1.PatchTemplateConfigResponse(template=stored.to_proto())
