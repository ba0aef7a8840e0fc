"""Roles as the source of authorization decisions: for every permission the rule table
checks, a user without it is refused with one line naming it, a role holding it (assigned to
the user, or to a group the user is in) lets the same call through at once, and a role
without it does not. The table of witnesses is held complete against the rules themselves:
a walk over every RPC records each permission a rule asks about."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from determined.api.gen import v1
from determined.common import errors
from pydet.master.auth import permissions as perms
from pydet.master.auth import rules as authz
from pydet.master.auth.grants import Held
from pydet.master.auth.groups import Groups
from pydet.master.auth.roles import Assignment, Roles
from tests.unit.test_authz import ALICE, BOB, ROOT, check, lookup, service_mapping

__all__ = ["lookup"]  # the fixture, shared with test_authz

P = perms.P

# Alice's tasks that are not trials, by id.
TASKS = {"tb-1": "TENSORBOARD", "cmd-1": "COMMAND", "nb-1": "NOTEBOOK", "sh-1": "SHELL"}


@pytest.fixture
async def world(lookup: authz.Lookup) -> AsyncIterator[authz.Lookup]:
    """test_authz's store, plus what alice owns beyond experiments: a TensorBoard, a
    command, a notebook and a shell, a template, an access token, membership of group 1,
    workspace 2 with her project 2 and her model 'resnet'; and bob's own access token,
    workspace 3, project 3 and model 'bobs'."""
    db = lookup._db
    for task_id, task_type in TASKS.items():
        await db.execute(  # the row a launch writes (master/tasks/generic.py)
            "INSERT INTO generic_tasks (id, task_type, username, description, resource_pool,"
            " state, start_time) VALUES (?, ?, 'alice', 'd', 'default', 'RUNNING', 0)",
            (task_id, task_type),
        )
    await db.execute(
        "INSERT INTO templates (name, config, username) VALUES ('hers', '{}', 'alice')"
    )
    for token_id, user in ((1, ALICE), (2, BOB)):
        await db.execute(
            "INSERT INTO access_tokens (id, user_id, token_digest, created_at, expires_at)"
            " VALUES (?, ?, ?, 0, 1e12)",
            (token_id, user.id, f"digest-{token_id}"),
        )
    await db.execute("INSERT INTO user_groups (id, name, created_at) VALUES (1, 'hers', 0)")
    await db.execute("INSERT INTO user_group_members (group_id, user_id) VALUES (1, 2)")
    for number, user in ((2, ALICE), (3, BOB)):
        await db.execute(
            "INSERT INTO workspaces (id, name, user_id, created_at) VALUES (?, ?, ?, 0)",
            (number, f"ws-{number}", user.id),
        )
        await db.execute(
            "INSERT INTO projects (id, workspace_id, name, key, user_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, 0)",
            (number, number, f"p-{number}", f"K{number}", user.id),
        )
    for name, user, workspace in (("resnet", ALICE, 2), ("bobs", BOB, 3)):
        await db.execute(
            "INSERT INTO models (name, user_id, workspace_id, creation_time, last_updated_time)"
            " VALUES (?, ?, ?, 0, 0)",
            (name, user.id, workspace),
        )
    yield lookup


@dataclass(frozen=True)
class Witness:
    """A call by bob, who owns none of what it is about, that needs ``permission``."""

    permission: perms.P
    rpc: str
    message: Any
    # Other permissions that let the call through as well.
    alternatives: tuple[perms.P, ...] = ()
    # Only a role counts (moving into a workspace): what every user holds does not.
    by_role_only: bool = False


def assignment(role_id: int) -> v1.RoleAssignment:
    return v1.RoleAssignment(role=v1.Role(role_id=role_id), scope_cluster=True)


WITNESSES = [
    Witness(P.CREATE_EXPERIMENT, "CreateExperiment", v1.CreateExperimentRequest(config="x")),
    Witness(P.CREATE_EXPERIMENT, "PreviewSearch", v1.PreviewSearchRequest()),
    Witness(P.VIEW_EXPERIMENT_METADATA, "GetExperiment", v1.GetExperimentRequest(experiment_id=1)),
    Witness(P.VIEW_EXPERIMENT_METADATA, "GetTrial", v1.GetTrialRequest(trial_id=11)),
    Witness(
        P.VIEW_EXPERIMENT_ARTIFACTS,
        "GetExperimentContext",
        v1.GetExperimentContextRequest(experiment_id=1),
    ),
    Witness(P.VIEW_EXPERIMENT_ARTIFACTS, "GetCheckpoint", v1.GetCheckpointRequest(uuid="ck-11")),
    Witness(P.UPDATE_EXPERIMENT, "PauseExperiment", v1.ExperimentActionRequest(experiment_id=1)),
    Witness(P.UPDATE_EXPERIMENT, "KillTrial", v1.KillTrialRequest(trial_id=11)),
    Witness(
        P.UPDATE_EXPERIMENT,
        "UpdateJobQueue",
        v1.UpdateJobQueueRequest(updates=[v1.JobUpdate(job_id="job-1", priority=1)]),
    ),
    Witness(P.UPDATE_EXPERIMENT, "CreateExperiment", v1.CreateExperimentRequest(parent_id=1)),
    Witness(P.UPDATE_EXPERIMENT_METADATA, "StartTrial", v1.StartTrialRequest(trial_id=11)),
    Witness(P.DELETE_EXPERIMENT, "DeleteExperiment", v1.ExperimentActionRequest(experiment_id=1)),
    Witness(P.CREATE_NSC, "LaunchTensorboard", v1.LaunchTensorboardRequest(experiment_ids=[1])),
    Witness(P.VIEW_NSC, "GetTensorboards", v1.GetTensorboardsRequest()),
    Witness(P.UPDATE_NSC, "KillTensorboard", v1.KillTensorboardRequest(tensorboard_id="tb-1")),
    Witness(P.VIEW_TEMPLATES, "GetTemplates", v1.GetTemplatesRequest()),
    Witness(
        P.CREATE_TEMPLATES,
        "PutTemplate",
        v1.PutTemplateRequest(template=v1.Template(name="his", config="{}")),
    ),
    Witness(
        P.UPDATE_TEMPLATES,
        "PutTemplate",
        v1.PutTemplateRequest(template=v1.Template(name="hers", config="{}")),
    ),
    Witness(P.DELETE_TEMPLATES, "DeleteTemplate", v1.DeleteTemplateRequest(template_name="hers")),
    Witness(P.EDIT_WEBHOOKS, "PostWebhook", v1.PostWebhookRequest()),
    Witness(P.EDIT_WEBHOOKS, "DeleteWebhook", v1.DeleteWebhookRequest(id=1)),
    Witness(P.VIEW_WEBHOOKS, "GetWebhooks", v1.GetWebhooksRequest()),
    Witness(P.ADMINISTRATE_USER, "PostUser", v1.PostUserRequest(username="eve")),
    Witness(P.ADMINISTRATE_USER, "PatchUser", v1.PatchUserRequest(username="alice", active=False)),
    Witness(
        P.ADMINISTRATE_USER,
        "PatchUser",
        v1.PatchUserRequest(user_id=2, user=v1.PatchUser(display_name="A")),
    ),
    Witness(
        P.ADMINISTRATE_USER,
        "SetUserPassword",
        v1.SetUserPasswordRequest(username="alice", password="long-enough"),
    ),
    Witness(P.UPDATE_AGENTS, "DisableAgent", v1.AgentActionRequest(agent_id="agent-0")),
    Witness(
        P.VIEW_WORKSPACE, "SearchRolesAssignableToScope", v1.SearchRolesAssignableToScopeRequest()
    ),
    Witness(P.UPDATE_GROUP, "CreateGroup", v1.CreateGroupRequest(name="g")),
    Witness(P.UPDATE_GROUP, "UpdateGroup", v1.UpdateGroupRequest(group_id=1, name="g")),
    Witness(P.UPDATE_GROUP, "DeleteGroup", v1.DeleteGroupRequest(group_id=1)),
    Witness(P.UPDATE_GROUP, "AssignMultipleGroups", v1.AssignMultipleGroupsRequest(user_ids=[3])),
    Witness(P.ASSIGN_ROLES, "AssignRoles", v1.AssignRolesRequest()),
    Witness(P.ASSIGN_ROLES, "RemoveAssignments", v1.RemoveAssignmentsRequest()),
    Witness(P.ASSIGN_ROLES, "GetGroup", v1.GetGroupRequest(group_id=1)),
    Witness(
        P.ASSIGN_ROLES, "GetRolesAssignedToGroup", v1.GetRolesAssignedToGroupRequest(group_id=1)
    ),
    Witness(P.ASSIGN_ROLES, "GetRolesAssignedToUser", v1.GetRolesAssignedToUserRequest(user_id=2)),
    Witness(
        P.ASSIGN_ROLES, "GetRolesByID", v1.GetRolesByIdRequest(role_ids=[2]), (P.UPDATE_ROLES,)
    ),
    Witness(
        P.UPDATE_ROLES, "GetRolesByID", v1.GetRolesByIdRequest(role_ids=[2]), (P.ASSIGN_ROLES,)
    ),
    Witness(P.CREATE_TOKEN, "PostAccessToken", v1.PostAccessTokenRequest(user_id=BOB.id)),
    Witness(P.CREATE_OTHER_TOKEN, "PostAccessToken", v1.PostAccessTokenRequest(user_id=2)),
    Witness(P.VIEW_OTHER_TOKEN, "GetAccessTokens", v1.GetAccessTokensRequest(username="alice")),
    Witness(P.UPDATE_TOKEN, "PatchAccessToken", v1.PatchAccessTokenRequest(token_id=2)),
    Witness(P.ADMINISTRATE_TOKEN, "PatchAccessToken", v1.PatchAccessTokenRequest(token_id=1)),
    # What the SDK changes on an experiment, and what is kept of it.
    Witness(
        P.UPDATE_EXPERIMENT,
        "PatchExperiment",
        v1.PatchExperimentRequest(experiment=v1.PatchExperiment(id=1)),
    ),
    Witness(
        P.UPDATE_EXPERIMENT,
        "PutExperimentLabel",
        v1.PutExperimentLabelRequest(experiment_id=1, label="x"),
    ),
    Witness(
        P.UPDATE_EXPERIMENT,
        "DeleteExperimentLabel",
        v1.DeleteExperimentLabelRequest(experiment_id=1, label="x"),
    ),
    Witness(
        P.UPDATE_EXPERIMENT,
        "DeleteTensorboardFiles",
        v1.DeleteTensorboardFilesRequest(experiment_id=1),
    ),
    Witness(
        P.UPDATE_EXPERIMENT,
        "CheckpointsRemoveFiles",
        v1.CheckpointsRemoveFilesRequest(checkpoint_uuids=["ck-11"]),
    ),
    Witness(
        P.UPDATE_EXPERIMENT,
        "SetExperimentGcPolicy",
        v1.SetExperimentGcPolicyRequest(experiment_id=1),
    ),
    Witness(
        P.UPDATE_EXPERIMENT,
        "PutExperimentRetainLogs",
        v1.PutExperimentRetainLogsRequest(experiment_id=1),
    ),
    Witness(P.UPDATE_EXPERIMENT, "PutTrialRetainLogs", v1.PutTrialRetainLogsRequest(trial_id=11)),
    Witness(
        P.VIEW_EXPERIMENT_METADATA, "GetMetrics", v1.GetMetricsRequest(trial_ids=[11], group="x")
    ),
    Witness(
        P.VIEW_EXPERIMENT_ARTIFACTS,
        "PreviewExperimentGc",
        v1.PreviewExperimentGcRequest(experiment_id=1),
    ),
    Witness(
        P.UPDATE_NSC,
        "SetTensorboardPriority",
        v1.SetTensorboardPriorityRequest(tensorboard_id="tb-1", priority=5),
    ),
    # Commands, notebooks and shells (in the default workspace, as TensorBoards).
    Witness(P.CREATE_NSC, "LaunchCommand", v1.LaunchCommandRequest()),
    Witness(P.VIEW_NSC, "GetCommands", v1.GetCommandsRequest()),
    Witness(P.VIEW_NSC, "GetCommand", v1.GetCommandRequest(command_id="cmd-1")),
    Witness(P.UPDATE_NSC, "KillCommand", v1.KillCommandRequest(command_id="cmd-1")),
    Witness(
        P.UPDATE_NSC,
        "SetCommandPriority",
        v1.SetCommandPriorityRequest(command_id="cmd-1", priority=5),
    ),
    Witness(P.CREATE_NSC, "LaunchNotebook", v1.LaunchNotebookRequest()),
    Witness(P.VIEW_NSC, "GetNotebooks", v1.GetNotebooksRequest()),
    Witness(P.VIEW_NSC, "GetNotebook", v1.GetNotebookRequest(notebook_id="nb-1")),
    Witness(P.UPDATE_NSC, "KillNotebook", v1.KillNotebookRequest(notebook_id="nb-1")),
    Witness(
        P.UPDATE_NSC,
        "SetNotebookPriority",
        v1.SetNotebookPriorityRequest(notebook_id="nb-1", priority=5),
    ),
    Witness(P.UPDATE_NSC, "IdleNotebook", v1.IdleNotebookRequest(notebook_id="nb-1")),
    Witness(P.CREATE_NSC, "LaunchShell", v1.LaunchShellRequest()),
    Witness(P.VIEW_NSC, "GetShells", v1.GetShellsRequest()),
    # A shell's answer carries its private key: the owner's, or UPDATE_NSC's.
    Witness(P.UPDATE_NSC, "GetShell", v1.GetShellRequest(shell_id="sh-1")),
    Witness(P.UPDATE_NSC, "KillShell", v1.KillShellRequest(shell_id="sh-1")),
    Witness(
        P.UPDATE_NSC, "SetShellPriority", v1.SetShellPriorityRequest(shell_id="sh-1", priority=5)
    ),
    Witness(P.UPDATE_NSC, "GetTaskContext", v1.GetTaskContextRequest(task_id="cmd-1")),
    Witness(P.CREATE_TEMPLATES, "PostTemplate", v1.PostTemplateRequest()),
    Witness(
        P.UPDATE_TEMPLATES,
        "PatchTemplateConfig",
        v1.PatchTemplateConfigRequest(template_name="hers"),
    ),
    # Moving experiments: out of where they are (another's), into a workspace not one's own.
    Witness(
        P.DELETE_EXPERIMENT,
        "MoveExperiment",
        v1.MoveExperimentRequest(experiment_id=1, destination_project_id=1),
    ),
    Witness(
        P.CREATE_EXPERIMENT,
        "MoveExperiments",
        v1.MoveExperimentsRequest(experiment_ids=[2], destination_project_id=2),
        by_role_only=True,
    ),
    # Workspaces, projects and the model registry.
    Witness(P.VIEW_WORKSPACE, "GetWorkspace", v1.GetWorkspaceRequest(id=2)),
    Witness(
        P.VIEW_WORKSPACE,
        "GetGroupsAndUsersAssignedToWorkspace",
        v1.GetGroupsAndUsersAssignedToWorkspaceRequest(workspace_id=2),
    ),
    Witness(P.CREATE_WORKSPACE, "PostWorkspace", v1.PostWorkspaceRequest(name="w")),
    Witness(P.UPDATE_WORKSPACE, "PatchWorkspace", v1.PatchWorkspaceRequest(id=2)),
    Witness(P.UPDATE_WORKSPACE, "ArchiveWorkspace", v1.ArchiveWorkspaceRequest(id=2)),
    Witness(P.DELETE_WORKSPACE, "DeleteWorkspace", v1.DeleteWorkspaceRequest(id=2)),
    Witness(
        P.SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG,
        "PatchWorkspace",
        v1.PatchWorkspaceRequest(
            id=2, workspace=v1.PatchWorkspace(checkpoint_storage_config={"type": "shared_fs"})
        ),
    ),
    Witness(
        P.SET_WORKSPACE_DEFAULT_RESOURCE_POOL,
        "PatchWorkspace",
        v1.PatchWorkspaceRequest(
            id=2, workspace=v1.PatchWorkspace(default_compute_resource_pool="default")
        ),
    ),
    Witness(P.VIEW_PROJECT, "GetProject", v1.GetProjectRequest(id=2)),
    Witness(P.CREATE_PROJECT, "PostProject", v1.PostProjectRequest(workspace_id=2, name="p")),
    Witness(
        P.CREATE_PROJECT,
        "MoveProject",
        v1.MoveProjectRequest(project_id=3, destination_workspace_id=2),
        by_role_only=True,
    ),
    Witness(P.UPDATE_PROJECT, "PatchProject", v1.PatchProjectRequest(id=2)),
    Witness(P.UPDATE_PROJECT, "AddProjectNote", v1.AddProjectNoteRequest(project_id=2)),
    Witness(P.DELETE_PROJECT, "DeleteProject", v1.DeleteProjectRequest(id=2)),
    Witness(
        P.DELETE_PROJECT,
        "MoveProject",
        v1.MoveProjectRequest(project_id=2, destination_workspace_id=3),
    ),
    Witness(P.VIEW_MODEL_REGISTRY, "GetModel", v1.GetModelRequest(model_name="resnet")),
    Witness(P.CREATE_MODEL_REGISTRY, "PostModel", v1.PostModelRequest(name="m")),
    Witness(
        P.CREATE_MODEL_REGISTRY,
        "MoveModel",
        v1.MoveModelRequest(model_name="bobs", destination_workspace_id=2),
        by_role_only=True,
    ),
    Witness(P.EDIT_MODEL_REGISTRY, "PatchModel", v1.PatchModelRequest(model_name="resnet")),
    Witness(P.EDIT_MODEL_REGISTRY, "ArchiveModel", v1.ArchiveModelRequest(model_name="resnet")),
    Witness(
        P.EDIT_MODEL_REGISTRY, "PostModelVersion", v1.PostModelVersionRequest(model_name="resnet")
    ),
    Witness(
        P.DELETE_OTHER_USER_MODEL_REGISTRY,
        "DeleteModel",
        v1.DeleteModelRequest(model_name="resnet"),
    ),
    Witness(
        P.DELETE_OTHER_USER_MODEL_VERSION,
        "DeleteModelVersion",
        v1.DeleteModelVersionRequest(model_name="resnet", model_version_num=1),
    ),
    # Running the cluster.
    Witness(P.VIEW_MASTER_CONFIG, "GetMasterConfig", v1.GetMasterConfigRequest()),
    Witness(P.UPDATE_MASTER_CONFIG, "PatchMasterConfig", v1.PatchMasterConfigRequest()),
    Witness(P.UPDATE_MASTER_CONFIG, "GetClusterMessage", v1.GetClusterMessageRequest()),
    Witness(P.UPDATE_MASTER_CONFIG, "SetClusterMessage", v1.SetClusterMessageRequest()),
    Witness(P.UPDATE_MASTER_CONFIG, "DeleteClusterMessage", v1.DeleteClusterMessageRequest()),
    Witness(P.UPDATE_MASTER_CONFIG, "CleanupLogs", v1.CleanupLogsRequest()),
    Witness(P.VIEW_MASTER_LOGS, "MasterLogs", v1.MasterLogsRequest()),
    Witness(P.UPDATE_AGENTS, "EnableSlot", v1.EnableSlotRequest(agent_id="agent-0")),
    Witness(P.UPDATE_AGENTS, "DisableSlot", v1.DisableSlotRequest(agent_id="agent-0")),
    Witness(P.VIEW_CLUSTER_USAGE, "ResourceAllocationRaw", v1.ResourceAllocationRawRequest()),
    Witness(
        P.MODIFY_GLOBAL_CONFIG_POLICIES,
        "PutGlobalConfigPolicies",
        v1.PutGlobalConfigPoliciesRequest(),
    ),
    Witness(
        P.MODIFY_GLOBAL_CONFIG_POLICIES,
        "DeleteGlobalConfigPolicies",
        v1.DeleteGlobalConfigPoliciesRequest(),
    ),
    Witness(
        P.VIEW_GLOBAL_CONFIG_POLICIES,
        "GetGlobalConfigPolicies",
        v1.GetGlobalConfigPoliciesRequest(),
    ),
    Witness(
        P.MODIFY_WORKSPACE_CONFIG_POLICIES,
        "PutWorkspaceConfigPolicies",
        v1.PutWorkspaceConfigPoliciesRequest(workspace_id=2),
    ),
    Witness(
        P.VIEW_WORKSPACE_CONFIG_POLICIES,
        "GetWorkspaceConfigPolicies",
        v1.GetWorkspaceConfigPoliciesRequest(workspace_id=2),
    ),
    Witness(
        P.MODIFY_RP_WORKSPACE_BINDINGS,
        "BindRPToWorkspace",
        v1.BindRpToWorkspaceRequest(resource_pool_name="gpu", workspace_names=["ws-2"]),
    ),
    Witness(
        P.SET_WORKSPACE_AGENT_USER_GROUP,
        "PostWorkspace",
        v1.PostWorkspaceRequest(
            name="x",
            agent_user_group=v1.AgentUserGroup(
                agent_uid=0, agent_gid=0, agent_user="root", agent_group="root"
            ),
        ),
    ),
]


def _id(w: Witness) -> str:
    return f"{w.permission.name}-{w.rpc}"


async def refused_for(lookup: authz.Lookup, w: Witness) -> str:
    with pytest.raises(errors.PermissionDenied) as e:
        await check(w.rpc, BOB, w.message, lookup)
    return e.value.message


def holding(permission: perms.P) -> perms.Role:
    """The smallest of Determined's roles that holds ``permission``."""
    return min(
        (r for r in perms.ROLES if permission in r.permissions), key=lambda r: len(r.permissions)
    )


def lacking(w: Witness) -> perms.Role:
    """The largest of Determined's roles that lets ``w`` through by none of its permissions."""
    needed = {w.permission, *w.alternatives}
    return max(
        (r for r in perms.ROLES if r.permissions.isdisjoint(needed)),
        key=lambda r: len(r.permissions),
    )


@pytest.mark.parametrize("w", WITNESSES, ids=_id)
async def test_a_role_holding_the_permission_lets_the_call_through(
    w: Witness, world: authz.Lookup
) -> None:
    roles = Roles(world._db, world.grants)
    if w.permission in perms.EVERY_USER and not w.by_role_only:
        # Every user holds it (Determined's basic authorization): no role needed.
        await check(w.rpc, BOB, w.message, world)
        return
    text = await refused_for(world, w)
    assert perms.label(w.permission) in text
    assert "\n" not in text
    # A role without it changes nothing; one with it counts at once, and only while held.
    without = Assignment(lacking(w), user_id=BOB.id)
    await roles.assign([without], by="test")
    await refused_for(world, w)
    granted = Assignment(holding(w.permission), user_id=BOB.id)
    await roles.assign([granted], by="test")
    await check(w.rpc, BOB, w.message, world)
    await roles.remove([granted], by="test", by_id=ROOT.id)
    await refused_for(world, w)


@pytest.mark.parametrize(
    "w", [w for w in WITNESSES if w.permission not in perms.EVERY_USER], ids=_id
)
async def test_a_role_held_through_a_group_counts_the_same(w: Witness, world: authz.Lookup) -> None:
    groups = Groups(world._db, world.grants)
    roles = Roles(world._db, world.grants)
    team = await groups.create("bobs-team", [], by="test")
    role = Assignment(holding(w.permission), group_id=team.group_id)
    await roles.assign([role], by="test")
    await refused_for(world, w)  # bob is not in it yet
    await groups.update(team.group_id, name="", add_users=[BOB.id], remove_users=[], by="test")
    await check(w.rpc, BOB, w.message, world)
    await groups.update(team.group_id, name="", add_users=[], remove_users=[BOB.id], by="test")
    await refused_for(world, w)
    await groups.update(team.group_id, name="", add_users=[BOB.id], remove_users=[], by="test")
    await groups.delete(team.group_id, by="test")  # its assignments go with it
    await refused_for(world, w)


@pytest.mark.parametrize("w", WITNESSES, ids=_id)
async def test_an_admin_holds_every_permission(w: Witness, world: authz.Lookup) -> None:
    await check(w.rpc, ROOT, w.message, world)


# -- the witnesses cover every permission the rules check ------------------------------------


class Asked(frozenset[perms.P]):
    """An empty permission set that remembers every permission it was asked about."""

    seen: set[perms.P] = set()

    def __contains__(self, item: object) -> bool:
        if isinstance(item, perms.P):
            Asked.seen.add(item)
        return False


class AskedGrants:
    def known(self, user_id: int) -> frozenset[perms.P]:
        return Asked()

    def known_anywhere(self, user_id: int) -> frozenset[perms.P]:
        return Asked()

    async def of(self, user_id: int) -> Held:
        return Held(permissions=Asked(), anywhere=Asked())

    async def held(self, user_id: int) -> frozenset[perms.P]:
        return Asked()

    async def held_in(self, user_id: int, workspace_id: int | None) -> frozenset[perms.P]:
        return Asked()

    async def roles(self, user_id: int) -> frozenset[int]:
        return frozenset()

    async def roles_anywhere(self, user_id: int) -> frozenset[int]:
        return frozenset()


def aimed_at(request_type: type[Any], *, own: bool) -> list[Any]:
    """Requests naming alice's work (``own``: bob's own where a field names a user); one
    for each of the changes a rule asks a permission of separately."""
    values: dict[str, Any] = {
        "experiment_id": 1,
        "trial_id": 11,
        "parent_id": 1,
        "run_id": 11,
        "uuid": "ck-11",
        "uuids": ["ck-11"],
        "username": "bob" if own else "alice",
        "user_id": BOB.id if own else ALICE.id,
        "token_id": 2 if own else 1,
        "group_id": 1,
        "role_ids": [2],
        "tensorboard_id": "tb-1",
        "command_id": "cmd-1",
        "notebook_id": "nb-1",
        "shell_id": "sh-1",
        "task_id": "cmd-1",
        # A template of bob's own is a new one.
        "template_name": "his" if own else "hers",
        "template": v1.Template(name="his" if own else "hers", config="{}"),
        "agent_id": "agent-0",
        "updates": [v1.JobUpdate(job_id="job-1", priority=1)],
        "checkpoint": v1.Checkpoint(
            uuid="ck-11",
            training=v1.CheckpointTrainingMetadata(trial_id=11, experiment_id=1),
        ),
        "checkpoint_uuids": ["ck-11"],
        # Alice's workspace 2 and project 2 (bob's own: 3), her model.
        "id": 3 if own else 2,
        "project_id": 3 if own else 2,
        "model_name": "bobs" if own else "resnet",
        # Bob's own go into alice's workspace; alice's into the default one.
        "experiment_ids": [2] if own else [1],
        "destination_project_id": 2 if own else 1,
        "destination_workspace_id": 2 if own else 1,
        "workspace_id": 3 if own else 2,
    }
    identity = v1.AgentUserGroup(agent_uid=0, agent_gid=0, agent_user="root", agent_group="root")
    typed: dict[type[Any], list[dict[str, Any]]] = {
        v1.PatchWorkspaceRequest: [
            {"workspace": v1.PatchWorkspace(name="w")},
            {"workspace": v1.PatchWorkspace(checkpoint_storage_config={"type": "shared_fs"})},
            {"workspace": v1.PatchWorkspace(default_compute_resource_pool="x")},
            {"workspace": v1.PatchWorkspace(agent_user_group=identity)},
        ],
        v1.PostWorkspaceRequest: [{}, {"agent_user_group": identity}],
        v1.PatchExperimentRequest: [{"experiment": v1.PatchExperiment(id=2 if own else 1)}],
    }
    return [_message(request_type, {**values, **v}) for v in typed.get(request_type, [{}])]


def _message(request_type: type[Any], values: dict[str, Any]) -> Any:
    message = request_type()
    for name, value in values.items():
        if hasattr(message, name):
            setattr(message, name, value)
    return message


async def test_the_witnesses_cover_every_permission_the_rules_check(
    world: authz.Lookup, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without what every user holds, each rule has to ask: record what it asks about.
    monkeypatch.setattr(perms, "EVERY_USER", frozenset())
    monkeypatch.setattr(perms, "OWNER", frozenset())
    asked = AskedGrants()
    monkeypatch.setattr(world, "grants", asked)
    monkeypatch.setattr(world, "known", asked.known)
    monkeypatch.setattr(world, "known_anywhere", asked.known_anywhere)
    # Rules learn whether everybody holds their permission when the table is made.
    monkeypatch.setattr(authz, "RULES", authz.rules_table())
    Asked.seen = set()
    for path, handler in sorted(service_mapping().items()):
        for own in (False, True):
            for message in aimed_at(handler.request_type, own=own):
                try:
                    await authz.authorize(path, BOB, message, world)
                except errors.DetError:
                    pass
    assert Asked.seen == {w.permission for w in WITNESSES}


# -- roles on a workspace --------------------------------------------------------------------


@pytest.fixture
async def teams(world: authz.Lookup) -> AsyncIterator[authz.Lookup]:
    """The world, plus the admin's workspaces 4 (team-a) and 5 (team-b), a project in each
    (4, 5), and alice's work in them: her experiment 1 and model 'resnet' in team-a, her
    experiment 3 in team-b."""
    db = world._db
    for number, name in ((4, "team-a"), (5, "team-b")):
        await db.execute(
            "INSERT INTO workspaces (id, name, user_id, created_at) VALUES (?, ?, ?, 0)",
            (number, name, ROOT.id),
        )
        await db.execute(
            "INSERT INTO projects (id, workspace_id, name, key, user_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, 0)",
            (number, number, f"p-{number}", f"T{number}", ROOT.id),
        )
    await db.execute(
        "INSERT INTO experiments (id, state, config, original_config, username, start_time,"
        " job_id, project_id) VALUES (3, 'ACTIVE', '{}', '', 'alice', 0, 'job-3', 5)"
    )
    await db.execute("UPDATE experiments SET project_id = 4 WHERE id = 1")
    await db.execute("UPDATE models SET workspace_id = 4 WHERE name = 'resnet'")
    yield world


def on(role: str, workspace_id: int, **holder: int) -> Assignment:
    return Assignment(perms.ROLE_BY_NAME[role], workspace_id=workspace_id, **holder)


def pause(experiment_id: int) -> v1.ExperimentActionRequest:
    return v1.ExperimentActionRequest(experiment_id=experiment_id)


async def test_an_editor_in_a_workspace_steers_the_experiments_there_and_nowhere_else(
    teams: authz.Lookup,
) -> None:
    roles = Roles(teams._db, teams.grants)
    await roles.assign([on("Editor", 4, user_id=BOB.id)], by="test")
    await check("PauseExperiment", BOB, pause(1), teams)  # alice's, in team-a
    text = await refused_for(teams, Witness(P.UPDATE_EXPERIMENT, "PauseExperiment", pause(3)))
    assert "only the owner of experiment 3 (alice) or a user with" in text
    assert "PERMISSION_TYPE_UPDATE_EXPERIMENT" in text
    await check("KillTrial", BOB, v1.KillTrialRequest(trial_id=11), teams)
    await check("DeleteExperiment", BOB, pause(1), teams)
    # An experiment moved into team-a is steered there at once (where it is is not cached).
    await teams._db.execute("UPDATE experiments SET project_id = 4 WHERE id = 3")
    await check("PauseExperiment", BOB, pause(3), teams)
    await teams._db.execute("UPDATE experiments SET project_id = 5 WHERE id = 3")
    await refused_for(teams, Witness(P.UPDATE_EXPERIMENT, "PauseExperiment", pause(3)))
    # Bob's role in team-a is not one over everything: what is in no workspace stays alice's.
    for rpc, message in (
        ("PostUser", v1.PostUserRequest(username="eve")),
        ("KillTensorboard", v1.KillTensorboardRequest(tensorboard_id="tb-1")),
    ):
        await refused_for(teams, Witness(P.UPDATE_EXPERIMENT, rpc, message))
    # A Viewer in team-a steers nothing there; taking the role away counts at once.
    await roles.remove([on("Editor", 4, user_id=BOB.id)], by="test", by_id=ROOT.id)
    await roles.assign([on("Viewer", 4, user_id=BOB.id)], by="test")
    await refused_for(teams, Witness(P.UPDATE_EXPERIMENT, "PauseExperiment", pause(1)))


async def test_tasks_that_are_not_trials_are_steered_in_the_workspace_they_were_launched_into(
    teams: authz.Lookup,
) -> None:
    """An Editor of the default workspace (where Determined puts commands, notebooks, shells
    and TensorBoards launched without one) kills, reprioritises and opens alice's there; an
    Editor of team-a does not, until one of them is launched into team-a (``-w``)."""
    roles = Roles(teams._db, teams.grants)
    calls = [
        ("KillCommand", v1.KillCommandRequest(command_id="cmd-1")),
        ("SetNotebookPriority", v1.SetNotebookPriorityRequest(notebook_id="nb-1", priority=3)),
        ("GetShell", v1.GetShellRequest(shell_id="sh-1")),
        ("KillTensorboard", v1.KillTensorboardRequest(tensorboard_id="tb-1")),
    ]
    await roles.assign([on("Editor", 4, user_id=BOB.id)], by="test")
    for rpc, message in calls:
        text = await refused_for(teams, Witness(P.UPDATE_NSC, rpc, message))
        assert "PERMISSION_TYPE_UPDATE_NSC" in text and "alice" not in text
    await roles.assign([on("Editor", authz.DEFAULT_WORKSPACE, user_id=BOB.id)], by="test")
    for rpc, message in calls:
        await check(rpc, BOB, message, teams)
    await roles.remove(
        [on("Editor", authz.DEFAULT_WORKSPACE, user_id=BOB.id)], by="test", by_id=ROOT.id
    )
    await refused_for(teams, Witness(P.UPDATE_NSC, *calls[0]))
    # A notebook launched into team-a is steered by team-a's Editor, and no longer by one of
    # the default workspace.
    await teams._db.execute(
        "UPDATE generic_tasks SET extra = ? WHERE id = 'nb-1'", ('{"workspace_id": 4}',)
    )
    await check(calls[1][0], BOB, calls[1][1], teams)
    await roles.remove([on("Editor", 4, user_id=BOB.id)], by="test", by_id=ROOT.id)
    await roles.assign([on("Editor", authz.DEFAULT_WORKSPACE, user_id=BOB.id)], by="test")
    await refused_for(teams, Witness(P.UPDATE_NSC, *calls[1]))
    await check(calls[0][0], BOB, calls[0][1], teams)


async def test_a_role_on_a_workspace_through_a_group_counts_there(teams: authz.Lookup) -> None:
    groups = Groups(teams._db, teams.grants)
    roles = Roles(teams._db, teams.grants)
    team = await groups.create("team-b-editors", [BOB.id], by="test")
    await roles.assign([on("Editor", 5, group_id=team.group_id)], by="test")
    await check("PauseExperiment", BOB, pause(3), teams)
    await refused_for(teams, Witness(P.UPDATE_EXPERIMENT, "PauseExperiment", pause(1)))
    await groups.update(team.group_id, name="", add_users=[], remove_users=[BOB.id], by="test")
    await refused_for(teams, Witness(P.UPDATE_EXPERIMENT, "PauseExperiment", pause(3)))


async def test_a_workspace_admin_runs_their_workspace_and_what_is_in_it_only(
    teams: authz.Lookup,
) -> None:
    roles = Roles(teams._db, teams.grants)
    await roles.assign([on("WorkspaceAdmin", 4, user_id=BOB.id)], by="test")
    storage = v1.PatchWorkspace(checkpoint_storage_config={"type": "shared_fs"})
    for workspace_id, allowed in ((4, True), (5, False)):
        for rpc, message in (
            ("PatchWorkspace", v1.PatchWorkspaceRequest(id=workspace_id)),
            ("PatchWorkspace", v1.PatchWorkspaceRequest(id=workspace_id, workspace=storage)),
            ("ArchiveWorkspace", v1.ArchiveWorkspaceRequest(id=workspace_id)),
            ("DeleteWorkspace", v1.DeleteWorkspaceRequest(id=workspace_id)),
            ("PatchProject", v1.PatchProjectRequest(id=workspace_id)),
            ("DeleteProject", v1.DeleteProjectRequest(id=workspace_id)),
        ):
            if allowed:
                await check(rpc, BOB, message, teams)
            else:
                text = await refused_for(teams, Witness(P.UPDATE_WORKSPACE, rpc, message))
                assert f"owner of {'workspace' if 'Workspace' in rpc else 'project'} 5" in text
    # The model registry in team-a: alice's model is changed and deleted.
    resnet = v1.PatchModelRequest(model_name="resnet")
    await check("PatchModel", BOB, resnet, teams)
    await check("DeleteModel", BOB, v1.DeleteModelRequest(model_name="resnet"), teams)
    await teams._db.execute("UPDATE models SET workspace_id = 5 WHERE name = 'resnet'")
    text = await refused_for(teams, Witness(P.EDIT_MODEL_REGISTRY, "PatchModel", resnet))
    assert "PERMISSION_TYPE_EDIT_MODEL_REGISTRY" in text


async def test_things_move_into_a_workspace_where_a_role_lets_one_create_them(
    teams: authz.Lookup,
) -> None:
    roles = Roles(teams._db, teams.grants)
    into_a = v1.MoveExperimentRequest(experiment_id=2, destination_project_id=4)
    into_b = v1.MoveExperimentRequest(experiment_id=2, destination_project_id=5)
    for message in (into_a, into_b):
        text = await refused_for(teams, Witness(P.CREATE_EXPERIMENT, "MoveExperiment", message))
        assert "PERMISSION_TYPE_CREATE_EXPERIMENT in it may move experiments into it" in text
    await roles.assign([on("Editor", 4, user_id=BOB.id)], by="test")
    await check("MoveExperiment", BOB, into_a, teams)
    await refused_for(teams, Witness(P.CREATE_EXPERIMENT, "MoveExperiment", into_b))
    # Out of team-a, alice's experiment goes with DELETE_EXPERIMENT there, into the default.
    out_of_a = v1.MoveExperimentsRequest(experiment_ids=[1], destination_project_id=1)
    await check("MoveExperiments", BOB, out_of_a, teams)
    out_of_b = v1.MoveExperimentsRequest(experiment_ids=[1, 3], destination_project_id=1)
    text = await refused_for(teams, Witness(P.DELETE_EXPERIMENT, "MoveExperiments", out_of_b))
    assert "experiment 3 (alice)" in text
    bobs_model = v1.MoveModelRequest(model_name="bobs", destination_workspace_id=4)
    await check("MoveModel", BOB, bobs_model, teams)
    bobs_project = v1.MoveProjectRequest(project_id=3, destination_workspace_id=5)
    await refused_for(teams, Witness(P.CREATE_PROJECT, "MoveProject", bobs_project))


async def test_roles_on_a_workspace_are_assigned_there_by_who_may_assign_roles_there(
    teams: authz.Lookup,
) -> None:
    roles = Roles(teams._db, teams.grants)

    def assigning(workspace_id: int | None) -> v1.AssignRolesRequest:
        where = v1.RoleAssignment(role=v1.Role(role_id=4), scope_workspace_id=workspace_id)
        return v1.AssignRolesRequest(
            user_role_assignments=[v1.UserRoleAssignment(user_id=ALICE.id, role_assignment=where)]
        )

    for workspace_id in (4, None):
        await refused_for(teams, Witness(P.ASSIGN_ROLES, "AssignRoles", assigning(workspace_id)))
    await roles.assign([on("WorkspaceAdmin", 4, user_id=BOB.id)], by="test")
    await check("AssignRoles", BOB, assigning(4), teams)
    await check("RemoveAssignments", BOB, assigning(4), teams)
    text = await refused_for(teams, Witness(P.ASSIGN_ROLES, "AssignRoles", assigning(5)))
    assert "may assign roles in workspace 5" in text
    text = await refused_for(teams, Witness(P.ASSIGN_ROLES, "AssignRoles", assigning(None)))
    assert "may assign roles cluster-wide" in text
    with pytest.raises(errors.NotFound, match="workspace 9 not found"):
        await check("AssignRoles", ROOT, assigning(9), teams)
    await check("AssignRoles", ROOT, assigning(5), teams)
