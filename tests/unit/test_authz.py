"""The authorization table: every RPC has a rule, and each kind of rule lets in exactly the
callers it names. Ownership is looked up in a real store with a few experiments in it; the
last tests put the table behind ``guard.Guarded`` on an in-memory gRPC channel."""

from __future__ import annotations

import json
import logging
import pathlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpclib.const
import grpclib.testing
import pytest
from grpclib.exceptions import GRPCError

from determined.api.gen import v1
from determined.common import errors, structs, wire
from pydet.master import guard
from pydet.master.auth import authenticator as auth
from pydet.master.auth import passwords
from pydet.master.auth import rules as authz
from pydet.master.auth.callers import AgentCaller, Caller, TaskCaller, UserCaller
from pydet.master.auth.throttle import LoginThrottle
from pydet.master.store.db import Database


def service_mapping() -> dict[str, grpclib.const.Handler]:
    """Every RPC of the generated service descriptors, with its request type."""
    determined = v1.DeterminedBase.__new__(v1.DeterminedBase)
    agents = v1.AgentsBase.__new__(v1.AgentsBase)
    return {**determined.__mapping__(), **agents.__mapping__()}


ALICE = UserCaller(id=2, username="alice", session="s-alice")
BOB = UserCaller(id=3, username="bob", session="s-bob")
# An admin: ClusterAdmin, assigned in the store.
ROOT = UserCaller(id=1, username="admin", session="s-admin")
# Trial 11 of alice's experiment 1, running as allocation 1.11.0.
TASK = TaskCaller(
    allocation_id="1.11.0", task_id="1.11", trial_id=11, experiment_id=1, start_checkpoint=""
)
AGENT = AgentCaller()

EXPERIMENT_ACTIONS = [
    "ActivateExperiment",
    "PauseExperiment",
    "CancelExperiment",
    "KillExperiment",
    "ArchiveExperiment",
    "UnarchiveExperiment",
    "DeleteExperiment",
    "SetExperimentResources",
]
TRIAL_REPORTS = [
    "ReportTrialMetrics",
    "ReportTrialProgress",
    "ReportTrialEarlyExit",
    "GetCurrentSearcherOperation",
    "CompleteSearcherOperation",
]
ALLOCATION_CALLS = [
    "AllocationAllGather",
    "AllocationPreemptionSignal",
    "AckAllocationPreemptionSignal",
    "MarkAllocationResourcesDaemon",
    "PostAllocationProxyAddress",
]
# What a task may call at all (each only about its own allocation, trial and experiment).
TASK_RPCS = {
    "GetMaster",
    *TRIAL_REPORTS,
    *ALLOCATION_CALLS,
    "GetExperimentContext",
    "GetBestValidation",
    "ReportCheckpoint",
    "GetCheckpoint",
    "GetCheckpoints",
    "DeleteCheckpoints",
    "CheckpointsRemoveFiles",
    "ReportTrialSourceInfo",
    "PostWebhookEventData",
    "PostRunMetadata",
    "GetRunMetadata",
}


def storage(exp_id: int) -> dict[str, Any]:
    """Each experiment's checkpoint_storage, as its config has it."""
    return {"type": "shared_fs", "host_path": f"/checkpoints/{exp_id}", "storage_path": None}


@pytest.fixture
async def lookup(tmp_path: pathlib.Path) -> AsyncIterator[authz.Lookup]:
    """Users admin (ClusterAdmin), alice and bob; experiment 1 (alice: trials 11, 12) and 2
    (bob: trial 21), a checkpoint each."""
    db = Database(tmp_path / "pydet.db")
    await db.open()
    for user in (ROOT, ALICE, BOB):
        await db.execute(
            "INSERT INTO users (id, username, password_hash, admin, active, modified_at)"
            " VALUES (?, ?, 'not-a-hash', ?, 1, 0)",
            (user.id, user.username, int(user is ROOT)),
        )
    await db.execute("INSERT INTO role_assignments (role_id, user_id) VALUES (1, 1)")
    for exp_id, owner in ((1, "alice"), (2, "bob")):
        await db.execute(
            "INSERT INTO experiments (id, state, config, original_config, username, start_time,"
            " job_id) VALUES (?, 'ACTIVE', ?, '', ?, 0, ?)",
            (exp_id, json.dumps({"checkpoint_storage": storage(exp_id)}), owner, f"job-{exp_id}"),
        )
    for trial_id, exp_id in ((11, 1), (12, 1), (21, 2)):
        await db.execute(
            "INSERT INTO trials (id, experiment_id, request_id, state, hparams, seed, start_time)"
            " VALUES (?, ?, 'r', 'ACTIVE', '{}', 0, 0)",
            (trial_id, exp_id),
        )
        await db.execute(
            "INSERT INTO checkpoints (uuid, trial_id, experiment_id, steps_completed, metadata,"
            " resources, size, state, report_time, storage)"
            " VALUES (?, ?, ?, 1, '{}', '{}', 0, 'COMPLETED', 0, '{}')",
            (f"ck-{trial_id}", trial_id, exp_id),
        )
    try:
        yield authz.Lookup(db)
    finally:
        await db.close()


async def check(rpc: str, caller: Caller, message: Any, lookup: authz.Lookup) -> None:
    await authz.authorize(f"/v1.Determined/{rpc}", caller, message, lookup)


async def refused(rpc: str, caller: Caller, message: Any, lookup: authz.Lookup) -> str:
    with pytest.raises(errors.PermissionDenied) as e:
        await check(rpc, caller, message, lookup)
    return e.value.message


# -- the table covers the service ---------------------------------------------------------------


def test_every_rpc_in_the_service_descriptors_has_a_rule() -> None:
    paths = list(service_mapping())
    assert len(paths) > 40
    assert authz.unknown_rpcs(paths) == []
    # ...and the table names no RPC the service does not have.
    assert set(authz.RULES) == set(paths)


def test_login_is_the_only_rpc_open_without_a_token() -> None:
    assert authz.OPEN == {"/v1.Determined/Login"}


async def test_an_rpc_without_a_rule_is_refused_even_to_an_admin(lookup: authz.Lookup) -> None:
    with pytest.raises(errors.PermissionDenied, match="no authorization rule"):
        await authz.authorize("/v1.Determined/DropAllTables", ROOT, v1.GetMasterRequest(), lookup)


# -- owner, other user, admin ----------------------------------------------------------------------


@pytest.mark.parametrize("rpc", EXPERIMENT_ACTIONS)
async def test_only_the_owner_or_an_admin_may_steer_an_experiment(
    rpc: str, lookup: authz.Lookup
) -> None:
    message = v1.ExperimentActionRequest(experiment_id=1)
    await check(rpc, ALICE, message, lookup)
    await check(rpc, ROOT, message, lookup)
    text = await refused(rpc, BOB, message, lookup)
    needed = "DELETE_EXPERIMENT" if rpc == "DeleteExperiment" else "UPDATE_EXPERIMENT"
    assert f"only the owner of experiment 1 (alice) or a user with PERMISSION_TYPE_{needed}" in text
    await refused(rpc, TASK, message, lookup)
    await refused(rpc, AGENT, message, lookup)
    with pytest.raises(errors.NotFound, match="experiment 99 not found"):
        await check(rpc, ROOT, v1.ExperimentActionRequest(experiment_id=99), lookup)


async def test_only_the_owner_or_an_admin_may_continue_an_experiment(
    lookup: authz.Lookup,
) -> None:
    # Determined's ContinueExperimentRequest names the experiment ``id``.
    message = v1.ContinueExperimentRequest(id=1, override_config="searcher: {max_trials: 9}")
    await check("ContinueExperiment", ALICE, message, lookup)
    await check("ContinueExperiment", ROOT, message, lookup)
    assert "(alice)" in await refused("ContinueExperiment", BOB, message, lookup)
    await refused("ContinueExperiment", TASK, message, lookup)
    with pytest.raises(errors.NotFound, match="experiment 99 not found"):
        await check("ContinueExperiment", ROOT, v1.ContinueExperimentRequest(id=99), lookup)


async def test_only_the_owner_or_an_admin_may_kill_a_trial(lookup: authz.Lookup) -> None:
    await check("KillTrial", ALICE, v1.KillTrialRequest(trial_id=11), lookup)
    await check("KillTrial", ROOT, v1.KillTrialRequest(trial_id=21), lookup)
    assert "(alice)" in await refused("KillTrial", BOB, v1.KillTrialRequest(trial_id=11), lookup)
    await refused("KillTrial", TASK, v1.KillTrialRequest(trial_id=11), lookup)


async def test_only_the_owner_or_an_admin_may_move_a_job(lookup: authz.Lookup) -> None:
    def updates(job: str, **kwargs: Any) -> v1.UpdateJobQueueRequest:
        return v1.UpdateJobQueueRequest(updates=[v1.JobUpdate(job_id=job, **kwargs)])

    await check("UpdateJobQueue", ALICE, updates("job-1", priority=1), lookup)
    # Putting one's own job ahead of another user's is a change to one's own job.
    await check("UpdateJobQueue", ALICE, updates("job-1", ahead_of="job-2"), lookup)
    await check("UpdateJobQueue", ROOT, updates("job-2", priority=1), lookup)
    assert "(bob)" in await refused("UpdateJobQueue", ALICE, updates("job-2", priority=1), lookup)
    # All or nothing: one foreign job in a batch refuses the batch.
    batch = v1.UpdateJobQueueRequest(
        updates=[v1.JobUpdate(job_id="job-1", priority=1), v1.JobUpdate(job_id="job-2", weight=2)]
    )
    await refused("UpdateJobQueue", ALICE, batch, lookup)
    await refused("UpdateJobQueue", TASK, updates("job-1", priority=1), lookup)
    with pytest.raises(errors.NotFound, match="job nope"):
        await check("UpdateJobQueue", ALICE, updates("nope", priority=1), lookup)
    # The anchor of a move needs no rights (the queue itself refuses an unknown one).
    await check("UpdateJobQueue", ALICE, updates("job-1", behind_of="job-2"), lookup)
    # A notebook's job (its id is the task's): its owner or an admin, as its set priority.
    await _task(lookup, "nb-1", "NOTEBOOK")
    await check("UpdateJobQueue", ALICE, updates("nb-1", priority=3), lookup)
    await check("UpdateJobQueue", ROOT, updates("nb-1", priority=3), lookup)
    assert "owner of task nb-1" in await refused("UpdateJobQueue", BOB, updates("nb-1"), lookup)


async def test_owners_are_cached_and_stay_right(lookup: authz.Lookup) -> None:
    for _ in range(3):
        assert await lookup.job_experiment("job-2") == 2
        assert await lookup.experiment_owner(2) == "bob"
    with pytest.raises(errors.NotFound):
        await lookup.experiment_owner(999)


async def test_anyone_signed_in_may_create_but_only_the_owner_or_an_admin_may_fork(
    lookup: authz.Lookup,
) -> None:
    await check("CreateExperiment", BOB, v1.CreateExperimentRequest(config="x"), lookup)
    await check("CreateExperiment", ALICE, v1.CreateExperimentRequest(parent_id=1), lookup)
    await check("CreateExperiment", ROOT, v1.CreateExperimentRequest(parent_id=1), lookup)
    text = await refused("CreateExperiment", BOB, v1.CreateExperimentRequest(parent_id=1), lookup)
    assert "may fork it" in text
    await refused("CreateExperiment", TASK, v1.CreateExperimentRequest(config="x"), lookup)
    await refused("CreateExperiment", AGENT, v1.CreateExperimentRequest(config="x"), lookup)


async def test_only_the_owner_or_an_admin_may_delete_checkpoints(lookup: authz.Lookup) -> None:
    await check("DeleteCheckpoints", ALICE, v1.DeleteCheckpointsRequest(uuids=["ck-11"]), lookup)
    await check("DeleteCheckpoints", ROOT, v1.DeleteCheckpointsRequest(uuids=["ck-11"]), lookup)
    mixed = v1.DeleteCheckpointsRequest(uuids=["ck-21", "ck-11"])
    await refused("DeleteCheckpoints", BOB, mixed, lookup)
    # The agent token is refused before any lookup says which checkpoints exist.
    await refused("DeleteCheckpoints", AGENT, v1.DeleteCheckpointsRequest(uuids=["nope"]), lookup)
    await refused("DeleteCheckpoints", AGENT, v1.DeleteCheckpointsRequest(), lookup)


async def test_only_the_owner_or_an_admin_may_change_checkpoint_metadata(
    lookup: authz.Lookup,
) -> None:
    def post(uuid: str) -> v1.PostCheckpointMetadataRequest:
        return v1.PostCheckpointMetadataRequest(
            checkpoint=v1.Checkpoint(uuid=uuid, metadata=structs.struct({}))
        )

    await check("PostCheckpointMetadata", ALICE, post("ck-11"), lookup)
    await check("PostCheckpointMetadata", ROOT, post("ck-21"), lookup)
    text = await refused("PostCheckpointMetadata", BOB, post("ck-11"), lookup)
    assert "change the checkpoint metadata of" in text
    await refused("PostCheckpointMetadata", TASK, post("ck-11"), lookup)
    await refused("PostCheckpointMetadata", AGENT, post("ck-11"), lookup)


async def test_only_admins_manage_webhooks_and_a_task_alerts_for_its_own_trial(
    lookup: authz.Lookup,
) -> None:
    for rpc, message in (
        ("PostWebhook", v1.PostWebhookRequest()),
        ("GetWebhooks", v1.GetWebhooksRequest()),
        ("DeleteWebhook", v1.DeleteWebhookRequest(id=1)),
    ):
        await check(rpc, ROOT, message, lookup)
        assert "only a user with PERMISSION_TYPE_" in await refused(rpc, ALICE, message, lookup)
        await refused(rpc, TASK, message, lookup)
    await check("PostWebhookEventData", TASK, v1.PostWebhookEventDataRequest(trial_id=11), lookup)
    text = await refused(
        "PostWebhookEventData", TASK, v1.PostWebhookEventDataRequest(trial_id=21), lookup
    )
    assert "this task is trial 11, not trial 21" in text
    await check("PostWebhookEventData", ALICE, v1.PostWebhookEventDataRequest(trial_id=11), lookup)
    await refused("PostWebhookEventData", BOB, v1.PostWebhookEventDataRequest(trial_id=11), lookup)


# -- admins -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rpc", "message"),
    [
        ("PostUser", v1.PostUserRequest(username="eve", password="long-enough")),
        ("PatchUser", v1.PatchUserRequest(username="bob", active=False)),
        ("EnableAgent", v1.AgentActionRequest(agent_id="agent-0")),
        ("DisableAgent", v1.AgentActionRequest(agent_id="agent-0")),
    ],
)
async def test_users_and_agents_are_managed_by_admins_only(
    rpc: str, message: Any, lookup: authz.Lookup
) -> None:
    await check(rpc, ROOT, message, lookup)
    assert "only a user with PERMISSION_TYPE_" in await refused(rpc, ALICE, message, lookup)
    await refused(rpc, TASK, message, lookup)
    await refused(rpc, AGENT, message, lookup)


async def test_a_user_may_change_their_own_password_and_an_admin_anyones(
    lookup: authz.Lookup,
) -> None:
    own = v1.SetUserPasswordRequest(username="alice", password="long-enough")
    other = v1.SetUserPasswordRequest(username="bob", password="long-enough")
    await check("SetUserPassword", ALICE, own, lookup)
    await check("SetUserPassword", ROOT, other, lookup)
    assert "another user's password" in await refused("SetUserPassword", ALICE, other, lookup)
    await refused("SetUserPassword", TASK, own, lookup)


async def test_a_user_may_rename_themselves_and_set_their_display_name_only(
    lookup: authz.Lookup,
) -> None:
    def patch(user_id: int, **change: Any) -> v1.PatchUserRequest:
        return v1.PatchUserRequest(user_id=user_id, user=v1.PatchUser(**change))

    await check("PatchUser", ALICE, patch(2, display_name="Alice", username="alice2"), lookup)
    for change in (
        {"admin": True},
        {"active": False},
        {"remote": True},
        {"agent_user_group": v1.AgentUserGroup(agent_uid=1)},
    ):
        assert "only a user with PERMISSION_TYPE_ADMINISTRATE_USER" in await refused(
            "PatchUser", ALICE, patch(2, **change), lookup
        )
        await check("PatchUser", ROOT, patch(2, **change), lookup)
    other = patch(3, display_name="Bob")
    assert "another user" in await refused("PatchUser", ALICE, other, lookup)
    await check("PatchUser", ROOT, other, lookup)
    # pydet's older form names the user and is for admins.
    await refused("PatchUser", ALICE, v1.PatchUserRequest(username="alice", active=True), lookup)
    await refused("PatchUser", TASK, patch(2, display_name="x"), lookup)
    for rpc, message in (
        ("GetUser", v1.GetUserRequest(user_id=3)),
        ("GetUserByUsername", v1.GetUserByUsernameRequest(username="bob")),
    ):
        await check(rpc, ALICE, message, lookup)
        await refused(rpc, TASK, message, lookup)


async def test_only_the_owner_or_an_admin_edits_an_experiments_name_labels_and_files(
    lookup: authz.Lookup,
) -> None:
    for rpc, message in (
        ("PatchExperiment", v1.PatchExperimentRequest(v1.PatchExperiment(id=1, name="x"))),
        ("PutExperimentLabel", v1.PutExperimentLabelRequest(experiment_id=1, label="x")),
        ("DeleteExperimentLabel", v1.DeleteExperimentLabelRequest(experiment_id=1, label="x")),
        ("DeleteTensorboardFiles", v1.DeleteTensorboardFilesRequest(experiment_id=1)),
        ("CheckpointsRemoveFiles", v1.CheckpointsRemoveFilesRequest(checkpoint_uuids=["ck-11"])),
    ):
        await check(rpc, ALICE, message, lookup)
        await check(rpc, ROOT, message, lookup)
        assert "only the owner of experiment 1 (alice)" in await refused(rpc, BOB, message, lookup)
    with pytest.raises(errors.NotFound, match="experiment 9"):
        await check(
            "PatchExperiment", ROOT, v1.PatchExperimentRequest(v1.PatchExperiment(id=9)), lookup
        )


async def test_a_trials_task_or_owner_says_which_checkpoint_it_used_and_any_user_reads_it(
    lookup: authz.Lookup,
) -> None:
    def used(trial_id: int) -> v1.ReportTrialSourceInfoRequest:
        return v1.ReportTrialSourceInfoRequest(
            v1.TrialSourceInfo(trial_id=trial_id, checkpoint_uuid="ck-21")
        )

    await check("ReportTrialSourceInfo", TASK, used(11), lookup)
    await check("ReportTrialSourceInfo", ALICE, used(11), lookup)
    await refused("ReportTrialSourceInfo", TASK, used(12), lookup)
    await refused("ReportTrialSourceInfo", BOB, used(11), lookup)
    read = v1.GetTrialMetricsByCheckpointRequest(checkpoint_uuid="ck-11")
    await check("GetTrialMetricsByCheckpoint", BOB, read, lookup)
    await check("GetMetrics", BOB, v1.GetMetricsRequest(trial_ids=[11], group="training"), lookup)
    await refused("GetMetrics", TASK, v1.GetMetricsRequest(trial_ids=[11]), lookup)


# -- agents -----------------------------------------------------------------------------------


async def test_the_agents_stream_is_for_the_agent_token_only(lookup: authz.Lookup) -> None:
    rpc = "/v1.Agents/Connect"
    await authz.authorize(rpc, AGENT, v1.AgentMessage(), lookup)
    for caller in (ROOT, ALICE, TASK):
        with pytest.raises(errors.PermissionDenied, match="agent token"):
            await authz.authorize(rpc, caller, v1.AgentMessage(), lookup)


# -- tasks --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rpc", TRIAL_REPORTS)
async def test_a_task_reports_for_its_own_trial_only(rpc: str, lookup: authz.Lookup) -> None:
    request_type = service_mapping()[f"/v1.Determined/{rpc}"].request_type
    await check(rpc, TASK, request_type(trial_id=11), lookup)
    # Another trial of the same experiment, or of another one: both refused, by number.
    text = await refused(rpc, TASK, request_type(trial_id=12), lookup)
    assert "this task is trial 11, not trial 12" in text
    await refused(rpc, TASK, request_type(trial_id=21), lookup)
    # From outside a task: the experiment's owner only.
    await check(rpc, ALICE, request_type(trial_id=11), lookup)
    await refused(rpc, BOB, request_type(trial_id=11), lookup)
    await refused(rpc, AGENT, request_type(trial_id=11), lookup)


@pytest.mark.parametrize("rpc", ALLOCATION_CALLS)
async def test_allocation_calls_are_for_the_allocations_own_task(
    rpc: str, lookup: authz.Lookup
) -> None:
    request_type = service_mapping()[f"/v1.Determined/{rpc}"].request_type
    await check(rpc, TASK, request_type(allocation_id="1.11.0"), lookup)
    assert "allocation 1.11.0" in await refused(
        rpc, TASK, request_type(allocation_id="1.12.0"), lookup
    )
    for caller in (ROOT, ALICE, AGENT):
        await refused(rpc, caller, request_type(allocation_id="1.11.0"), lookup)


async def _task(lookup: authz.Lookup, task_id: str, task_type: str) -> None:
    await lookup._db.execute(  # the row a launch writes (master/tasks/generic.py)
        "INSERT INTO generic_tasks (id, task_type, username, description, resource_pool,"
        " state, start_time) VALUES (?, ?, 'alice', 'd', 'default', 'RUNNING', 0)",
        (task_id, task_type),
    )


async def test_only_its_owner_or_an_admin_kills_a_tensorboard(lookup: authz.Lookup) -> None:
    await _task(lookup, "tb-1", "TENSORBOARD")
    kill = v1.KillTensorboardRequest(tensorboard_id="tb-1")
    await check("KillTensorboard", ALICE, kill, lookup)
    await check("KillTensorboard", ROOT, kill, lookup)
    # Refused without saying whose it is.
    message = await refused("KillTensorboard", BOB, kill, lookup)
    assert "owner of tensorboard tb-1 or a user with" in message and "alice" not in message
    await refused("KillTensorboard", TASK, kill, lookup)
    priority = v1.SetTensorboardPriorityRequest(tensorboard_id="tb-1", priority=5)
    await check("SetTensorboardPriority", ALICE, priority, lookup)
    await check("SetTensorboardPriority", ROOT, priority, lookup)
    assert "may change the priority of it" in await refused(
        "SetTensorboardPriority", BOB, priority, lookup
    )
    with pytest.raises(errors.NotFound):
        await check("KillTensorboard", ALICE, v1.KillTensorboardRequest(tensorboard_id="x"), lookup)
    for rpc, message in (
        ("LaunchTensorboard", v1.LaunchTensorboardRequest(experiment_ids=[1])),
        ("GetTensorboards", v1.GetTensorboardsRequest()),
    ):
        await check(rpc, BOB, message, lookup)
        await refused(rpc, TASK, message, lookup)


async def test_only_its_owner_or_an_admin_kills_a_command_or_changes_its_priority(
    lookup: authz.Lookup,
) -> None:
    await _task(lookup, "cmd-1", "COMMAND")
    await _task(lookup, "tb-1", "TENSORBOARD")
    for rpc, message in (
        ("KillCommand", v1.KillCommandRequest(command_id="cmd-1")),
        ("SetCommandPriority", v1.SetCommandPriorityRequest(command_id="cmd-1", priority=5)),
    ):
        await check(rpc, ALICE, message, lookup)
        await check(rpc, ROOT, message, lookup)
        assert "alice" not in await refused(rpc, BOB, message, lookup)
        await refused(rpc, TASK, message, lookup)
    # A TensorBoard is not a command, whoever asks.
    with pytest.raises(errors.NotFound):
        await check("KillCommand", ROOT, v1.KillCommandRequest(command_id="tb-1"), lookup)
    for rpc, message in (
        ("LaunchCommand", v1.LaunchCommandRequest(config=structs.struct({"entrypoint": "true"}))),
        ("GetCommands", v1.GetCommandsRequest()),
        ("GetCommand", v1.GetCommandRequest(command_id="cmd-1")),
    ):
        await check(rpc, BOB, message, lookup)
        await refused(rpc, TASK, message, lookup)


async def test_a_generic_task_is_steered_by_its_owner_and_has_children_only_of_theirs(
    lookup: authz.Lookup,
) -> None:
    await _task(lookup, "gen-1", "GENERIC")
    await _task(lookup, "cmd-2", "COMMAND")
    for rpc, message in (
        ("PauseGenericTask", v1.PauseGenericTaskRequest(task_id="gen-1")),
        ("UnpauseGenericTask", v1.UnpauseGenericTaskRequest(task_id="gen-1")),
        ("KillGenericTask", v1.KillGenericTaskRequest(task_id="gen-1", kill_from_root=True)),
        ("CreateGenericTask", v1.CreateGenericTaskRequest(config="{}", parent_id="gen-1")),
    ):
        await check(rpc, ALICE, message, lookup)
        await check(rpc, ROOT, message, lookup)
        assert "alice" not in await refused(rpc, BOB, message, lookup)
        await refused(rpc, TASK, message, lookup)
    # A command is not a generic task, whoever asks.
    with pytest.raises(errors.NotFound):
        await check("PauseGenericTask", ROOT, v1.PauseGenericTaskRequest(task_id="cmd-2"), lookup)
    for rpc, message in (
        ("CreateGenericTask", v1.CreateGenericTaskRequest(config="entrypoint: true")),
        ("GetGenericTaskConfig", v1.GetGenericTaskConfigRequest(task_id="gen-1")),
    ):
        await check(rpc, BOB, message, lookup)
        await refused(rpc, TASK, message, lookup)


async def test_a_notebook_is_steered_by_its_owner_and_reports_idleness_itself(
    lookup: authz.Lookup,
) -> None:
    await _task(lookup, "nb-1", "NOTEBOOK")
    await _task(lookup, "cmd-1", "COMMAND")
    own = TaskCaller(
        allocation_id="nb-1.5", task_id="nb-1", trial_id=0, experiment_id=0, start_checkpoint=""
    )
    for rpc, message in (
        ("KillNotebook", v1.KillNotebookRequest(notebook_id="nb-1")),
        ("SetNotebookPriority", v1.SetNotebookPriorityRequest(notebook_id="nb-1", priority=3)),
        ("IdleNotebook", v1.IdleNotebookRequest(notebook_id="nb-1", idle=False)),
    ):
        await check(rpc, ALICE, message, lookup)
        await check(rpc, ROOT, message, lookup)
        assert "alice" not in await refused(rpc, BOB, message, lookup)
    await check("IdleNotebook", own, v1.IdleNotebookRequest(notebook_id="nb-1"), lookup)
    # Its token speaks for itself only; a command is not a notebook.
    await refused("IdleNotebook", TASK, v1.IdleNotebookRequest(notebook_id="nb-1"), lookup)
    await refused("KillNotebook", own, v1.KillNotebookRequest(notebook_id="nb-1"), lookup)
    with pytest.raises(errors.NotFound):
        await check("KillNotebook", ROOT, v1.KillNotebookRequest(notebook_id="cmd-1"), lookup)


async def test_only_its_owner_or_an_admin_gets_a_shell_and_its_key(lookup: authz.Lookup) -> None:
    await _task(lookup, "sh-1", "SHELL")
    for rpc, message in (
        ("GetShell", v1.GetShellRequest(shell_id="sh-1")),
        ("KillShell", v1.KillShellRequest(shell_id="sh-1")),
        ("SetShellPriority", v1.SetShellPriorityRequest(shell_id="sh-1", priority=3)),
    ):
        await check(rpc, ALICE, message, lookup)
        await check(rpc, ROOT, message, lookup)
        assert "alice" not in await refused(rpc, BOB, message, lookup)
        await refused(rpc, TASK, message, lookup)
    # Any user lists them (without keys) and starts their own.
    await check("GetShells", BOB, v1.GetShellsRequest(), lookup)
    await check("LaunchShell", BOB, v1.LaunchShellRequest(), lookup)


async def test_a_tasks_context_is_for_the_task_itself_or_its_owner(lookup: authz.Lookup) -> None:
    await _task(lookup, "cmd-1", "COMMAND")
    own = TaskCaller(
        allocation_id="cmd-1.5", task_id="cmd-1", trial_id=0, experiment_id=0, start_checkpoint=""
    )
    request = v1.GetTaskContextRequest(task_id="cmd-1")
    await check("GetTaskContext", own, request, lookup)
    await check("GetTaskContext", ALICE, request, lookup)
    await check("GetTaskContext", ROOT, request, lookup)
    await refused("GetTaskContext", BOB, request, lookup)
    await refused("GetTaskContext", TASK, request, lookup)
    await refused("GetTaskContext", AGENT, request, lookup)


def _checkpoint(
    *,
    uuid: str = "new-uuid",
    trial_id: int = 11,
    experiment_id: int = 1,
    allocation_id: str = "1.11.0",
    storage: dict[str, Any] | None = None,
) -> v1.ReportCheckpointRequest:
    """A report in Determined's shape: its trial and experiment are its training metadata."""
    training = v1.CheckpointTrainingMetadata(trial_id=trial_id, experiment_id=experiment_id)
    checkpoint = v1.Checkpoint(
        uuid=uuid,
        training=training,
        allocation_id=allocation_id,
        storage=None if storage is None else structs.struct(storage),
    )
    return v1.ReportCheckpointRequest(checkpoint=checkpoint)


async def test_a_task_reports_checkpoints_of_its_own_trial_only(lookup: authz.Lookup) -> None:
    await check("ReportCheckpoint", TASK, _checkpoint(), lookup)
    await check("ReportCheckpoint", TASK, _checkpoint(uuid="ck-11"), lookup)  # again: fine
    await refused("ReportCheckpoint", TASK, _checkpoint(trial_id=12), lookup)
    await refused("ReportCheckpoint", TASK, _checkpoint(trial_id=21, experiment_id=2), lookup)
    await refused("ReportCheckpoint", TASK, _checkpoint(allocation_id="1.12.0"), lookup)
    await refused("ReportCheckpoint", TASK, _checkpoint(experiment_id=2), lookup)
    for caller in (ROOT, ALICE, AGENT):
        await refused("ReportCheckpoint", caller, _checkpoint(), lookup)


async def test_a_task_cannot_take_over_another_trials_checkpoint_by_its_uuid(
    lookup: authz.Lookup,
) -> None:
    # The store replaces a record of the same uuid: that would move ck-21 into trial 11.
    for uuid in ("ck-12", "ck-21"):
        text = await refused("ReportCheckpoint", TASK, _checkpoint(uuid=uuid), lookup)
        assert "belongs to another trial" in text


async def test_a_task_records_checkpoints_only_in_its_experiments_storage(
    lookup: authz.Lookup,
) -> None:
    # The master deletes a checkpoint's files where the record says they are.
    await check("ReportCheckpoint", TASK, _checkpoint(storage=storage(1)), lookup)
    for elsewhere in (storage(2), {"type": "shared_fs", "host_path": "/"}):
        text = await refused("ReportCheckpoint", TASK, _checkpoint(storage=elsewhere), lookup)
        assert "checkpoint_storage" in text


async def test_the_owner_of_an_unmanaged_run_reports_its_checkpoints_and_ends_its_trials(
    lookup: authz.Lookup, tmp_path: pathlib.Path
) -> None:
    db = Database(tmp_path / "pydet.db")  # the fixture's store, opened again
    await db.open()
    try:
        await db.execute(
            "INSERT INTO experiments (id, state, config, original_config, username, start_time,"
            " job_id, unmanaged) VALUES (3, 'ACTIVE', ?, '', 'alice', 0, 'job-3', 1)",
            (json.dumps({"checkpoint_storage": storage(3)}),),
        )
        await db.execute(
            "INSERT INTO trials (id, experiment_id, request_id, state, hparams, seed, start_time)"
            " VALUES (31, 3, 'r', 'ACTIVE', '{}', 0, 0)"
        )
    finally:
        await db.close()
    mine = _checkpoint(trial_id=31, experiment_id=3, allocation_id="3.31")
    await check("ReportCheckpoint", ALICE, mine, lookup)
    await check("ReportCheckpoint", ROOT, mine, lookup)
    assert "(alice)" in await refused("ReportCheckpoint", BOB, mine, lookup)
    # Her managed trial's checkpoints are its task's to report, and storage stays checked.
    await refused("ReportCheckpoint", ALICE, _checkpoint(), lookup)
    elsewhere = _checkpoint(trial_id=31, experiment_id=3, storage=storage(1))
    assert "checkpoint_storage" in await refused("ReportCheckpoint", ALICE, elsewhere, lookup)
    await refused("ReportCheckpoint", ALICE, _checkpoint(trial_id=31, experiment_id=1), lookup)
    for rpc, request in (
        ("CreateTrial", v1.CreateTrialRequest(experiment_id=3)),
        ("StartTrial", v1.StartTrialRequest(trial_id=31)),
        ("PatchTrial", v1.PatchTrialRequest(trial_id=31, state=v1.State.COMPLETED)),
    ):
        await check(rpc, ALICE, request, lookup)
        assert "(alice)" in await refused(rpc, BOB, request, lookup)
        await refused(rpc, TASK, request, lookup)


async def test_a_trials_metadata_is_set_by_its_task_or_owner_and_read_by_any_user(
    lookup: authz.Lookup,
) -> None:
    post = v1.PostRunMetadataRequest(run_id=11, metadata="{}")
    get = v1.GetRunMetadataRequest(run_id=11)
    for caller in (TASK, ALICE, ROOT):
        await check("PostRunMetadata", caller, post, lookup)
    assert "(alice)" in await refused("PostRunMetadata", BOB, post, lookup)
    for caller in (TASK, ALICE, BOB):
        await check("GetRunMetadata", caller, get, lookup)
    other = v1.GetRunMetadataRequest(run_id=21)
    assert "this task is trial 11" in await refused("GetRunMetadata", TASK, other, lookup)
    await refused("PostRunMetadata", TASK, v1.PostRunMetadataRequest(run_id=12), lookup)


async def test_templates_are_changed_only_by_their_owner_or_an_admin(
    lookup: authz.Lookup, tmp_path: pathlib.Path
) -> None:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    try:
        await db.execute(
            "INSERT INTO templates (name, config, username) VALUES ('hers', '{}', 'alice')"
        )
    finally:
        await db.close()
    put = v1.PutTemplateRequest(template=v1.Template(name="hers", config="{}"))
    delete = v1.DeleteTemplateRequest(template_name="hers")
    for rpc, request in (("PutTemplate", put), ("DeleteTemplate", delete)):
        await check(rpc, ALICE, request, lookup)
        await check(rpc, ROOT, request, lookup)
        assert "(alice)" in await refused(rpc, BOB, request, lookup)
        await refused(rpc, TASK, request, lookup)
    new = v1.PutTemplateRequest(template=v1.Template(name="his", config="{}"))
    await check("PutTemplate", BOB, new, lookup)
    await check("GetTemplate", BOB, v1.GetTemplateRequest(template_name="hers"), lookup)


@pytest.mark.parametrize("uuid", ["", ".", "..", "../../home", "a/b", "a\\b", "x\x00y"])
async def test_a_checkpoint_id_must_be_a_plain_name(uuid: str, lookup: authz.Lookup) -> None:
    text = await refused("ReportCheckpoint", TASK, _checkpoint(uuid=uuid), lookup)
    assert "is not a checkpoint id" in text


async def test_a_task_reads_its_own_experiment_only(lookup: authz.Lookup) -> None:
    for rpc, request_type in (
        ("GetExperimentContext", v1.GetExperimentContextRequest),
        ("GetBestValidation", v1.GetBestValidationRequest),
    ):
        await check(rpc, TASK, request_type(experiment_id=1), lookup)
        assert "experiment 1" in await refused(rpc, TASK, request_type(experiment_id=2), lookup)
        await check(rpc, BOB, request_type(experiment_id=1), lookup)  # users may read
        await refused(rpc, AGENT, request_type(experiment_id=1), lookup)


async def test_a_task_reads_checkpoints_of_its_own_experiment_and_its_start(
    lookup: authz.Lookup,
) -> None:
    for uuid in ("ck-11", "ck-12"):
        await check("GetCheckpoint", TASK, v1.GetCheckpointRequest(uuid=uuid), lookup)
    await refused("GetCheckpoint", TASK, v1.GetCheckpointRequest(uuid="ck-21"), lookup)
    warm = TaskCaller(
        allocation_id="1.11.0",
        task_id="1.11",
        trial_id=11,
        experiment_id=1,
        start_checkpoint="ck-21",
    )
    await check("GetCheckpoint", warm, v1.GetCheckpointRequest(uuid="ck-21"), lookup)

    await check("GetCheckpoints", TASK, v1.GetCheckpointsRequest(trial_id=12), lookup)
    await check("GetCheckpoints", TASK, v1.GetCheckpointsRequest(experiment_id=1), lookup)
    await check("GetCheckpoints", TASK, v1.GetCheckpointsRequest(), lookup)
    await refused("GetCheckpoints", TASK, v1.GetCheckpointsRequest(trial_id=21), lookup)
    await refused("GetCheckpoints", TASK, v1.GetCheckpointsRequest(experiment_id=2), lookup)

    own = v1.DeleteCheckpointsRequest(uuids=["ck-11"])
    await check("DeleteCheckpoints", TASK, own, lookup)
    await refused("DeleteCheckpoints", TASK, v1.DeleteCheckpointsRequest(uuids=["ck-21"]), lookup)


def _aimed_at_own_work(request_type: type[Any]) -> Any:
    """A request of this type that names the task's own experiment, trial and allocation
    wherever it has a field for one: the most a task could ask for."""
    message = request_type()
    values: dict[str, Any] = {
        "experiment_id": 1,
        "trial_id": 11,
        "parent_id": 1,
        "allocation_id": "1.11.0",
        "run_id": 11,
        "uuid": "ck-11",
        "uuids": ["ck-11"],
        "checkpoint_uuids": ["ck-11"],
        "trial_source_info": v1.TrialSourceInfo(trial_id=11, checkpoint_uuid="ck-11"),
        "user_id": 1,
        "username": "alice",
        "agent_id": "agent-0",
        "updates": [v1.JobUpdate(job_id="job-1", priority=1)],
        "checkpoint": _checkpoint(uuid="ck-11").checkpoint,
    }
    for name, value in values.items():
        if hasattr(message, name):
            setattr(message, name, value)
    return message


@dataclass(frozen=True)
class Walk:
    rpc: str
    message: Any


def walk() -> list[Walk]:
    return [
        Walk(path, _aimed_at_own_work(handler.request_type))
        for path, handler in sorted(service_mapping().items())
    ]


async def test_a_task_token_can_create_steer_and_list_nothing(lookup: authz.Lookup) -> None:
    allowed = {f"/v1.Determined/{rpc}" for rpc in TASK_RPCS} | authz.OPEN
    checked = 0
    for item in walk():
        if item.rpc in allowed:
            await authz.authorize(item.rpc, TASK, item.message, lookup)
            continue
        with pytest.raises(errors.PermissionDenied):
            await authz.authorize(item.rpc, TASK, item.message, lookup)
        checked += 1
    # CreateExperiment, the experiment actions, GetExperiments, user and agent calls, ...
    assert checked >= 25


async def test_the_agent_token_opens_nothing_but_the_agents_stream(
    lookup: authz.Lookup,
) -> None:
    for item in walk():
        if item.rpc in authz.OPEN or item.rpc == "/v1.Agents/Connect":
            continue
        with pytest.raises(errors.PermissionDenied):
            await authz.authorize(item.rpc, AGENT, item.message, lookup)


# -- running the cluster (issue 34) ---------------------------------------------------------------

ADMIN_ONLY = [
    "GetMasterConfig",
    "PatchMasterConfig",
    "GetClusterMessage",
    "SetClusterMessage",
    "DeleteClusterMessage",
    "EnableSlot",
    "DisableSlot",
    "CleanupLogs",
    "PutGlobalConfigPolicies",
    "DeleteGlobalConfigPolicies",
    "BindRPToWorkspace",
    "UnbindRPFromWorkspace",
    "OverwriteRPWorkspaceBindings",
]
ANY_USER = [
    "ListWorkspacesBoundToRP",
    "ListRPsBoundToWorkspace",
    "MasterLogs",
    "ResourceAllocationRaw",
    "ResourceAllocationAggregated",
    "GetGlobalConfigPolicies",
    "PreviewExperimentGc",
    "PostTemplate",
]


@pytest.mark.parametrize("rpc", ADMIN_ONLY)
async def test_running_the_cluster_is_for_admins(rpc: str, lookup: authz.Lookup) -> None:
    message = service_mapping()[f"/v1.Determined/{rpc}"].request_type()
    await check(rpc, ROOT, message, lookup)
    assert "only a user with PERMISSION_TYPE_" in await refused(rpc, ALICE, message, lookup)
    await refused(rpc, TASK, message, lookup)
    await refused(rpc, AGENT, message, lookup)


@pytest.mark.parametrize("rpc", ANY_USER)
async def test_reading_the_cluster_is_for_any_user(rpc: str, lookup: authz.Lookup) -> None:
    message = service_mapping()[f"/v1.Determined/{rpc}"].request_type()
    await check(rpc, ALICE, message, lookup)
    await check(rpc, ROOT, message, lookup)
    await refused(rpc, TASK, message, lookup)


async def test_what_is_kept_of_an_experiment_is_for_its_owner(lookup: authz.Lookup) -> None:
    for rpc, message in (
        ("SetExperimentGcPolicy", v1.SetExperimentGcPolicyRequest(experiment_id=1)),
        ("PutExperimentRetainLogs", v1.PutExperimentRetainLogsRequest(experiment_id=1)),
        ("PutTrialRetainLogs", v1.PutTrialRetainLogsRequest(trial_id=11)),
    ):
        await check(rpc, ALICE, message, lookup)
        await check(rpc, ROOT, message, lookup)
        assert "(alice)" in await refused(rpc, BOB, message, lookup)
        await refused(rpc, TASK, message, lookup)
    with pytest.raises(errors.NotFound, match="trial 99 not found"):
        await check("PutTrialRetainLogs", ROOT, v1.PutTrialRetainLogsRequest(trial_id=99), lookup)


# -- behind the guard ------------------------------------------------------------------------------

AGENT_TOKEN = "agent-token-for-the-guard-tests"


class NoTasks:
    def task_caller(self, token: str) -> TaskCaller | None:
        return None


class Servicer(v1.DeterminedBase):
    """Records the calls that got through; everything else stays unimplemented."""

    def __init__(self, authn: auth.Authenticator) -> None:
        self.calls: list[str] = []
        self.authn = authn

    async def login(self, message: v1.LoginRequest) -> v1.LoginResponse:
        return await self.authn.login(message.username, message.password, guard.current_peer())

    async def get_master(self, message: v1.GetMasterRequest) -> v1.GetMasterResponse:
        self.calls.append(f"GetMaster by {guard.current_caller()}")
        return v1.GetMasterResponse(version="test")

    async def pause_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        self.calls.append(f"pause {message.experiment_id}")
        return v1.ExperimentActionResponse()


@dataclass
class Guarded:
    channel: Any
    servicer: Servicer
    authn: auth.Authenticator
    admin_password: str


@pytest.fixture
async def guarded(lookup: authz.Lookup, tmp_path: pathlib.Path) -> AsyncIterator[Guarded]:
    db = lookup._db
    authn = auth.Authenticator(
        db,
        tasks=NoTasks(),
        agent_token=AGENT_TOKEN,
        throttle=LoginThrottle(free_failures=99),
        grants=lookup.grants,
    )
    password = "the-admin-password"
    for name, secret in (("admin", password), ("alice", "alice-password"), ("bob", "bob-password")):
        await db.execute(
            "UPDATE users SET password_hash = ? WHERE username = ?",
            (passwords.hash_password(secret), name),
        )
    servicer = Servicer(authn)

    class Hub(v1.AgentsBase):
        pass

    services = [guard.Guarded(servicer, authn, lookup), guard.Guarded(Hub(), authn, lookup)]
    async with grpclib.testing.ChannelFor(services, codec=wire.WireCodec()) as channel:
        yield Guarded(channel, servicer, authn, password)


async def _token(g: Guarded, username: str, password: str) -> str:
    return (await g.authn.login(username, password, "test")).token


async def test_without_a_token_no_handler_runs(guarded: Guarded) -> None:
    for path, handler in service_mapping().items():
        if path in authz.OPEN:
            continue
        for metadata in ({}, {"x-det-token": "wrong"}, {"x-det-token": "x" * 10_000}):
            async with guarded.channel.request(
                path,
                handler.cardinality,
                handler.request_type,
                handler.reply_type,
                metadata=metadata,
            ) as stream:
                await stream.send_message(handler.request_type(), end=True)
                with pytest.raises(GRPCError) as e:
                    await stream.recv_message()
            assert e.value.status == grpclib.const.Status.UNAUTHENTICATED, path
            assert e.value.message and "det" in e.value.message
    assert guarded.servicer.calls == []


async def test_a_refused_call_never_reaches_its_handler(guarded: Guarded) -> None:
    bob = v1.DeterminedStub(
        guarded.channel, metadata={"x-det-token": await _token(guarded, "bob", "bob-password")}
    )
    with pytest.raises(GRPCError) as e:
        await bob.pause_experiment(v1.ExperimentActionRequest(experiment_id=1))
    assert e.value.status == grpclib.const.Status.PERMISSION_DENIED
    assert "only the owner of experiment 1 (alice)" in (e.value.message or "")
    with pytest.raises(GRPCError) as e:
        await bob.pause_experiment(v1.ExperimentActionRequest(experiment_id=404))
    assert e.value.status == grpclib.const.Status.NOT_FOUND
    assert guarded.servicer.calls == []

    alice = v1.DeterminedStub(
        guarded.channel, metadata={"x-det-token": await _token(guarded, "alice", "alice-password")}
    )
    await alice.pause_experiment(v1.ExperimentActionRequest(experiment_id=1))
    info = await alice.get_master(v1.GetMasterRequest())
    assert info.version == "test"
    assert guarded.servicer.calls[0] == "pause 1"
    assert "username='alice'" in guarded.servicer.calls[1]


async def test_login_is_open_and_refuses_a_wrong_password_as_unauthenticated(
    guarded: Guarded,
) -> None:
    stub = v1.DeterminedStub(guarded.channel)
    with pytest.raises(GRPCError) as e:
        await stub.login(v1.LoginRequest(username="admin", password="wrong-password"))
    assert e.value.status == grpclib.const.Status.UNAUTHENTICATED


async def test_a_call_without_a_request_message_is_refused_before_its_handler(
    guarded: Guarded,
) -> None:
    token = await _token(guarded, "alice", "alice-password")
    # A client-streaming call from this side, so that grpclib lets it end without a message.
    async with guarded.channel.request(
        "/v1.Determined/PauseExperiment",
        grpclib.const.Cardinality.STREAM_UNARY,
        v1.ExperimentActionRequest,
        v1.ExperimentActionResponse,
        metadata={"x-det-token": token},
    ) as stream:
        await stream.send_request()
        await stream.end()
        with pytest.raises(GRPCError) as e:
            await stream.recv_message()
    assert e.value.status == grpclib.const.Status.INVALID_ARGUMENT
    assert guarded.servicer.calls == []


async def test_an_agent_without_the_agent_token_is_refused_and_logged(
    guarded: Guarded, caplog: pytest.LogCaptureFixture
) -> None:
    session = await _token(guarded, "admin", guarded.admin_password)
    for token in ("", "wrong-agent-token", session):
        async with guarded.channel.request(
            "/v1.Agents/Connect",
            grpclib.const.Cardinality.STREAM_STREAM,
            v1.AgentMessage,
            v1.MasterMessage,
            metadata={"x-det-token": token} if token else {},
        ) as stream:
            with caplog.at_level(logging.WARNING, logger="pydet.master.guard"):
                await stream.send_message(v1.AgentMessage(), end=True)
                with pytest.raises(GRPCError) as e:
                    await stream.recv_message()
        assert e.value.status == grpclib.const.Status.UNAUTHENTICATED
        assert "agent token" in (e.value.message or "")
    assert caplog.text.count("refused an agent") == 3
    assert session not in caplog.text


# -- workspaces, projects and moves ------------------------------------------------------------


async def _teams(lookup: authz.Lookup) -> None:
    """Alice's workspace 2 with her project 2, and bob's project 3 in it; bob's workspace 3."""
    db = lookup._db
    for ws_id, owner in ((2, ALICE), (3, BOB)):
        await db.execute(
            "INSERT INTO workspaces (id, name, user_id, created_at) VALUES (?, ?, ?, 0)",
            (ws_id, f"ws-{ws_id}", owner.id),
        )
    for project_id, owner in ((2, ALICE), (3, BOB)):
        await db.execute(
            "INSERT INTO projects (id, workspace_id, name, key, user_id, created_at)"
            " VALUES (?, 2, ?, ?, ?, 0)",
            (project_id, f"p-{project_id}", f"K{project_id}", owner.id),
        )


async def test_a_workspace_is_changed_by_its_owner_or_an_admin_and_read_by_all(
    lookup: authz.Lookup,
) -> None:
    await _teams(lookup)
    for rpc, req in (
        ("PatchWorkspace", v1.PatchWorkspaceRequest(id=2)),
        ("DeleteWorkspace", v1.DeleteWorkspaceRequest(id=2)),
        ("ArchiveWorkspace", v1.ArchiveWorkspaceRequest(id=2)),
        ("UnarchiveWorkspace", v1.UnarchiveWorkspaceRequest(id=2)),
        ("PutWorkspaceConfigPolicies", v1.PutWorkspaceConfigPoliciesRequest(workspace_id=2)),
        (
            "DeleteWorkspaceConfigPolicies",
            v1.DeleteWorkspaceConfigPoliciesRequest(workspace_id=2),
        ),
    ):
        await check(rpc, ALICE, req, lookup)
        await check(rpc, ROOT, req, lookup)
        assert "only the owner of workspace 2 or a user with PERMISSION_TYPE_" in await refused(
            rpc, BOB, req, lookup
        )
    # Who a workspace's tasks run as on the agents is for admins alone to say.
    group = v1.AgentUserGroup(agent_uid=0, agent_gid=0, agent_user="root", agent_group="root")
    for rpc, req in (
        ("PostWorkspace", v1.PostWorkspaceRequest(name="x", agent_user_group=group)),
        (
            "PatchWorkspace",
            v1.PatchWorkspaceRequest(id=2, workspace=v1.PatchWorkspace(agent_user_group=group)),
        ),
    ):
        await check(rpc, ROOT, req, lookup)
        assert "SET_WORKSPACE_AGENT_USER_GROUP" in await refused(rpc, ALICE, req, lookup)
    # The default workspace is nobody's: only an admin gets as far as the store's refusal.
    await refused("PatchWorkspace", ALICE, v1.PatchWorkspaceRequest(id=1), lookup)
    with pytest.raises(errors.NotFound, match="workspace 9 not found"):
        await check("DeleteWorkspace", ROOT, v1.DeleteWorkspaceRequest(id=9), lookup)
    for rpc, req in (
        ("GetWorkspaces", v1.GetWorkspacesRequest()),
        ("GetWorkspace", v1.GetWorkspaceRequest(id=2)),
        ("GetWorkspaceProjects", v1.GetWorkspaceProjectsRequest(id=2)),
        ("PostWorkspace", v1.PostWorkspaceRequest(name="x")),
        ("PostProject", v1.PostProjectRequest(workspace_id=2, name="x")),
        ("GetProject", v1.GetProjectRequest(id=2)),
        ("GetWorkspaceConfigPolicies", v1.GetWorkspaceConfigPoliciesRequest(workspace_id=2)),
    ):
        await check(rpc, BOB, req, lookup)


async def test_a_project_is_changed_by_its_owner_its_workspaces_owner_or_an_admin(
    lookup: authz.Lookup,
) -> None:
    await _teams(lookup)
    outsider = UserCaller(id=7, username="carol", session="s-carol")
    for rpc, req in (
        ("PatchProject", v1.PatchProjectRequest(id=3)),
        ("DeleteProject", v1.DeleteProjectRequest(id=3)),
        ("ArchiveProject", v1.ArchiveProjectRequest(id=3)),
        ("PutProjectNotes", v1.PutProjectNotesRequest(project_id=3)),
        ("AddProjectNote", v1.AddProjectNoteRequest(project_id=3)),
    ):
        await check(rpc, BOB, req, lookup)  # its owner
        await check(rpc, ALICE, req, lookup)  # its workspace's owner
        await check(rpc, ROOT, req, lookup)
        assert "only the owner of project 3" in await refused(rpc, outsider, req, lookup)


async def test_a_non_admin_moves_only_their_experiments_into_their_workspaces(
    lookup: authz.Lookup,
) -> None:
    await _teams(lookup)
    # Alice's experiment 1 into her workspace's project, or back to Uncategorized.
    for destination in (2, 3, 1):
        req = v1.MoveExperimentRequest(experiment_id=1, destination_project_id=destination)
        await check("MoveExperiment", ALICE, req, lookup)
    # Bob may not move alice's experiment, nor his own into alice's workspace.
    into_alices = v1.MoveExperimentRequest(experiment_id=2, destination_project_id=2)
    assert "owner of workspace 2" in await refused("MoveExperiment", BOB, into_alices, lookup)
    alices = v1.MoveExperimentRequest(experiment_id=1, destination_project_id=1)
    assert "owner of experiment 1 (alice)" in await refused("MoveExperiment", BOB, alices, lookup)
    await check("MoveExperiment", ROOT, into_alices, lookup)
    many = v1.MoveExperimentsRequest(experiment_ids=[1, 2], destination_project_id=1)
    assert "experiment 2 (bob)" in await refused("MoveExperiments", ALICE, many, lookup)
    await check("MoveExperiments", ROOT, many, lookup)
    with pytest.raises(errors.NotFound, match="experiment 99 not found"):
        await check(
            "MoveExperiment",
            ALICE,
            v1.MoveExperimentRequest(experiment_id=99, destination_project_id=1),
            lookup,
        )
    # Projects: their owner, into a workspace they own.
    to_bobs = v1.MoveProjectRequest(project_id=3, destination_workspace_id=3)
    await check("MoveProject", BOB, to_bobs, lookup)
    to_alices = v1.MoveProjectRequest(project_id=2, destination_workspace_id=3)
    assert "owner of workspace 3" in await refused("MoveProject", ALICE, to_alices, lookup)
    assert "owner of project 2" in await refused("MoveProject", BOB, to_alices, lookup)


async def test_a_model_is_changed_by_its_owner_or_an_admin_and_read_by_all(
    lookup: authz.Lookup,
) -> None:
    await _teams(lookup)
    await lookup._db.execute(
        "INSERT INTO models (id, name, user_id, creation_time, last_updated_time)"
        " VALUES (5, 'resnet', ?, 0, 0)",
        (ALICE.id,),
    )
    for rpc, req in (
        ("PatchModel", v1.PatchModelRequest(model_name="resnet")),
        ("ArchiveModel", v1.ArchiveModelRequest(model_name="resnet")),
        ("DeleteModel", v1.DeleteModelRequest(model_name="5")),  # by id, too
        ("PostModelVersion", v1.PostModelVersionRequest(model_name="resnet")),
        ("PatchModelVersion", v1.PatchModelVersionRequest(model_name="resnet")),
        ("DeleteModelVersion", v1.DeleteModelVersionRequest(model_name="resnet")),
    ):
        await check(rpc, ALICE, req, lookup)
        await check(rpc, ROOT, req, lookup)
        assert "only the owner of model 'resnet' or a user with PERMISSION_TYPE_" in (
            await refused(rpc, BOB, req, lookup)
        )
    for rpc, req in (
        ("GetModels", v1.GetModelsRequest()),
        ("GetModel", v1.GetModelRequest(model_name="resnet")),
        ("GetModelVersions", v1.GetModelVersionsRequest(model_name="resnet")),
        ("PostModel", v1.PostModelRequest(name="bobs")),
    ):
        await check(rpc, BOB, req, lookup)
    with pytest.raises(errors.NotFound, match="model 'vgg' not found"):
        await check("DeleteModel", ROOT, v1.DeleteModelRequest(model_name="vgg"), lookup)
    # Moved only into a workspace its owner owns (alice's 2, not bob's 3).
    await check(
        "MoveModel",
        ALICE,
        v1.MoveModelRequest(model_name="resnet", destination_workspace_id=2),
        lookup,
    )
    into_bobs = v1.MoveModelRequest(model_name="resnet", destination_workspace_id=3)
    assert "owner of workspace 3" in await refused("MoveModel", ALICE, into_bobs, lookup)
    patch = v1.PatchModelRequest(model_name="resnet", model=v1.PatchModel(workspace_id=3))
    assert "owner of workspace 3" in await refused("PatchModel", ALICE, patch, lookup)
