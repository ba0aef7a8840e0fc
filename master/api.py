"""The gRPC servicer: decode, call the domain, encode. It is served behind ``guard.Guarded``,
which authenticates and authorizes every call and maps the shared errors to gRPC statuses."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from determined.api.gen import v1
from determined.api.gen.google.protobuf import Struct
from determined.common import errors, structs
from pydet.master import convert, queries
from pydet.master.api_admin import AdminRpcs
from pydet.master.auth.access import Access
from pydet.master.auth.authenticator import Authenticator
from pydet.master.auth.callers import UserCaller
from pydet.master.commands import commands, notebooks, shells
from pydet.master.guard import current_caller, current_peer
from pydet.master.logs.master_log import MasterLog
from pydet.master.service import Service
from pydet.master.tasks import tensorboards
from pydet.master.tasks.generic import GenericTask, TaskType
from pydet.master.users import profiles
from pydet.master.users.profiles import Profiles
from pydet.master.webhooks import dispatch as webhooks

log = logging.getLogger(__name__)


def _user() -> UserCaller:
    caller = current_caller()
    if not isinstance(caller, UserCaller):
        raise errors.PermissionDenied("only a user may make this call")
    return caller


class DeterminedServicer(AdminRpcs, v1.DeterminedBase):
    def __init__(
        self,
        service: Service,
        auth: Authenticator,
        users: Profiles,
        access: Access,
        *,
        master_log: MasterLog | None = None,
        master_config: dict[str, Any] | None = None,
        log_retention_days: int | None = None,
    ) -> None:
        self.s = service
        self.auth = auth
        self.users = users
        self.access = access
        self.master_log = master_log or MasterLog()
        self.master_config = master_config if master_config is not None else {"log": {}}
        self.log_retention_days = log_retention_days

    async def get_master(self, message: v1.GetMasterRequest) -> v1.GetMasterResponse:
        return self.s.master_info()

    # -- users -------------------------------------------------------------------------------

    async def login(self, message: v1.LoginRequest) -> v1.LoginResponse:
        return await self.auth.login(message.username, message.password, current_peer())

    async def logout(self, message: v1.LogoutRequest) -> v1.LogoutResponse:
        await self.auth.logout(_user())
        return v1.LogoutResponse()

    async def get_me(self, message: v1.GetMeRequest) -> v1.GetMeResponse:
        return v1.GetMeResponse(user=profiles.message(await self.users.get(_user().id)))

    async def get_users(self, message: v1.GetUsersRequest) -> v1.GetUsersResponse:
        found = [profiles.message(u) for u in await self.users.all(active=message.active)]
        return v1.GetUsersResponse(users=found, pagination=convert.pagination(len(found)))

    async def get_user(self, message: v1.GetUserRequest) -> v1.GetUserResponse:
        return v1.GetUserResponse(user=profiles.message(await self.users.get(message.user_id)))

    async def get_user_by_username(
        self, message: v1.GetUserByUsernameRequest
    ) -> v1.GetUserByUsernameResponse:
        found = await self.users.by_name(message.username)
        return v1.GetUserByUsernameResponse(user=profiles.message(found))

    async def post_user(self, message: v1.PostUserRequest) -> v1.PostUserResponse:
        created = await self.users.create(
            message.username,
            message.password,
            admin=message.admin,
            remote=message.remote,
            display_name=message.display_name,
            agent=message.agent_user_group,
        )
        return v1.PostUserResponse(user=profiles.message(created))

    async def set_user_password(
        self, message: v1.SetUserPasswordRequest
    ) -> v1.SetUserPasswordResponse:
        await self.auth.set_password(_user(), message.username, message.password)
        return v1.SetUserPasswordResponse()

    async def patch_user(self, message: v1.PatchUserRequest) -> v1.PatchUserResponse:
        if not message.user_id:  # pydet's older form: the user by name, active and admin
            user = await self.auth.patch_user(
                _user(), message.username, active=message.active, admin=message.admin
            )
            return v1.PatchUserResponse(user=profiles.message(await self.users.get(user.id)))
        target = await self.users.get(message.user_id)
        async with self.s.lock:
            renamed = await self.users.patch(_user(), target, message.user or v1.PatchUser())
            if renamed is not None:
                self.s.user_renamed(renamed.old, renamed.new)
        return v1.PatchUserResponse(user=profiles.message(await self.users.get(target.id)))

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

    async def patch_experiment(
        self, message: v1.PatchExperimentRequest
    ) -> v1.PatchExperimentResponse:
        if message.experiment is None or not message.experiment.id:
            raise errors.InvalidArgument("experiment.id is required")
        return v1.PatchExperimentResponse(
            experiment=await self.s.patch_experiment(message.experiment)
        )

    async def put_experiment_label(
        self, message: v1.PutExperimentLabelRequest
    ) -> v1.PutExperimentLabelResponse:
        labels = await self.s.set_experiment_label(message.experiment_id, message.label, on=True)
        return v1.PutExperimentLabelResponse(labels=labels)

    async def delete_experiment_label(
        self, message: v1.DeleteExperimentLabelRequest
    ) -> v1.DeleteExperimentLabelResponse:
        labels = await self.s.set_experiment_label(message.experiment_id, message.label, on=False)
        return v1.DeleteExperimentLabelResponse(labels=labels)

    async def delete_tensorboard_files(
        self, message: v1.DeleteTensorboardFilesRequest
    ) -> v1.DeleteTensorboardFilesResponse:
        await self.s.delete_tensorboard_files(message.experiment_id)
        return v1.DeleteTensorboardFilesResponse()

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

    async def task_logs(self, message: v1.TaskLogsRequest) -> AsyncIterator[v1.TaskLogsResponse]:
        async for logs in self.s.task_logs(message):
            yield v1.TaskLogsResponse(logs=logs)

    async def get_trial_metrics(
        self, message: v1.GetTrialMetricsRequest
    ) -> v1.GetTrialMetricsResponse:
        return v1.GetTrialMetricsResponse(reports=await self.s.get_trial_metrics(message))

    async def get_metrics(
        self, message: v1.GetMetricsRequest
    ) -> AsyncIterator[v1.GetMetricsResponse]:
        async for page in self.s.get_metrics(list(message.trial_ids), message.group):
            yield v1.GetMetricsResponse(metrics=page)

    async def report_trial_source_info(
        self, message: v1.ReportTrialSourceInfoRequest
    ) -> v1.ReportTrialSourceInfoResponse:
        info = message.trial_source_info
        if info is None:
            raise errors.InvalidArgument("trial_source_info is required")
        await self.s.report_trial_source_info(info)
        return v1.ReportTrialSourceInfoResponse(
            trial_id=info.trial_id, checkpoint_uuid=info.checkpoint_uuid
        )

    async def get_trial_metrics_by_checkpoint(
        self, message: v1.GetTrialMetricsByCheckpointRequest
    ) -> v1.GetTrialMetricsByCheckpointResponse:
        return v1.GetTrialMetricsByCheckpointResponse(
            metrics=await self.s.trial_metrics_by_checkpoint(message)
        )

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

    async def checkpoints_remove_files(
        self, message: v1.CheckpointsRemoveFilesRequest
    ) -> v1.CheckpointsRemoveFilesResponse:
        await self.s.checkpoints.remove_files(
            list(message.checkpoint_uuids), list(message.checkpoint_globs)
        )
        return v1.CheckpointsRemoveFilesResponse()

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
        found, page = await self.s.list_tasks(TaskType.TENSORBOARD, message)
        boards = [tensorboards.to_proto(tb) for tb in found]
        return v1.GetTensorboardsResponse(tensorboards=boards, pagination=page)

    async def get_tensorboard(self, message: v1.GetTensorboardRequest) -> v1.GetTensorboardResponse:
        tb = await self.s.tensorboards.get(message.tensorboard_id)
        return v1.GetTensorboardResponse(tensorboard=tensorboards.to_proto(tb))

    async def kill_tensorboard(
        self, message: v1.KillTensorboardRequest
    ) -> v1.KillTensorboardResponse:
        tb = await self.s.kill_tensorboard(message.tensorboard_id)
        return v1.KillTensorboardResponse(tensorboard=tb)

    # -- workspaces and projects ------------------------------------------------------------------

    async def get_workspace(self, message: v1.GetWorkspaceRequest) -> v1.GetWorkspaceResponse:
        return await self.s.org.get_workspace(message)

    async def get_workspaces(self, message: v1.GetWorkspacesRequest) -> v1.GetWorkspacesResponse:
        return await self.s.org.get_workspaces(message)

    async def get_workspace_projects(
        self, message: v1.GetWorkspaceProjectsRequest
    ) -> v1.GetWorkspaceProjectsResponse:
        return await self.s.org.get_workspace_projects(message)

    async def post_workspace(self, message: v1.PostWorkspaceRequest) -> v1.PostWorkspaceResponse:
        return await self.s.org.post_workspace(message, user_id=_user().id)

    async def patch_workspace(self, message: v1.PatchWorkspaceRequest) -> v1.PatchWorkspaceResponse:
        return await self.s.org.patch_workspace(message)

    async def delete_workspace(
        self, message: v1.DeleteWorkspaceRequest
    ) -> v1.DeleteWorkspaceResponse:
        return await self.s.org.delete_workspace(message)

    async def archive_workspace(
        self, message: v1.ArchiveWorkspaceRequest
    ) -> v1.ArchiveWorkspaceResponse:
        await self.s.org.archive_workspace(message.id, True)
        return v1.ArchiveWorkspaceResponse()

    async def unarchive_workspace(
        self, message: v1.UnarchiveWorkspaceRequest
    ) -> v1.UnarchiveWorkspaceResponse:
        await self.s.org.archive_workspace(message.id, False)
        return v1.UnarchiveWorkspaceResponse()

    async def bind_rp_to_workspace(
        self, message: v1.BindRpToWorkspaceRequest
    ) -> v1.BindRpToWorkspaceResponse:
        return await self.s.org.bind_rp_to_workspace(message)

    async def unbind_rp_from_workspace(
        self, message: v1.UnbindRpFromWorkspaceRequest
    ) -> v1.UnbindRpFromWorkspaceResponse:
        return await self.s.org.unbind_rp_from_workspace(message)

    async def overwrite_rp_workspace_bindings(
        self, message: v1.OverwriteRpWorkspaceBindingsRequest
    ) -> v1.OverwriteRpWorkspaceBindingsResponse:
        return await self.s.org.overwrite_rp_workspace_bindings(message)

    async def list_workspaces_bound_to_rp(
        self, message: v1.ListWorkspacesBoundToRpRequest
    ) -> v1.ListWorkspacesBoundToRpResponse:
        return await self.s.org.list_workspaces_bound_to_rp(message)

    # (betterproto's name for ListRPsBoundToWorkspace)
    async def list_r_ps_bound_to_workspace(
        self, message: v1.ListRPsBoundToWorkspaceRequest
    ) -> v1.ListRPsBoundToWorkspaceResponse:
        return await self.s.org.list_rps_bound_to_workspace(message)

    async def get_project(self, message: v1.GetProjectRequest) -> v1.GetProjectResponse:
        return await self.s.org.get_project(message)

    async def get_project_by_key(
        self, message: v1.GetProjectByKeyRequest
    ) -> v1.GetProjectByKeyResponse:
        return await self.s.org.get_project_by_key(message)

    async def post_project(self, message: v1.PostProjectRequest) -> v1.PostProjectResponse:
        return await self.s.org.post_project(message, user_id=_user().id)

    async def add_project_note(
        self, message: v1.AddProjectNoteRequest
    ) -> v1.AddProjectNoteResponse:
        return await self.s.org.add_project_note(message)

    async def put_project_notes(
        self, message: v1.PutProjectNotesRequest
    ) -> v1.PutProjectNotesResponse:
        return await self.s.org.put_project_notes(message)

    async def patch_project(self, message: v1.PatchProjectRequest) -> v1.PatchProjectResponse:
        return await self.s.org.patch_project(message)

    async def delete_project(self, message: v1.DeleteProjectRequest) -> v1.DeleteProjectResponse:
        return await self.s.org.delete_project(message)

    async def move_project(self, message: v1.MoveProjectRequest) -> v1.MoveProjectResponse:
        return await self.s.org.move_project(message)

    async def archive_project(self, message: v1.ArchiveProjectRequest) -> v1.ArchiveProjectResponse:
        await self.s.org.archive_project(message.id, True)
        return v1.ArchiveProjectResponse()

    async def unarchive_project(
        self, message: v1.UnarchiveProjectRequest
    ) -> v1.UnarchiveProjectResponse:
        await self.s.org.archive_project(message.id, False)
        return v1.UnarchiveProjectResponse()

    async def move_experiment(self, message: v1.MoveExperimentRequest) -> v1.MoveExperimentResponse:
        return await self.s.org.move_experiment(message)

    async def move_experiments(
        self, message: v1.MoveExperimentsRequest
    ) -> v1.MoveExperimentsResponse:
        return await self.s.org.move_experiments(message)

    async def get_experiment_labels(
        self, message: v1.GetExperimentLabelsRequest
    ) -> v1.GetExperimentLabelsResponse:
        return await self.s.org.get_experiment_labels(message)

    # -- the model registry --------------------------------------------------------------------

    async def get_model(self, message: v1.GetModelRequest) -> v1.GetModelResponse:
        return await self.s.org.get_model(message)

    async def get_models(self, message: v1.GetModelsRequest) -> v1.GetModelsResponse:
        return await self.s.org.get_models(message)

    async def get_model_labels(
        self, message: v1.GetModelLabelsRequest
    ) -> v1.GetModelLabelsResponse:
        return await self.s.org.get_model_labels(message)

    async def post_model(self, message: v1.PostModelRequest) -> v1.PostModelResponse:
        return await self.s.org.post_model(message, user_id=_user().id)

    async def patch_model(self, message: v1.PatchModelRequest) -> v1.PatchModelResponse:
        return await self.s.org.patch_model(message)

    async def archive_model(self, message: v1.ArchiveModelRequest) -> v1.ArchiveModelResponse:
        await self.s.org.archive_model(message.model_name, True)
        return v1.ArchiveModelResponse()

    async def unarchive_model(self, message: v1.UnarchiveModelRequest) -> v1.UnarchiveModelResponse:
        await self.s.org.archive_model(message.model_name, False)
        return v1.UnarchiveModelResponse()

    async def move_model(self, message: v1.MoveModelRequest) -> v1.MoveModelResponse:
        return await self.s.org.move_model(message)

    async def delete_model(self, message: v1.DeleteModelRequest) -> v1.DeleteModelResponse:
        return await self.s.org.delete_model(message)

    async def get_model_version(
        self, message: v1.GetModelVersionRequest
    ) -> v1.GetModelVersionResponse:
        return await self.s.org.get_model_version(message)

    async def get_model_versions(
        self, message: v1.GetModelVersionsRequest
    ) -> v1.GetModelVersionsResponse:
        return await self.s.org.get_model_versions(message)

    async def post_model_version(
        self, message: v1.PostModelVersionRequest
    ) -> v1.PostModelVersionResponse:
        return await self.s.org.post_model_version(message, user_id=_user().id)

    async def patch_model_version(
        self, message: v1.PatchModelVersionRequest
    ) -> v1.PatchModelVersionResponse:
        return await self.s.org.patch_model_version(message)

    async def delete_model_version(
        self, message: v1.DeleteModelVersionRequest
    ) -> v1.DeleteModelVersionResponse:
        return await self.s.org.delete_model_version(message)

    async def post_allocation_proxy_address(
        self, message: v1.PostAllocationProxyAddressRequest
    ) -> v1.PostAllocationProxyAddressResponse:
        await self.s.locked(
            self.s.generic.post_proxy_address(
                message.allocation_id, message.proxy_address, message.user
            )
        )
        return v1.PostAllocationProxyAddressResponse()

    # -- commands ------------------------------------------------------------------------------

    async def _launched(
        self,
        task_type: TaskType,
        message: v1.LaunchCommandRequest | v1.LaunchNotebookRequest | v1.LaunchShellRequest,
    ) -> tuple[GenericTask, Struct]:
        """A command, notebook or shell launched as the calling user, and its config."""
        task = await self.s.launch_task(
            task_type,
            _user().username,
            json.dumps(structs.python(message.config)) if message.config is not None else "",
            template_name=message.template_name,
            context=message.context,
            workspace_id=message.workspace_id,
            preview=getattr(message, "preview", False),
        )
        return task, structs.struct(task.config)

    async def launch_command(self, message: v1.LaunchCommandRequest) -> v1.LaunchCommandResponse:
        task, config = await self._launched(TaskType.COMMAND, message)
        return v1.LaunchCommandResponse(command=commands.to_proto(task), config=config)

    async def get_commands(self, message: v1.GetCommandsRequest) -> v1.GetCommandsResponse:
        found, page = await self.s.list_tasks(TaskType.COMMAND, message)
        return v1.GetCommandsResponse(
            commands=[commands.to_proto(t) for t in found], pagination=page
        )

    async def get_command(self, message: v1.GetCommandRequest) -> v1.GetCommandResponse:
        task = await self.s.generic.get(message.command_id, TaskType.COMMAND)
        return v1.GetCommandResponse(
            command=commands.to_proto(task), config=structs.struct(task.config)
        )

    async def kill_command(self, message: v1.KillCommandRequest) -> v1.KillCommandResponse:
        task = await self.s.kill_task(message.command_id, TaskType.COMMAND)
        return v1.KillCommandResponse(command=commands.to_proto(task))

    async def set_command_priority(
        self, message: v1.SetCommandPriorityRequest
    ) -> v1.SetCommandPriorityResponse:
        task = await self.s.set_task_priority(
            message.command_id, message.priority, TaskType.COMMAND
        )
        return v1.SetCommandPriorityResponse(command=commands.to_proto(task))

    # -- notebooks -----------------------------------------------------------------------------

    async def launch_notebook(self, message: v1.LaunchNotebookRequest) -> v1.LaunchNotebookResponse:
        task, config = await self._launched(TaskType.NOTEBOOK, message)
        if message.preview:
            return v1.LaunchNotebookResponse(config=config)
        return v1.LaunchNotebookResponse(notebook=notebooks.to_proto(task), config=config)

    async def get_notebooks(self, message: v1.GetNotebooksRequest) -> v1.GetNotebooksResponse:
        found, page = await self.s.list_tasks(TaskType.NOTEBOOK, message)
        return v1.GetNotebooksResponse(
            notebooks=[notebooks.to_proto(t) for t in found], pagination=page
        )

    async def get_notebook(self, message: v1.GetNotebookRequest) -> v1.GetNotebookResponse:
        task = await self.s.generic.get(message.notebook_id, TaskType.NOTEBOOK)
        return v1.GetNotebookResponse(
            notebook=notebooks.to_proto(task), config=structs.struct(task.config)
        )

    async def kill_notebook(self, message: v1.KillNotebookRequest) -> v1.KillNotebookResponse:
        task = await self.s.kill_task(message.notebook_id, TaskType.NOTEBOOK)
        return v1.KillNotebookResponse(notebook=notebooks.to_proto(task))

    async def set_notebook_priority(
        self, message: v1.SetNotebookPriorityRequest
    ) -> v1.SetNotebookPriorityResponse:
        task = await self.s.set_task_priority(
            message.notebook_id, message.priority, TaskType.NOTEBOOK
        )
        return v1.SetNotebookPriorityResponse(notebook=notebooks.to_proto(task))

    async def idle_notebook(self, message: v1.IdleNotebookRequest) -> v1.IdleNotebookResponse:
        task = await self.s.generic.get(message.notebook_id, TaskType.NOTEBOOK)
        if not message.idle:
            self.s.generic.record_activity(task.id)
        return v1.IdleNotebookResponse()

    # -- shells --------------------------------------------------------------------------------

    async def launch_shell(self, message: v1.LaunchShellRequest) -> v1.LaunchShellResponse:
        task, config = await self._launched(TaskType.SHELL, message)
        return v1.LaunchShellResponse(shell=shells.to_proto(task, with_key=True), config=config)

    async def get_shells(self, message: v1.GetShellsRequest) -> v1.GetShellsResponse:
        found, page = await self.s.list_tasks(TaskType.SHELL, message)
        return v1.GetShellsResponse(shells=[shells.to_proto(t) for t in found], pagination=page)

    async def get_shell(self, message: v1.GetShellRequest) -> v1.GetShellResponse:
        # Its rule lets only its owner or an admin this far: the key is theirs.
        task = await self.s.generic.get(message.shell_id, TaskType.SHELL)
        return v1.GetShellResponse(
            shell=shells.to_proto(task, with_key=True), config=structs.struct(task.config)
        )

    async def kill_shell(self, message: v1.KillShellRequest) -> v1.KillShellResponse:
        task = await self.s.kill_task(message.shell_id, TaskType.SHELL)
        return v1.KillShellResponse(shell=shells.to_proto(task))

    async def set_shell_priority(
        self, message: v1.SetShellPriorityRequest
    ) -> v1.SetShellPriorityResponse:
        task = await self.s.set_task_priority(message.shell_id, message.priority, TaskType.SHELL)
        return v1.SetShellPriorityResponse(shell=shells.to_proto(task))

    async def get_task_context(
        self, message: v1.GetTaskContextRequest
    ) -> v1.GetTaskContextResponse:
        return v1.GetTaskContextResponse(context=await self.s.generic.context(message.task_id))

    # -- generic tasks ---------------------------------------------------------------------------

    async def create_generic_task(
        self, message: v1.CreateGenericTaskRequest
    ) -> v1.CreateGenericTaskResponse:
        task = await self.s.create_generic_task(message, _user().username)
        return v1.CreateGenericTaskResponse(task_id=task.id)

    async def get_generic_task_config(
        self, message: v1.GetGenericTaskConfigRequest
    ) -> v1.GetGenericTaskConfigResponse:
        config = await self.s.generic_task_config(message.task_id)
        return v1.GetGenericTaskConfigResponse(config=config)

    async def kill_generic_task(
        self, message: v1.KillGenericTaskRequest
    ) -> v1.KillGenericTaskResponse:
        await self.s.steer_generic_task(message.task_id, "kill", root=message.kill_from_root)
        return v1.KillGenericTaskResponse()

    async def pause_generic_task(
        self, message: v1.PauseGenericTaskRequest
    ) -> v1.PauseGenericTaskResponse:
        await self.s.steer_generic_task(message.task_id, "pause")
        return v1.PauseGenericTaskResponse()

    async def unpause_generic_task(
        self, message: v1.UnpauseGenericTaskRequest
    ) -> v1.UnpauseGenericTaskResponse:
        await self.s.steer_generic_task(message.task_id, "unpause")
        return v1.UnpauseGenericTaskResponse()

    # -- access tokens, groups and roles (auth/access.py) -------------------------------

    async def post_access_token(
        self, message: v1.PostAccessTokenRequest
    ) -> v1.PostAccessTokenResponse:
        return await self.access.post_access_token(_user(), message)

    async def get_access_tokens(
        self, message: v1.GetAccessTokensRequest
    ) -> v1.GetAccessTokensResponse:
        return await self.access.get_access_tokens(_user(), message)

    async def patch_access_token(
        self, message: v1.PatchAccessTokenRequest
    ) -> v1.PatchAccessTokenResponse:
        return await self.access.patch_access_token(_user(), message)

    async def get_group(self, message: v1.GetGroupRequest) -> v1.GetGroupResponse:
        return await self.access.get_group(_user(), message)

    async def get_groups(self, message: v1.GetGroupsRequest) -> v1.GetGroupsResponse:
        return await self.access.get_groups(_user(), message)

    async def create_group(self, message: v1.CreateGroupRequest) -> v1.CreateGroupResponse:
        return await self.access.create_group(_user(), message)

    async def update_group(self, message: v1.UpdateGroupRequest) -> v1.UpdateGroupResponse:
        return await self.access.update_group(_user(), message)

    async def delete_group(self, message: v1.DeleteGroupRequest) -> v1.DeleteGroupResponse:
        return await self.access.delete_group(_user(), message)

    async def assign_multiple_groups(
        self, message: v1.AssignMultipleGroupsRequest
    ) -> v1.AssignMultipleGroupsResponse:
        return await self.access.assign_multiple_groups(_user(), message)

    async def get_permissions_summary(
        self, message: v1.GetPermissionsSummaryRequest
    ) -> v1.GetPermissionsSummaryResponse:
        return await self.access.get_permissions_summary(_user(), message)

    async def get_roles_by_id(self, message: v1.GetRolesByIdRequest) -> v1.GetRolesByIdResponse:
        return await self.access.get_roles_by_id(_user(), message)

    async def get_roles_assigned_to_user(
        self, message: v1.GetRolesAssignedToUserRequest
    ) -> v1.GetRolesAssignedToUserResponse:
        return await self.access.get_roles_assigned_to_user(_user(), message)

    async def get_roles_assigned_to_group(
        self, message: v1.GetRolesAssignedToGroupRequest
    ) -> v1.GetRolesAssignedToGroupResponse:
        return await self.access.get_roles_assigned_to_group(_user(), message)

    async def get_groups_and_users_assigned_to_workspace(
        self, message: v1.GetGroupsAndUsersAssignedToWorkspaceRequest
    ) -> v1.GetGroupsAndUsersAssignedToWorkspaceResponse:
        return await self.access.get_groups_and_users_assigned_to_workspace(_user(), message)

    async def search_roles_assignable_to_scope(
        self, message: v1.SearchRolesAssignableToScopeRequest
    ) -> v1.SearchRolesAssignableToScopeResponse:
        return await self.access.search_roles_assignable_to_scope(_user(), message)

    async def list_roles(self, message: v1.ListRolesRequest) -> v1.ListRolesResponse:
        return await self.access.list_roles(_user(), message)

    async def assign_roles(self, message: v1.AssignRolesRequest) -> v1.AssignRolesResponse:
        return await self.access.assign_roles(_user(), message)

    async def remove_assignments(
        self, message: v1.RemoveAssignmentsRequest
    ) -> v1.RemoveAssignmentsResponse:
        return await self.access.remove_assignments(_user(), message)
