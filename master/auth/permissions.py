"""Determined's permissions and pre-canned roles, and what a user may do without a role.

The permissions are Determined's (``v1.PermissionType``, its numbers and words), and so are
the roles: their ids, names and permission sets are those a Determined 0.38.1 master's
migrations leave in its ``roles`` and ``permission_assignments`` tables. They are fixed here,
not stored: a role is assigned by its id (``role_assignments.role_id``).

A user holds a permission over everything when a role holding it is assigned to them
cluster-wide, and over a workspace and what is in it when the role is assigned on that
workspace, directly or through a group (``grants``). Without any role, every user holds what
a user of Determined holds under its basic (non-RBAC) authorization, which is what pydet's
users could do before roles existed: ``EVERY_USER`` over everything (read, and create their
own work), ``OWNER`` over what they own (steer and delete their experiments, kill their
TensorBoards, change their templates, see their own access tokens), and ``WORKSPACE_OWNER``,
``PROJECT_OWNER`` and ``MODEL_OWNER`` over the workspaces, projects and models they created.
The ``admin`` flag of a user is the ``ClusterAdmin`` role assigned to them cluster-wide.
"""

from __future__ import annotations

from dataclasses import dataclass

from determined.api.gen import v1
from determined.common import errors

P = v1.PermissionType

# Determined's words for each permission, and whether it can only be held cluster-wide.
_PERMISSIONS: dict[P, tuple[str, bool]] = {
    P.CREATE_EXPERIMENT: ("create experiment", False),
    P.VIEW_EXPERIMENT_ARTIFACTS: ("view experiment artifacts", False),
    P.VIEW_EXPERIMENT_METADATA: ("view experiment metadata", False),
    P.UPDATE_EXPERIMENT: ("update experiment", False),
    P.UPDATE_EXPERIMENT_METADATA: ("update experiment metadata", False),
    P.DELETE_EXPERIMENT: ("delete experiment", False),
    P.CREATE_NSC: ("create notebooks/shells/commands", False),
    P.VIEW_NSC: ("view notebooks/shells/commands", False),
    P.UPDATE_NSC: ("update notebooks/shells/commands", False),
    P.VIEW_WORKSPACE: ("view workspace", False),
    P.UPDATE_WORKSPACE: ("update workspace", False),
    P.DELETE_WORKSPACE: ("delete workspace", False),
    P.SET_WORKSPACE_AGENT_USER_GROUP: ("set agent user group on workspace", False),
    P.SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG: (
        "set checkpoint storage config on workspace",
        False,
    ),
    P.SET_WORKSPACE_DEFAULT_RESOURCE_POOL: ("set default resource pool on workspace", False),
    P.CREATE_PROJECT: ("create project", False),
    P.VIEW_PROJECT: ("view project", False),
    P.UPDATE_PROJECT: ("update project", False),
    P.DELETE_PROJECT: ("delete project", False),
    P.ASSIGN_ROLES: ("assign roles", False),
    P.VIEW_MODEL_REGISTRY: ("view model registry", False),
    P.EDIT_MODEL_REGISTRY: ("edit model registry", False),
    P.CREATE_MODEL_REGISTRY: ("create model registry", False),
    P.DELETE_MODEL_REGISTRY: ("delete model registry", False),
    P.DELETE_MODEL_VERSION: ("delete model version", False),
    P.DELETE_OTHER_USER_MODEL_REGISTRY: ("delete other user model registry", False),
    P.DELETE_OTHER_USER_MODEL_VERSION: ("delete other user model version", False),
    P.VIEW_MASTER_LOGS: ("view master logs", True),
    P.VIEW_CLUSTER_USAGE: ("view detailed cluster usage", True),
    P.UPDATE_AGENTS: ("update agents", True),
    P.VIEW_SENSITIVE_AGENT_INFO: ("view sensitive agent info", True),
    P.VIEW_MASTER_CONFIG: ("view master config", True),
    P.UPDATE_MASTER_CONFIG: ("update master config", True),
    P.VIEW_EXTERNAL_JOBS: ("view external jobs", True),
    P.CONTROL_STRICT_JOB_QUEUE: ("control strict job queue", True),
    P.VIEW_TEMPLATES: ("view templates", False),
    P.UPDATE_TEMPLATES: ("update templates", False),
    P.CREATE_TEMPLATES: ("create templates", False),
    P.DELETE_TEMPLATES: ("delete templates", False),
    P.MODIFY_RP_WORKSPACE_BINDINGS: ("modify rp workspace bindings", True),
    P.SET_WORKSPACE_NAMESPACE_BINDINGS: ("set workspace-namespace bindings", True),
    P.SET_RESOURCE_QUOTAS: ("set resource quotas", True),
    P.VIEW_RESOURCE_QUOTAS: ("view resource quotas", False),
    P.MODIFY_GLOBAL_CONFIG_POLICIES: ("modify global config policies", True),
    P.MODIFY_WORKSPACE_CONFIG_POLICIES: ("modify workspace config policies", False),
    P.VIEW_GLOBAL_CONFIG_POLICIES: ("view global config policies", False),
    P.VIEW_WORKSPACE_CONFIG_POLICIES: ("view workspace config policies", False),
    P.ADMINISTRATE_TOKEN: ("administrate access token", True),
    P.UPDATE_TOKEN: ("update own access token", True),
    P.CREATE_TOKEN: ("create access token", True),
    P.CREATE_OTHER_TOKEN: ("create other access token", True),
    P.VIEW_OTHER_TOKEN: ("view other access token", True),
    P.VIEW_TOKEN: ("view own access token", True),
    P.ADMINISTRATE_USER: ("administrate user", True),
    P.ADMINISTRATE_OAUTH: ("manage oauth", True),
    P.UPDATE_GROUP: ("update group", True),
    P.CREATE_WORKSPACE: ("create workspace", True),
    P.UPDATE_ROLES: ("update roles", True),
    P.EDIT_WEBHOOKS: ("edit webhooks", False),
    P.VIEW_WEBHOOKS: ("view webhooks", False),
}

ALL_PERMISSIONS = frozenset(_PERMISSIONS)
GLOBAL_ONLY = frozenset(p for p, (_, global_only) in _PERMISSIONS.items() if global_only)


_LABELS = {p: f"PERMISSION_TYPE_{p.name}" for p in P}


def label(permission: P) -> str:
    """``PERMISSION_TYPE_CREATE_EXPERIMENT``: the name Determined's messages and CLI use."""
    return _LABELS[permission]


def words(permission: P) -> str:
    """Determined's words for a permission ("create experiment")."""
    return _PERMISSIONS[permission][0]


@dataclass(frozen=True)
class Role:
    id: int
    name: str
    permissions: frozenset[P]

    @property
    def global_only(self) -> bool:
        """Whether it may only be assigned cluster-wide (it holds a cluster-only permission)."""
        return not self.permissions.isdisjoint(GLOBAL_ONLY)


def _role(role_id: int, name: str, *permissions: P) -> Role:
    return Role(role_id, name, frozenset(permissions))


_VIEW = (
    P.VIEW_EXPERIMENT_ARTIFACTS,
    P.VIEW_EXPERIMENT_METADATA,
    P.VIEW_NSC,
    P.VIEW_WORKSPACE,
    P.VIEW_PROJECT,
    P.VIEW_MODEL_REGISTRY,
    P.VIEW_TEMPLATES,
    P.VIEW_RESOURCE_QUOTAS,
    P.VIEW_GLOBAL_CONFIG_POLICIES,
    P.VIEW_WORKSPACE_CONFIG_POLICIES,
)
_EXPERIMENTS = (
    P.CREATE_EXPERIMENT,
    P.UPDATE_EXPERIMENT,
    P.UPDATE_EXPERIMENT_METADATA,
    P.DELETE_EXPERIMENT,
)
_NSC = (P.CREATE_NSC, P.UPDATE_NSC)
_MODELS = (
    P.EDIT_MODEL_REGISTRY,
    P.CREATE_MODEL_REGISTRY,
    P.DELETE_MODEL_REGISTRY,
    P.DELETE_MODEL_VERSION,
)
_TEMPLATES = (P.UPDATE_TEMPLATES, P.CREATE_TEMPLATES, P.DELETE_TEMPLATES)
_WEBHOOKS = (P.EDIT_WEBHOOKS, P.VIEW_WEBHOOKS)
_PROJECTS = (P.CREATE_PROJECT, P.UPDATE_PROJECT)

CLUSTER_ADMIN = 1

ROLES: tuple[Role, ...] = (
    Role(CLUSTER_ADMIN, "ClusterAdmin", ALL_PERMISSIONS),
    _role(
        2,
        "WorkspaceAdmin",
        *_VIEW,
        *_EXPERIMENTS,
        *_NSC,
        *_MODELS,
        *_TEMPLATES,
        *_WEBHOOKS,
        *_PROJECTS,
        P.UPDATE_WORKSPACE,
        P.DELETE_WORKSPACE,
        P.SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG,
        P.SET_WORKSPACE_DEFAULT_RESOURCE_POOL,
        P.DELETE_PROJECT,
        P.ASSIGN_ROLES,
        P.DELETE_OTHER_USER_MODEL_REGISTRY,
        P.DELETE_OTHER_USER_MODEL_VERSION,
        P.MODIFY_WORKSPACE_CONFIG_POLICIES,
    ),
    _role(
        3,
        "WorkspaceCreator",
        P.CREATE_WORKSPACE,
        P.VIEW_GLOBAL_CONFIG_POLICIES,
        P.VIEW_WORKSPACE_CONFIG_POLICIES,
    ),
    _role(4, "Viewer", *_VIEW, P.VIEW_WEBHOOKS),
    _role(5, "Editor", *_VIEW, *_EXPERIMENTS, *_NSC, *_MODELS, *_TEMPLATES, *_WEBHOOKS, *_PROJECTS),
    _role(
        6,
        "ModelRegistryViewer",
        P.VIEW_MODEL_REGISTRY,
        P.VIEW_GLOBAL_CONFIG_POLICIES,
        P.VIEW_WORKSPACE_CONFIG_POLICIES,
    ),
    _role(
        7, "EditorRestricted", *_VIEW, *_EXPERIMENTS, *_MODELS, *_TEMPLATES, *_WEBHOOKS, *_PROJECTS
    ),
    _role(
        8,
        "GenAIUser",
        *_VIEW,
        *_EXPERIMENTS,
        *_NSC,
        *_MODELS,
        *_TEMPLATES,
        *_PROJECTS,
        P.DELETE_PROJECT,
        P.CREATE_WORKSPACE,
    ),
    _role(
        9,
        "EditorProjectRestricted",
        *_VIEW,
        *_EXPERIMENTS,
        *_NSC,
        *_MODELS,
        *_TEMPLATES,
        *_WEBHOOKS,
    ),
    _role(10, "TokenCreator", P.CREATE_TOKEN, P.VIEW_TOKEN, P.UPDATE_TOKEN),
)
ROLE_BY_ID = {r.id: r for r in ROLES}
ROLE_BY_NAME = {r.name: r for r in ROLES}

# Without a role: what Determined's basic authorization lets every user do: what a Viewer
# sees but the webhooks (admins list them), the master's log and the cluster's use, and to
# create their own work (experiments, tasks, templates, workspaces, projects, models)...
EVERY_USER = frozenset(
    {
        *_VIEW,
        P.CREATE_EXPERIMENT,
        P.CREATE_NSC,
        P.CREATE_TEMPLATES,
        P.CREATE_WORKSPACE,
        P.CREATE_PROJECT,
        P.CREATE_MODEL_REGISTRY,
        P.VIEW_MASTER_LOGS,
        P.VIEW_CLUSTER_USAGE,
    }
)
# ...and over what they own: their experiments, tasks, templates and tokens,
OWNER = frozenset(
    {
        P.UPDATE_EXPERIMENT,
        P.UPDATE_EXPERIMENT_METADATA,
        P.DELETE_EXPERIMENT,
        P.UPDATE_NSC,
        P.UPDATE_TEMPLATES,
        P.DELETE_TEMPLATES,
        P.VIEW_TOKEN,
    }
)
# their workspaces (and the projects in them; and experiments, projects and models move
# into them, rules._into_workspace),
WORKSPACE_OWNER = frozenset(
    {
        P.UPDATE_WORKSPACE,
        P.DELETE_WORKSPACE,
        P.SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG,
        P.SET_WORKSPACE_DEFAULT_RESOURCE_POOL,
        P.MODIFY_WORKSPACE_CONFIG_POLICIES,
        P.UPDATE_PROJECT,
        P.DELETE_PROJECT,
    }
)
# their projects,
PROJECT_OWNER = frozenset({P.UPDATE_PROJECT, P.DELETE_PROJECT})
# and their models (with the models' versions).
MODEL_OWNER = frozenset({P.EDIT_MODEL_REGISTRY, P.DELETE_MODEL_REGISTRY, P.DELETE_MODEL_VERSION})


def role_named(name: str) -> Role:
    found = ROLE_BY_NAME.get(name)
    if found is None:
        raise errors.NotFound(
            f"role {name!r} does not exist (roles: {', '.join(r.name for r in ROLES)})"
        )
    return found


def role_of_id(role_id: int) -> Role:
    found = ROLE_BY_ID.get(role_id)
    if found is None:
        raise errors.NotFound(f"role {role_id} does not exist (role ids 1 to {len(ROLES)})")
    return found


def permissions_of(role_ids: set[int] | frozenset[int]) -> frozenset[P]:
    held: set[P] = set()
    for role_id in role_ids:
        role = ROLE_BY_ID.get(role_id)
        if role is not None:
            held |= role.permissions
    return frozenset(held)


def _number(permission: P) -> int:
    return int(permission.value)


def permission_message(permission: P) -> v1.Permission:
    return v1.Permission(
        id=permission,
        name=words(permission),
        scope_type_mask=v1.ScopeTypeMask(cluster=True, workspace=permission not in GLOBAL_ONLY),
    )


def role_message(role: Role) -> v1.Role:
    return v1.Role(
        role_id=role.id,
        name=role.name,
        permissions=[
            permission_message(p) for p in sorted(role.permissions, key=lambda p: p.value)
        ],
        scope_type_mask=v1.ScopeTypeMask(cluster=True, workspace=not role.global_only),
    )
