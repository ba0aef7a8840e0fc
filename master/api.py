"""The gRPC servicer: decode, call the domain, encode. It is served behind ``guard.Guarded``,
which authenticates and authorizes every call and maps the shared errors to gRPC statuses."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from determined.api.gen import v1
from determined.common import errors, structs
from pydet.master import convert, queries
from pydet.master.auth.authenticator import Authenticator
from pydet.master.auth.callers import UserCaller
from pydet.master.guard import current_caller, current_peer
from pydet.master.service import Service
from pydet.master.webhooks import dispatch as webhooks

log = logging.getLogger(__name__)


def _user() -> UserCaller:
    caller = current_caller()
    if not isinstance(caller, UserCaller):
        raise errors.PermissionDenied("only a user may make this call")
    return caller


class DeterminedServicer(v1.DeterminedBase):
    def __init__(self, service: Service, auth: Authenticator) -> None:
        self.s = service
        self.auth = auth

    async def get_master(self, message: v1.GetMasterRequest) -> v1.GetMasterResponse:
        return self.s.master_info()

    # -- users -------------------------------------------------------------------------------

    async def login(self, message: v1.LoginRequest) -> v1.LoginResponse:
        return await self.auth.login(message.username, message.password, current_peer())

    async def logout(self, message: v1.LogoutRequest) -> v1.LogoutResponse:
        await self.auth.logout(_user())
        return v1.LogoutResponse()

    async def get_me(self, message: v1.GetMeRequest) -> v1.GetMeResponse:
        return v1.GetMeResponse(user=await self.auth.me(_user()))

    async def get_users(self, message: v1.GetUsersRequest) -> v1.GetUsersResponse:
        users = await self.auth.users()
        return v1.GetUsersResponse(users=users, pagination=convert.pagination(len(users)))

    async def post_user(self, message: v1.PostUserRequest) -> v1.PostUserResponse:
        user = await self.auth.create_user(message.username, message.password, admin=message.admin)
        return v1.PostUserResponse(user=user)

    async def set_user_password(
        self, message: v1.SetUserPasswordRequest
    ) -> v1.SetUserPasswordResponse:
        await self.auth.set_password(_user(), message.username, message.password)
        return v1.SetUserPasswordResponse()

    async def patch_user(self, message: v1.PatchUserRequest) -> v1.PatchUserResponse:
        user = await self.auth.patch_user(
            _user(), message.username, active=message.active, admin=message.admin
        )
        return v1.PatchUserResponse(user=user)

    # -- experiments ---------------------------------------------------------------------------

    async def create_experiment(
        self, message: v1.CreateExperimentRequest
    ) -> v1.CreateExperimentResponse:
        # The owner is whoever is logged in, whatever the request says.
        message.username = _user().username
        return await self.s.create_experiment(message)

    async def get_experiments(self, message: v1.GetExperimentsRequest) -> v1.GetExperimentsResponse:
        return await self.s.get_experiments(message)

    async def get_experiment(self, message: v1.GetExperimentRequest) -> v1.GetExperimentResponse:
        return await self.s.get_experiment(message.experiment_id)

    async def get_experiment_trials(
        self, message: v1.GetExperimentTrialsRequest
    ) -> v1.GetExperimentTrialsResponse:
        return await self.s.get_experiment_trials(message)

    async def get_experiment_context(
        self, message: v1.GetExperimentContextRequest
    ) -> v1.GetExperimentContextResponse:
        return v1.GetExperimentContextResponse(
            context=await self.s.get_experiment_context(message.experiment_id)
        )

    async def activate_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        return await self.s.experiment_action("activate", message.experiment_id)

    async def pause_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        return await self.s.experiment_action("pause", message.experiment_id)

    async def cancel_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        return await self.s.experiment_action("cancel", message.experiment_id)

    async def kill_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        return await self.s.experiment_action("kill", message.experiment_id)

    async def archive_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        return await self.s.experiment_action("archive", message.experiment_id)

    async def unarchive_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        return await self.s.experiment_action("unarchive", message.experiment_id)

    async def delete_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        return await self.s.experiment_action("delete", message.experiment_id)

    async def continue_experiment(
        self, message: v1.ContinueExperimentRequest
    ) -> v1.ContinueExperimentResponse:
        return await self.s.continue_experiment(message.id, message.override_config)

    async def get_trial(self, message: v1.GetTrialRequest) -> v1.GetTrialResponse:
        return v1.GetTrialResponse(trial=await self.s.get_trial(message.trial_id))

    async def create_trial(self, message: v1.CreateTrialRequest) -> v1.CreateTrialResponse:
        return v1.CreateTrialResponse(trial=await self.s.create_trial(message))

    async def start_trial(self, message: v1.StartTrialRequest) -> v1.StartTrialResponse:
        return await self.s.start_trial(message.trial_id)

    async def patch_trial(self, message: v1.PatchTrialRequest) -> v1.PatchTrialResponse:
        return v1.PatchTrialResponse(trial=await self.s.patch_trial(message))

    async def post_run_metadata(
        self, message: v1.PostRunMetadataRequest
    ) -> v1.PostRunMetadataResponse:
        stored = await self.s.set_trial_metadata(message.run_id, message.metadata)
        return v1.PostRunMetadataResponse(metadata=stored)

    async def get_run_metadata(
        self, message: v1.GetRunMetadataRequest
    ) -> v1.GetRunMetadataResponse:
        return v1.GetRunMetadataResponse(metadata=await self.s.trial_metadata(message.run_id))

    async def kill_trial(self, message: v1.KillTrialRequest) -> v1.KillTrialResponse:
        await self.s.kill_trial(message.trial_id)
        return v1.KillTrialResponse()

    async def trial_logs(self, message: v1.TrialLogsRequest) -> AsyncIterator[v1.TrialLogsResponse]:
        async for logs in self.s.trial_logs(message):
            yield v1.TrialLogsResponse(logs=logs)

    async def task_logs(self, message: v1.TaskLogsRequest) -> v1.TaskLogsResponse:
        return v1.TaskLogsResponse(logs=await self.s.task_logs(message))

    async def get_trial_metrics(
        self, message: v1.GetTrialMetricsRequest
    ) -> v1.GetTrialMetricsResponse:
        return v1.GetTrialMetricsResponse(reports=await self.s.get_trial_metrics(message))

    async def get_agents(self, message: v1.GetAgentsRequest) -> v1.GetAgentsResponse:
        return self.s.get_agents()

    async def enable_agent(self, message: v1.AgentActionRequest) -> v1.AgentActionResponse:
        agent = await self.s.set_agent_enabled(message.agent_id, enabled=True, drain=False)
        return v1.AgentActionResponse(agent=agent)

    async def disable_agent(self, message: v1.AgentActionRequest) -> v1.AgentActionResponse:
        agent = await self.s.set_agent_enabled(message.agent_id, enabled=False, drain=message.drain)
        return v1.AgentActionResponse(agent=agent)

    async def get_resource_pools(
        self, message: v1.GetResourcePoolsRequest
    ) -> v1.GetResourcePoolsResponse:
        return self.s.get_resource_pools()

    async def get_jobs(self, message: v1.GetJobsRequest) -> v1.GetJobsResponse:
        return self.s.get_jobs(message)

    async def get_tasks(self, message: v1.GetTasksRequest) -> v1.GetTasksResponse:
        return v1.GetTasksResponse(allocation_id_to_summary=self.s.get_tasks())

    async def update_job_queue(
        self, message: v1.UpdateJobQueueRequest
    ) -> v1.UpdateJobQueueResponse:
        await self.s.update_job_queue(list(message.updates))
        return v1.UpdateJobQueueResponse()

    async def set_experiment_resources(
        self, message: v1.SetExperimentResourcesRequest
    ) -> v1.SetExperimentResourcesResponse:
        await self.s.set_experiment_resources(message)
        return v1.SetExperimentResourcesResponse()

    async def report_trial_metrics(
        self, message: v1.ReportTrialMetricsRequest
    ) -> v1.ReportTrialMetricsResponse:
        await self.s.report_metrics(message)
        return v1.ReportTrialMetricsResponse()

    async def preview_search(self, message: v1.PreviewSearchRequest) -> v1.PreviewSearchResponse:
        return await self.s.preview_search(message.config)

    async def report_trial_progress(
        self, message: v1.ReportTrialProgressRequest
    ) -> v1.ReportTrialProgressResponse:
        await self.s.reports.progress(message.trial_id, message.progress)
        return v1.ReportTrialProgressResponse()

    async def report_trial_early_exit(
        self, message: v1.ReportTrialEarlyExitRequest
    ) -> v1.ReportTrialEarlyExitResponse:
        await self.s.locked(self.s.experiments.early_exit(message.trial_id, message.reason))
        return v1.ReportTrialEarlyExitResponse()

    async def get_best_validation(
        self, message: v1.GetBestValidationRequest
    ) -> v1.GetBestValidationResponse:
        return v1.GetBestValidationResponse(
            metric=await self.s.get_best_validation(message.experiment_id)
        )

    async def get_current_searcher_operation(
        self, message: v1.GetCurrentSearcherOperationRequest
    ) -> v1.GetCurrentSearcherOperationResponse:
        return await self._current_operation(message.trial_id)

    async def complete_searcher_operation(
        self, message: v1.CompleteSearcherOperationRequest
    ) -> v1.CompleteSearcherOperationResponse:
        await self.s.locked(
            self.s.experiments.complete_operation(
                message.trial_id, message.length, message.searcher_metric
            )
        )
        # The trial asks for its next op right after this: the answer saves it a round trip.
        return v1.CompleteSearcherOperationResponse(
            next=await self._current_operation(message.trial_id)
        )

    async def _current_operation(self, trial_id: int) -> v1.GetCurrentSearcherOperationResponse:
        length = await self.s.experiments.current_operation(trial_id)
        if length is None:
            return v1.GetCurrentSearcherOperationResponse(completed=True)
        return v1.GetCurrentSearcherOperationResponse(op=v1.SearcherOperation(length=length))

    async def allocation_all_gather(self, message: v1.AllGatherRequest) -> v1.AllGatherResponse:
        return v1.AllGatherResponse(data=await self.s.allgather(message))

    async def allocation_preemption_signal(
        self, message: v1.PreemptionSignalRequest
    ) -> v1.PreemptionSignalResponse:
        alloc = self.s.tasks.get(message.allocation_id)
        # 0 asks for the current answer without waiting.
        timeout = min(max(message.timeout_seconds, 0.0), 600.0)
        return v1.PreemptionSignalResponse(preempt=await alloc.wait_preemption(timeout))

    async def ack_allocation_preemption_signal(
        self, message: v1.AckPreemptionSignalRequest
    ) -> v1.AckPreemptionSignalResponse:
        await self.s.tasks.ack_preemption(self.s.tasks.get(message.allocation_id))
        return v1.AckPreemptionSignalResponse()

    async def mark_allocation_resources_daemon(
        self, message: v1.MarkAllocationResourcesDaemonRequest
    ) -> v1.MarkAllocationResourcesDaemonResponse:
        await self.s.locked(self.s.tasks.mark_daemon(message.allocation_id, message.resources_id))
        return v1.MarkAllocationResourcesDaemonResponse()

    async def report_checkpoint(
        self, message: v1.ReportCheckpointRequest
    ) -> v1.ReportCheckpointResponse:
        if message.checkpoint is None:
            raise errors.InvalidArgument("checkpoint is required")
        await self.s.experiments.report_checkpoint(message.checkpoint)
        return v1.ReportCheckpointResponse()

    async def get_checkpoint(self, message: v1.GetCheckpointRequest) -> v1.GetCheckpointResponse:
        return v1.GetCheckpointResponse(checkpoint=await self.s.get_checkpoint(message.uuid))

    async def get_checkpoints(self, message: v1.GetCheckpointsRequest) -> v1.GetCheckpointsResponse:
        found = await self.s.get_checkpoints(
            experiment_id=message.experiment_id, trial_id=message.trial_id
        )
        return v1.GetCheckpointsResponse(
            checkpoints=found, pagination=convert.pagination(len(found))
        )

    async def delete_checkpoints(
        self, message: v1.DeleteCheckpointsRequest
    ) -> v1.DeleteCheckpointsResponse:
        await self.s.checkpoints.delete_checkpoints(message.uuids)
        return v1.DeleteCheckpointsResponse()

    async def post_checkpoint_metadata(
        self, message: v1.PostCheckpointMetadataRequest
    ) -> v1.PostCheckpointMetadataResponse:
        c = message.checkpoint
        if c is None or not c.uuid:
            raise errors.InvalidArgument("checkpoint.uuid is required")
        await self.s.checkpoints.set_metadata(c.uuid, structs.python(c.metadata))
        return v1.PostCheckpointMetadataResponse(checkpoint=await self.s.get_checkpoint(c.uuid))

    # -- webhooks ----------------------------------------------------------------------------

    async def post_webhook(self, message: v1.PostWebhookRequest) -> v1.PostWebhookResponse:
        if message.webhook is None:
            raise errors.InvalidArgument("webhook is required")
        created = await self.s.webhooks.store.create(message.webhook)
        return v1.PostWebhookResponse(webhook=created.to_proto())

    async def get_webhooks(self, message: v1.GetWebhooksRequest) -> v1.GetWebhooksResponse:
        hooks = [w.to_proto() for w in await self.s.webhooks.store.all()]
        return v1.GetWebhooksResponse(webhooks=hooks, pagination=convert.pagination(len(hooks)))

    async def delete_webhook(self, message: v1.DeleteWebhookRequest) -> v1.DeleteWebhookResponse:
        await self.s.webhooks.store.delete(message.id)
        return v1.DeleteWebhookResponse()

    # -- templates ---------------------------------------------------------------------------

    async def get_templates(self, message: v1.GetTemplatesRequest) -> v1.GetTemplatesResponse:
        found = await self.s.templates.all(message.name)
        return v1.GetTemplatesResponse(templates=[t.to_proto() for t in found])

    async def get_template(self, message: v1.GetTemplateRequest) -> v1.GetTemplateResponse:
        found = await self.s.templates.get(message.template_name)
        return v1.GetTemplateResponse(template=found.to_proto())

    async def put_template(self, message: v1.PutTemplateRequest) -> v1.PutTemplateResponse:
        if message.template is None:
            raise errors.InvalidArgument("template is required")
        stored = await self.s.templates.put(message.template, _user().username)
        return v1.PutTemplateResponse(template=stored.to_proto())

    async def delete_template(self, message: v1.DeleteTemplateRequest) -> v1.DeleteTemplateResponse:
        await self.s.templates.delete(message.template_name)
        return v1.DeleteTemplateResponse()

    async def post_webhook_event_data(
        self, message: v1.PostWebhookEventDataRequest
    ) -> v1.PostWebhookEventDataResponse:
        fields = webhooks.alert_fields(message.data)
        experiment_id = await queries.trial_experiment(self.s.db, message.trial_id)
        if experiment_id is None:
            raise errors.NotFound(f"trial {message.trial_id} not found")
        if message.experiment_id and message.experiment_id != experiment_id:
            raise errors.InvalidArgument(
                f"trial {message.trial_id} belongs to experiment {experiment_id},"
                f" not {message.experiment_id}"
            )
        await self.s.webhooks.alert(experiment_id, message.trial_id, fields)
        return v1.PostWebhookEventDataResponse()

    # -- TensorBoards --------------------------------------------------------------------------

    async def launch_tensorboard(
        self, message: v1.LaunchTensorboardRequest
    ) -> v1.LaunchTensorboardResponse:
        tb = await self.s.launch_tensorboard(_user().username, message)
        return v1.LaunchTensorboardResponse(tensorboard=tb)

    async def get_tensorboards(
        self, message: v1.GetTensorboardsRequest
    ) -> v1.GetTensorboardsResponse:
        boards = [tb.to_proto() for tb in self.s.tensorboards.live()]
        return v1.GetTensorboardsResponse(
            tensorboards=boards, pagination=convert.pagination(len(boards))
        )

    async def get_tensorboard(self, message: v1.GetTensorboardRequest) -> v1.GetTensorboardResponse:
        tb = await self.s.tensorboards.get(message.tensorboard_id)
        return v1.GetTensorboardResponse(tensorboard=tb.to_proto())

    async def kill_tensorboard(
        self, message: v1.KillTensorboardRequest
    ) -> v1.KillTensorboardResponse:
        tb = await self.s.kill_tensorboard(message.tensorboard_id)
        return v1.KillTensorboardResponse(tensorboard=tb)

    async def post_allocation_proxy_address(
        self, message: v1.PostAllocationProxyAddressRequest
    ) -> v1.PostAllocationProxyAddressResponse:
        await self.s.locked(
            self.s.tensorboards.post_proxy_address(message.allocation_id, message.proxy_address)
        )
        return v1.PostAllocationProxyAddressResponse()
