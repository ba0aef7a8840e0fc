"""Authorization: one table that says, for every RPC, which callers may make it.

The gRPC servicer and the HTTP gateway both check a call here, by the RPC's name and its
request message, before the call reaches the domain. A user's call is decided by the
Determined permission it needs (``permissions``): a user holds it over everything when a
role holding it is assigned to them cluster-wide, and over a workspace and the projects,
experiments and models in it when the role is assigned on that workspace (``grants``; a
rule about such a thing names its workspace, read only when a role on some workspace could
decide). Without any role every user holds
what Determined's basic authorization gives everybody: to read, and to create their own
experiments, templates, TensorBoards, workspaces, projects and models
(``permissions.EVERY_USER``), and over what they own, to steer, change and delete it
(``permissions.OWNER``, ``WORKSPACE_OWNER``, ``PROJECT_OWNER``, ``MODEL_OWNER``). Admins
hold ClusterAdmin, which has every permission. So, as before roles:

- Any logged-in user may read. Creating an experiment needs a user; forking one (a create
  with a parent) is for whoever may update the parent (its owner; an admin).
- Steering an experiment (pause, activate, cancel, kill, archive, delete, its job's
  priority, weight, pool and position, its resources) is for its owner or a user whose
  role updates (deletes) experiments: ClusterAdmin, WorkspaceAdmin, Editor.
- Users, agents, groups and role assignments are managed by roles that hold the
  permission (ClusterAdmin; a role on a workspace is assigned by whoever holds ASSIGN_ROLES
  there, a WorkspaceAdmin of it); a user may change their own password, username and display
  name, and any user may read any user (Determined's basic rules).
- An experiment's name, description, labels and notes, and its TensorBoard files, are
  its owner's to change or a user's with UPDATE_EXPERIMENT, as is removing some files of its
  checkpoints, its gc policy and its log retention.
- A trial's task (or its experiment's owner) says which checkpoint it used; any user reads
  the metrics of the trials that used a checkpoint.
- Access tokens: one's own are created and revoked with TokenCreator's permissions,
  anybody's with ClusterAdmin's; everybody sees their own.
- A task acts only on its own allocation and trial, reads only its own experiment (and the
  checkpoint it started from), and can create, steer or read nothing else.
- Webhooks are managed and listed with EDIT_WEBHOOKS / VIEW_WEBHOOKS, as in Determined; a
  task posts alerts (core_context.alert) for its own trial only.
- TensorBoards, commands, notebooks and shells (Determined's NSC) are in the default
  workspace, as Determined puts those launched without one: starting one needs CREATE_NSC,
  listing them VIEW_NSC; killing one, changing its priority, getting a shell (with its key)
  and opening one through the gateway's proxy (a page, a notebook's kernels, a shell's ssh)
  is for its owner or a user with UPDATE_NSC there (admins; an Editor). Its task may only
  report the address it serves on, for its own allocation, and fetch its own context.
- Generic tasks (det task create) are NSC too: starting one needs CREATE_NSC, and a child
  only of a task the caller may update; pausing, unpausing or killing one is for its owner or
  a user with UPDATE_NSC.
- Workspaces, projects and models: any user reads them and creates them; a workspace is
  changed (renamed, archived, deleted, its storage and pools set) by its owner or a user
  with UPDATE_WORKSPACE (DELETE_WORKSPACE, SET_WORKSPACE_...), a project by its owner, its
  workspace's owner or a user with UPDATE_PROJECT (DELETE_PROJECT), a model (and its
  versions) by its owner or a user with EDIT_MODEL_REGISTRY (deleting another user's:
  DELETE_OTHER_USER_MODEL_REGISTRY / _VERSION). Moving an experiment, project or model is
  for whoever may delete (edit) it where it is, and only into a workspace the caller owns,
  the default one (where everybody's experiments go), or one where a role lets them create
  that kind of thing (CREATE_EXPERIMENT, CREATE_PROJECT, CREATE_MODEL_REGISTRY).
- Binding resource pools to workspaces needs MODIFY_RP_WORKSPACE_BINDINGS (ClusterAdmin);
  any user lists the bindings. Naming the agent user and group a workspace's tasks run as
  needs SET_WORKSPACE_AGENT_USER_GROUP (ClusterAdmin), and a workspace's config policies
  MODIFY_WORKSPACE_CONFIG_POLICIES (its owner; WorkspaceAdmin).
- Running the cluster, with Determined's permissions: the master's config (view:
  VIEW_MASTER_CONFIG), the cluster-wide message, log cleanup and config changes
  (UPDATE_MASTER_CONFIG), slots (UPDATE_AGENTS) and global config policies
  (MODIFY_GLOBAL_CONFIG_POLICIES) are ClusterAdmin's; the master's log, resource use and
  the policies in force are for any user, as under Determined's basic authorization.
- The agent token is good for the agents' stream only.

A user refused gets one line naming the permission they lack. An RPC missing from the
table is refused for everybody, so a new RPC cannot be added unprotected by accident.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from determined.api.gen import v1
from determined.common import checkpoint_info, errors, structs
from pydet.master import queries
from pydet.master.auth import permissions as perms
from pydet.master.auth.callers import AgentCaller, Caller, TaskCaller, UserCaller
from pydet.master.auth.grants import Grants
from pydet.master.store.db import Database

P = perms.P

_TASK_REFUSED = "a task's token is good only for calls about its own allocation and trial"


# Facts cached per experiment: they never change once the experiment exists.
_CACHED_EXPERIMENTS = 100_000


class Lookup:
    """The few facts rules need that the request does not carry: who owns what.

    An experiment's owner, job and checkpoint storage are fixed at creation, so they are
    cached (bounded): a job update or a checkpoint report costs no table scan. A user's
    roles are ``grants``' (cached too)."""

    def __init__(self, db: Database, grants: Grants | None = None) -> None:
        self._db = db
        self.use_grants(grants or Grants(db))
        self._owners: dict[int, str] = {}
        # The owner of an experiment if it is cached (its ``get``: the dict is only cleared).
        self.cached_owner: Callable[[int], str | None] = self._owners.get
        self._jobs: dict[str, int] = {}
        self._storage: dict[int, dict[str, Any]] = {}

    def use_grants(self, grants: Grants) -> None:
        """Ask ``grants`` about roles. ``known`` and ``known_anywhere`` are its caches' own
        ``get``: the hot path asks them without a call of its own."""
        self.grants = grants
        self.known: Callable[[int], frozenset[perms.P] | None] = grants.known
        self.known_anywhere: Callable[[int], frozenset[perms.P] | None] = grants.known_anywhere

    @staticmethod
    def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
        if len(cache) >= _CACHED_EXPERIMENTS:
            cache.clear()
        cache[key] = value

    async def experiment_owner(self, experiment_id: int) -> str:
        owner = self._owners.get(experiment_id)
        if owner is not None:
            return owner
        owner = await queries.experiment_owner(self._db, experiment_id)
        if owner is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        self._remember(self._owners, experiment_id, owner)
        return owner

    async def trial_experiment(self, trial_id: int) -> int:
        experiment_id = await queries.trial_experiment(self._db, trial_id)
        if experiment_id is None:
            raise errors.NotFound(f"trial {trial_id} not found")
        return experiment_id

    async def checkpoint_experiment(self, uuid: str) -> int:
        experiment_id = await queries.checkpoint_experiment(self._db, uuid)
        if experiment_id is None:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        return experiment_id

    async def experiment_storage(self, experiment_id: int) -> dict[str, Any]:
        """The checkpoint_storage section of an experiment's config."""
        cached = self._storage.get(experiment_id)
        if cached is not None:
            return cached
        config = await queries.stored_config(self._db, experiment_id)
        if config is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        storage = json.loads(config).get("checkpoint_storage")
        found = storage if isinstance(storage, dict) else {}
        self._remember(self._storage, experiment_id, found)
        return found

    async def checkpoint_trial(self, uuid: str) -> int | None:
        """The trial a stored checkpoint belongs to; None if there is no such checkpoint."""
        return await queries.checkpoint_trial(self._db, uuid)

    async def experiment_unmanaged(self, experiment_id: int) -> bool:
        """Whether a script off the cluster reports into the experiment."""
        row = await self._db.fetch_one(
            "SELECT unmanaged FROM experiments WHERE id = ?", (experiment_id,)
        )
        return row is not None and bool(row["unmanaged"])

    async def template_owner(self, name: str) -> str | None:
        """Who set the template ``name``; None if there is none."""
        row = await self._db.fetch_one("SELECT username FROM templates WHERE name = ?", (name,))
        return None if row is None else str(row["username"])

    async def task_owner(self, task_id: str, noun: str = "") -> str:
        """Who launched a task that is not a trial, which must be a ``noun`` when one is
        given (its type in lower case: "tensorboard", "command", "notebook", "shell")."""
        found = await queries.task_owner(self._db, task_id)
        if found is None or (noun and found[1].lower() != noun):
            raise errors.NotFound(f"{noun or 'task'} {task_id} not found")
        return found[0]

    async def task_workspace(self, task_id: str) -> int:
        """The workspace a task that is not a trial was launched into."""
        found = await queries.task_workspace(self._db, task_id)
        if found is None:
            raise errors.NotFound(f"task {task_id} not found")
        return found

    def forget_owners(self) -> None:
        """A user was renamed: the owners remembered by name are read again."""
        self._owners.clear()
        self._jobs.clear()

    async def experiment_owners(self, experiment_ids: Iterable[int]) -> dict[int, str]:
        """The owners of those of the experiments that exist (one read for many)."""
        wanted = list(experiment_ids)
        owners = {i: self._owners[i] for i in wanted if i in self._owners}
        missing = [i for i in wanted if i not in owners]
        if missing:
            found = await queries.experiment_owners(self._db, missing)
            for experiment_id, owner in found.items():
                self._remember(self._owners, experiment_id, owner)
            owners.update(found)
        return owners

    async def workspace_owner(self, workspace_id: int) -> int | None:
        """Its creator's user id (None for the default workspace)."""
        found = await queries.workspace_owner(self._db, workspace_id)
        if found is None:
            raise errors.NotFound(f"workspace {workspace_id} not found")
        return found[0]

    async def project_owners(self, project_id: int) -> tuple[int | None, int | None, int]:
        """The user ids of its creator and of its workspace's, and its workspace's id."""
        found = await queries.project_owners(self._db, project_id)
        if found is None:
            raise errors.NotFound(f"project {project_id} not found")
        return found

    async def model_owner(self, identifier: str) -> tuple[int | None, str, int]:
        """The user id of its creator, its name and its workspace's id (``identifier``: its
        name or id)."""
        found = await queries.model_owner(self._db, identifier)
        if found is None:
            raise errors.NotFound(f"model {identifier!r} not found")
        return found

    async def experiment_workspace(self, experiment_id: int) -> int:
        """The workspace the experiment is in now (not cached: experiments move)."""
        found = await queries.experiment_workspace(self._db, experiment_id)
        if found is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        return found

    async def workspace_named(self, name: str) -> int:
        """The id of the workspace ``name``."""
        row = await self._db.fetch_one("SELECT id FROM workspaces WHERE name = ?", (name,))
        if row is None:
            raise errors.NotFound(f"workspace {name!r} not found")
        return int(row["id"])

    async def token_user(self, token_id: int) -> tuple[int, str]:
        """The user (id, name) an access token belongs to."""
        row = await self._db.fetch_one(
            "SELECT u.id, u.username FROM access_tokens t JOIN users u ON u.id = t.user_id"
            " WHERE t.id = ?",
            (token_id,),
        )
        if row is None:
            raise errors.NotFound(f"access token {token_id} not found")
        return int(row["id"]), str(row["username"])

    async def user_id(self, user_id: int) -> str:
        """The name of the user ``user_id``."""
        row = await self._db.fetch_one("SELECT username FROM users WHERE id = ?", (user_id,))
        if row is None:
            raise errors.NotFound(f"user {user_id} not found")
        return str(row["username"])

    async def in_group(self, user_id: int, group_id: int) -> bool:
        """Whether the user is a member of the group (``NotFound`` for no such group)."""
        row = await self._db.fetch_one(
            "SELECT g.id, m.user_id FROM user_groups g LEFT JOIN user_group_members m"
            " ON m.group_id = g.id AND m.user_id = ? WHERE g.id = ?",
            (user_id, group_id),
        )
        if row is None:
            raise errors.NotFound(f"group {group_id} not found")
        return row["user_id"] is not None

    async def job_experiment(self, job_id: str) -> int:
        cached = self._jobs.get(job_id)
        if cached is not None:
            return cached
        found = await queries.job_experiment(self._db, job_id)
        if found is None:
            raise errors.NotFound(f"job {job_id} not found")
        experiment_id, owner = found
        self._remember(self._jobs, job_id, experiment_id)
        self._remember(self._owners, experiment_id, owner)
        return experiment_id


# A rule decides a call: it raises to refuse it. One that can decide without a read does so
# at once and returns None; else it returns what to await (an ``async def`` rule always
# does). The hot path thus makes no coroutine: most calls are decided by what everybody or
# an owner holds, or by the caller's cached roles.
Rule = Callable[[Caller, Any, Lookup], Awaitable[None] | None]


def _user(caller: Caller) -> UserCaller:
    if isinstance(caller, UserCaller):
        return caller
    if isinstance(caller, TaskCaller):
        raise errors.PermissionDenied(_TASK_REFUSED)
    raise errors.PermissionDenied("the agent token is good only for the agents' stream")


# Where a permission is asked for: a workspace (its id, or how to find it, asked only when a
# role on some workspace could give the permission), or None: over everything.
Scope = int | Callable[[], Awaitable[int]] | None


def _decided(
    user: UserCaller,
    permission: perms.P,
    lookup: Lookup,
    owner: str | None,
    owned: frozenset[perms.P] = frozenset(),
    *,
    scoped: bool = False,
) -> bool | None:
    """Whether the user holds ``permission`` (over what ``owner`` owns, if given, or over
    something of which ``owned`` is what the user holds by owning it; ``scoped``: over
    something in a workspace), when that is known without a read of the store; None when
    their roles, or where the thing is, must be read first. Every call takes this path, so
    it awaits nothing: most calls are decided by what every user or owner holds, the rest by
    the roles cached for the user."""
    if permission in perms.EVERY_USER or permission in owned:
        return True
    if owner is not None and owner == user.username and permission in perms.OWNER:
        return True
    held = lookup.known(user.id)
    if held is None:
        return None
    if permission in held:
        return True
    if not scoped:
        return False
    anywhere = lookup.known_anywhere(user.id)
    return None if anywhere is None or permission in anywhere else False


async def holds(
    user: UserCaller,
    permission: perms.P,
    lookup: Lookup,
    *,
    owner: str | None = None,
    owned: frozenset[perms.P] = frozenset(),
    workspace: Scope = None,
) -> bool:
    """Whether the user holds ``permission`` (over something ``owner`` owns, if given, or
    over something of which ``owned`` is what the user holds by owning it), over everything
    or, with ``workspace``, over something in that workspace: a role assigned on the
    workspace counts there too."""
    decided = _decided(user, permission, lookup, owner, owned, scoped=workspace is not None)
    if decided is not None:
        return decided
    held = await lookup.grants.of(user.id)
    if permission in held.permissions:
        return True
    if workspace is None or permission not in held.anywhere:
        return False
    where = workspace if isinstance(workspace, int) else await workspace()
    return permission in held.in_workspace(where)


def _refuse(permission: perms.P, what: str) -> errors.PermissionDenied:
    return errors.PermissionDenied(f"only a user with {perms.label(permission)} may {what}")


async def require(caller: Caller, permission: perms.P, lookup: Lookup, what: str) -> UserCaller:
    """The calling user, if they hold ``permission``; else one line naming it."""
    user = _user(caller)
    if not await holds(user, permission, lookup):
        raise _refuse(permission, what)
    return user


def _owner_refusal(kind: str, key: Any, owner: str, permission: perms.P, what: str) -> str:
    return (
        f"only the owner of {kind} {key} ({owner or 'unknown'}) or a user with "
        f"{perms.label(permission)} may {what} it"
    )


async def _owns(
    caller: Caller,
    experiment_id: int,
    lookup: Lookup,
    what: str,
    permission: perms.P = P.UPDATE_EXPERIMENT,
) -> None:
    """The experiment's owner (when owners hold ``permission``), or a user whose roles give
    it, cluster-wide or on the experiment's workspace. Every steering call comes here: the
    owner and a cluster-wide role are decided without a call of its own or a read."""
    if type(caller) is not UserCaller:
        _user(caller)
    user: UserCaller = caller  # type: ignore[assignment]
    owner = await lookup.experiment_owner(experiment_id)
    if owner == user.username and permission in perms.OWNER:
        return
    held = lookup.known(user.id)
    if held is not None:
        if permission in held:
            return
        anywhere = lookup.known_anywhere(user.id)
        decided = None if anywhere is None or permission in anywhere else False
    else:
        decided = _decided(user, permission, lookup, owner, scoped=True)
    if decided is None:
        decided = await holds(
            user,
            permission,
            lookup,
            workspace=functools.partial(lookup.experiment_workspace, experiment_id),
        )
    if not decided:
        raise _experiment_refusal(experiment_id, owner, permission, what)


def _experiment_refusal(
    experiment_id: int, owner: str, permission: perms.P, what: str
) -> errors.PermissionDenied:
    return errors.PermissionDenied(
        f"only the owner of experiment {experiment_id} ({owner or 'unknown'}) or a user"
        f" with {perms.label(permission)} may {what} it"
    )


# -- the rule kinds -----------------------------------------------------------------------------


def anyone(caller: Caller, message: Any, lookup: Lookup) -> None:
    """Login: the one call open to callers without a token (checked elsewhere)."""


def user(caller: Caller, message: Any, lookup: Lookup) -> None:
    if type(caller) is not UserCaller:
        _user(caller)


def signed_in(caller: Caller, message: Any, lookup: Lookup) -> None:
    """Users and tasks (harmless facts about the master)."""
    if isinstance(caller, AgentCaller):
        _user(caller)


def needs(permission: perms.P, what: str) -> Rule:
    """Users who hold ``permission`` (their roles', or everybody's). Most calls come here:
    whether everybody holds it is known when the table is made, and a user's cached roles
    decide the rest without a call of its own."""
    if permission in perms.EVERY_USER:
        return user
    refusal = f"only a user with {perms.label(permission)} may {what}"

    def rule(caller: Caller, message: Any, lookup: Lookup) -> Awaitable[None] | None:
        try:
            held = lookup.known(caller.id)  # type: ignore[union-attr]
        except AttributeError:  # only a user has an id: a task or an agent
            _user(caller)
            raise
        if held is None:
            return _held_then(lookup, caller.id, permission, refusal)  # type: ignore[union-attr]
        if permission not in held:
            raise errors.PermissionDenied(refusal)
        return None

    return rule


async def _held_then(lookup: Lookup, user_id: int, permission: perms.P, refusal: str) -> None:
    """``needs``' rule for a user whose roles are not cached yet: read them."""
    if permission not in await lookup.grants.held(user_id):
        raise errors.PermissionDenied(refusal)


async def set_password(caller: Caller, message: Any, lookup: Lookup) -> None:
    u = _user(caller)
    if message.username != u.username:
        await require(caller, P.ADMINISTRATE_USER, lookup, "change another user's password")


async def patch_user(caller: Caller, message: Any, lookup: Lookup) -> None:
    """A user may change their own username and display name (Determined's form, by
    user_id); anything else, and anyone else, needs ADMINISTRATE_USER (pydet's older form,
    by name, too)."""
    u = _user(caller)
    change = message.user
    own_profile_only = (
        bool(message.user_id)
        and message.user_id == u.id
        and (
            change is None
            or (
                change.admin is None
                and change.active is None
                and change.remote is None
                and change.agent_user_group is None
            )
        )
    )
    if not own_profile_only:
        await require(
            caller,
            P.ADMINISTRATE_USER,
            lookup,
            "change another user, or who is an admin, active or remote, or a user's agent "
            "user and group",
        )


def owner_of_experiment(what: str, permission: perms.P = P.UPDATE_EXPERIMENT) -> Rule:
    """The experiment's owner or a user with ``permission`` (``_owns``); decided at once
    when its owner is cached and the caller owns it or holds ``permission`` cluster-wide."""
    by_owner = permission in perms.OWNER

    def rule(caller: Caller, message: Any, lookup: Lookup) -> Awaitable[None] | None:
        experiment_id = int(message.experiment_id)
        if type(caller) is UserCaller:
            owner = lookup.cached_owner(experiment_id)
            if owner is not None:
                if by_owner and owner == caller.username:
                    return None
                held = lookup.known(caller.id)
                if held is not None:
                    if permission in held:
                        return None
                    anywhere = lookup.known_anywhere(caller.id)
                    if anywhere is not None and permission not in anywhere:
                        raise _experiment_refusal(experiment_id, owner, permission, what)
        return _owns(caller, experiment_id, lookup, what, permission)

    return rule


async def create_experiment(caller: Caller, message: Any, lookup: Lookup) -> None:
    await require(caller, P.CREATE_EXPERIMENT, lookup, "create experiments")
    if message.parent_id:
        await _owns(caller, int(message.parent_id), lookup, "fork")


async def patch_experiment(caller: Caller, message: Any, lookup: Lookup) -> None:
    _user(caller)
    if message.experiment is not None and message.experiment.id:  # else refused as invalid
        await _owns(caller, int(message.experiment.id), lookup, "change")


async def continue_experiment(caller: Caller, message: Any, lookup: Lookup) -> None:
    # Determined names the experiment ``id`` in this request.
    await _owns(caller, int(message.id), lookup, "continue")


def owner_of_trial(what: str, permission: perms.P = P.UPDATE_EXPERIMENT) -> Rule:
    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        _user(caller)
        exp = await lookup.trial_experiment(int(message.trial_id))
        await _owns(caller, exp, lookup, what, permission)

    return rule


async def update_jobs(caller: Caller, message: Any, lookup: Lookup) -> None:
    """An experiment's job: its owner or an admin. A notebook's, shell's, command's or
    TensorBoard's (its job id is the task's id): as for its own ``set priority``."""
    _user(caller)
    for update in message.updates:
        # Jobs named by ahead_of/behind_of need no rights: the queue checks they exist.
        try:
            experiment_id = await lookup.job_experiment(update.job_id)
        except errors.NotFound:
            try:
                owner = await lookup.task_owner(update.job_id)
            except errors.NotFound:
                raise errors.NotFound(f"job {update.job_id} not found") from None
            await owns_task(caller, update.job_id, owner, lookup, "reorder")
            continue
        await _owns(caller, experiment_id, lookup, "reorder")


def owner_of_template(field: str, permission: perms.P) -> Rule:
    """CREATE_TEMPLATES for a new template; ``permission`` over an existing one (its owner
    holds it)."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        u = _user(caller)
        name = message.template.name if field == "template" and message.template else ""
        name = name or str(getattr(message, field, "") or "")
        owner = await lookup.template_owner(name) if name else None
        if owner is None:
            await require(caller, P.CREATE_TEMPLATES, lookup, "create templates")
        elif not await holds(u, permission, lookup, owner=owner):
            raise errors.PermissionDenied(
                _owner_refusal("template", repr(name), owner, permission, "change")
            )

    return rule


def _own_task(caller: Caller) -> TaskCaller | None:
    return caller if isinstance(caller, TaskCaller) else None


def task_of_trial(field: str = "trial_id") -> Rule:
    """The trial's own task, or (for reporting from outside a task) its experiment's owner."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        await _task_or_owner_of_trial(caller, int(getattr(message, field)), lookup)

    return rule


async def _task_or_owner_of_trial(caller: Caller, trial_id: int, lookup: Lookup) -> None:
    task = _own_task(caller)
    if task is not None:
        if trial_id != task.trial_id:
            raise errors.PermissionDenied(
                f"{_TASK_REFUSED}: this task is trial {task.trial_id}, not trial {trial_id}"
            )
        return
    _user(caller)
    exp = await lookup.trial_experiment(trial_id)
    await _owns(caller, exp, lookup, "report for a trial of")


async def report_trial_source_info(caller: Caller, message: Any, lookup: Lookup) -> None:
    """As a report: the trial's own task, or its experiment's owner."""
    info = message.trial_source_info
    await _task_or_owner_of_trial(caller, int(info.trial_id) if info is not None else 0, lookup)


def reader_or_task_of_trial(field: str) -> Rule:
    """A user who may view experiments, or the trial's own task."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        task = _own_task(caller)
        if task is None:
            await require(caller, P.VIEW_EXPERIMENT_METADATA, lookup, "view experiments")
        elif int(getattr(message, field)) != task.trial_id:
            raise errors.PermissionDenied(f"{_TASK_REFUSED}: this task is trial {task.trial_id}")

    return rule


async def task_of_allocation(caller: Caller, message: Any, lookup: Lookup) -> None:
    task = _own_task(caller)
    if task is None:
        _user(caller)
        raise errors.PermissionDenied("only the allocation's own task may make this call")
    if message.allocation_id != task.allocation_id:
        raise errors.PermissionDenied(
            f"{_TASK_REFUSED}: this task is allocation {task.allocation_id}"
        )


def reader_or_task_of_experiment(
    field: str = "experiment_id", permission: perms.P = P.VIEW_EXPERIMENT_METADATA
) -> Rule:
    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        task = _own_task(caller)
        if task is None:
            await require(caller, permission, lookup, "view experiments")
        elif int(getattr(message, field)) != task.experiment_id:
            raise errors.PermissionDenied(
                f"{_TASK_REFUSED}: this task belongs to experiment {task.experiment_id}"
            )

    return rule


async def report_checkpoint(caller: Caller, message: Any, lookup: Lookup) -> None:
    """A trial's own task, or the owner of an unmanaged run's experiment (its script
    reports with the user's session); either way into the experiment's own storage."""
    ckpt = message.checkpoint
    task = _own_task(caller)
    if task is None:
        _user(caller)
    if ckpt is None:
        return  # the servicer refuses it as an invalid argument
    # Determined's shape: the trial and experiment are the checkpoint's training metadata.
    said_trial, said_experiment = (
        checkpoint_info.trial_id(ckpt),
        checkpoint_info.experiment_id(ckpt),
    )
    if task is None:
        experiment_id = await lookup.trial_experiment(said_trial)
        if not await lookup.experiment_unmanaged(experiment_id):
            raise errors.PermissionDenied("only a trial's own task may report its checkpoints")
        await _owns(caller, experiment_id, lookup, "report a checkpoint of")
        if said_experiment and said_experiment != experiment_id:
            raise errors.PermissionDenied(
                f"trial {said_trial} belongs to experiment {experiment_id}, not {said_experiment}"
            )
        trial_id, refused = said_trial, "refused"
    else:
        if said_trial != task.trial_id or (
            ckpt.allocation_id and ckpt.allocation_id != task.allocation_id
        ):
            raise errors.PermissionDenied(
                f"{_TASK_REFUSED}: this task is trial {task.trial_id}, not trial {said_trial}"
            )
        if said_experiment and said_experiment != task.experiment_id:
            raise errors.PermissionDenied(
                f"{_TASK_REFUSED}: this task belongs to experiment {task.experiment_id}"
            )
        experiment_id, trial_id, refused = task.experiment_id, task.trial_id, _TASK_REFUSED
    # The master removes a checkpoint's files where its record says they are (deletion,
    # retention): a record must name a directory in the experiment's own storage.
    if not ckpt.uuid or ckpt.uuid in (".", "..") or any(c in ckpt.uuid for c in "/\\\0"):
        raise errors.PermissionDenied(f"{ckpt.uuid!r} is not a checkpoint id")
    storage = structs.python(ckpt.storage)
    if storage and storage != await lookup.experiment_storage(experiment_id):
        raise errors.PermissionDenied(
            f"{refused}: its checkpoints go to its experiment's checkpoint_storage"
        )
    # A report replaces the record of the same uuid: it must not take over another trial's.
    owner = await lookup.checkpoint_trial(ckpt.uuid)
    if owner is not None and owner != trial_id:
        raise errors.PermissionDenied(f"{refused}: checkpoint {ckpt.uuid} belongs to another trial")


async def get_checkpoint(caller: Caller, message: Any, lookup: Lookup) -> None:
    task = _own_task(caller)
    if task is None:
        await require(caller, P.VIEW_EXPERIMENT_ARTIFACTS, lookup, "view checkpoints")
        return
    if message.uuid and message.uuid == task.start_checkpoint:
        return
    if await lookup.checkpoint_experiment(message.uuid) != task.experiment_id:
        raise errors.PermissionDenied(
            f"{_TASK_REFUSED}: checkpoint {message.uuid} belongs to another experiment"
        )


async def get_checkpoints(caller: Caller, message: Any, lookup: Lookup) -> None:
    task = _own_task(caller)
    if task is None:
        await require(caller, P.VIEW_EXPERIMENT_ARTIFACTS, lookup, "view checkpoints")
        return
    if message.trial_id and message.trial_id != task.trial_id:
        exp = await lookup.trial_experiment(int(message.trial_id))
    else:
        exp = int(message.experiment_id) or task.experiment_id
    if exp != task.experiment_id:
        raise errors.PermissionDenied(
            f"{_TASK_REFUSED}: this task belongs to experiment {task.experiment_id}"
        )


async def delete_checkpoints(caller: Caller, message: Any, lookup: Lookup) -> None:
    await _may_delete_checkpoints(caller, message.uuids, lookup)


async def remove_checkpoint_files(caller: Caller, message: Any, lookup: Lookup) -> None:
    """As deleting them: see ``delete_checkpoints``."""
    await _may_delete_checkpoints(caller, message.checkpoint_uuids, lookup)


async def _may_delete_checkpoints(caller: Caller, uuids: Iterable[str], lookup: Lookup) -> None:
    """The owner of each checkpoint's experiment or a user with UPDATE_EXPERIMENT, or a task
    of that experiment."""
    task = _own_task(caller)
    if task is None:
        _user(caller)
    experiments = {await lookup.checkpoint_experiment(u) for u in uuids}
    for exp in sorted(experiments):
        if task is not None:
            if exp != task.experiment_id:
                raise errors.PermissionDenied(
                    f"{_TASK_REFUSED}: this task belongs to experiment {task.experiment_id}"
                )
        else:
            await _owns(caller, exp, lookup, "delete checkpoints of", P.UPDATE_EXPERIMENT)


async def post_checkpoint_metadata(caller: Caller, message: Any, lookup: Lookup) -> None:
    """The owner of the checkpoint's experiment (or an admin); tasks have no need to."""
    _user(caller)
    uuid = message.checkpoint.uuid if message.checkpoint is not None else ""
    if uuid:  # else the servicer refuses it as an invalid argument
        await _owns(
            caller,
            await lookup.checkpoint_experiment(uuid),
            lookup,
            "change the checkpoint metadata of",
            P.UPDATE_EXPERIMENT,
        )


def owner_of_task(field: str, noun: str, what: str) -> Rule:
    """The owner of the task named by ``field`` (a ``noun``: "command", "notebook", ...) or
    a user with UPDATE_NSC."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        _user(caller)
        task_id = str(getattr(message, field))
        owner = await lookup.task_owner(task_id, noun)
        await owns_task(caller, task_id, owner, lookup, what, kind=noun)

    return rule


async def owns_task(
    caller: Caller, task_id: str, owner: str, lookup: Lookup, what: str, *, kind: str = "task"
) -> None:
    """A task's owner, or a user whose role updates notebooks, shells, commands and
    TensorBoards in the workspace it was launched into, or everywhere (the gateway's proxy
    checks the same). The refusal does not say whose it is."""
    user = _user(caller)
    workspace = functools.partial(lookup.task_workspace, task_id)
    if not await holds(user, P.UPDATE_NSC, lookup, owner=owner, workspace=workspace):
        raise errors.PermissionDenied(
            f"only the owner of {kind} {task_id} or a user with {perms.label(P.UPDATE_NSC)}"
            f" may {what} it"
        )


def nsc(permission: perms.P, what: str) -> Rule:
    """Users who hold ``permission`` over the TensorBoards, commands, notebooks and shells of
    the workspace the request names (``-w``), else the default one's (by a role there or
    cluster-wide; everybody's). As ``needs``, the usual call is decided without a call of its
    own."""
    everybody = permission in perms.EVERY_USER

    async def read(user: UserCaller, message: Any, lookup: Lookup) -> None:
        workspace = int(getattr(message, "workspace_id", 0) or DEFAULT_WORKSPACE)
        if not await holds(user, permission, lookup, workspace=workspace):
            raise _refuse(permission, f"{what} in workspace {workspace}")

    def rule(caller: Caller, message: Any, lookup: Lookup) -> Awaitable[None] | None:
        if type(caller) is not UserCaller:
            _user(caller)
        if everybody:
            return None
        held = lookup.known(caller.id)  # type: ignore[union-attr]
        if held is not None and permission in held:
            return None
        return read(caller, message, lookup)  # type: ignore[arg-type]

    return rule


async def create_generic_task(caller: Caller, message: Any, lookup: Lookup) -> None:
    """CREATE_NSC, and a child only of a task the caller may update (pausing or killing the
    parent reaches its children)."""
    pending = _CREATE_TASKS(caller, message, lookup)
    if pending is not None:
        await pending
    if message.parent_id:
        parent = str(message.parent_id)
        owner = await lookup.task_owner(parent, "generic")
        await owns_task(caller, parent, owner, lookup, "add a child to", kind="task")


def workspace_reader(what: str) -> Rule:
    """Users who may view the workspace named by ``workspace_id`` (VIEW_WORKSPACE, by a role
    there or cluster-wide; everybody's)."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        user = _user(caller)
        workspace_id = int(message.workspace_id)
        await lookup.workspace_owner(workspace_id)  # NotFound first
        if not await holds(user, P.VIEW_WORKSPACE, lookup, workspace=workspace_id):
            raise _refuse(P.VIEW_WORKSPACE, f"{what} workspace {workspace_id}")

    return rule


_CREATE_TASKS = nsc(P.CREATE_NSC, "start tasks")


def own_task_or_owner(field: str, noun: str) -> Rule:
    """The task itself (its own allocation's token), or its owner or a user with UPDATE_NSC: a
    task's own context, a notebook's report of its idleness."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        task_id = str(getattr(message, field))
        task = _own_task(caller)
        if task is None:
            _user(caller)
            owner = await lookup.task_owner(task_id, noun)
            await owns_task(caller, task_id, owner, lookup, "act for", kind=noun or "task")
        elif task_id != task.task_id:
            raise errors.PermissionDenied(f"{_TASK_REFUSED}: this task is {task.task_id}")

    return rule


# -- access tokens, groups, roles ---------------------------------------------------------------


async def post_access_token(caller: Caller, message: Any, lookup: Lookup) -> None:
    """One's own token with CREATE_TOKEN (TokenCreator), another's with CREATE_OTHER_TOKEN."""
    u = _user(caller)
    if int(message.user_id) == u.id:
        await require(caller, P.CREATE_TOKEN, lookup, "create their own access tokens")
    else:
        await lookup.user_id(int(message.user_id))
        await require(caller, P.CREATE_OTHER_TOKEN, lookup, "create another user's access tokens")


async def get_access_tokens(caller: Caller, message: Any, lookup: Lookup) -> None:
    """Everybody sees their own tokens; another user's need VIEW_OTHER_TOKEN (the list of
    everybody's is cut down to one's own without it)."""
    u = _user(caller)
    if message.username and message.username != u.username:
        await require(caller, P.VIEW_OTHER_TOKEN, lookup, "see another user's access tokens")


async def patch_access_token(caller: Caller, message: Any, lookup: Lookup) -> None:
    """One's own token with UPDATE_TOKEN (TokenCreator), another's with ADMINISTRATE_TOKEN."""
    u = _user(caller)
    owner_id, _ = await lookup.token_user(int(message.token_id))
    if owner_id == u.id:
        await require(caller, P.UPDATE_TOKEN, lookup, "change their own access tokens")
    else:
        await require(caller, P.ADMINISTRATE_TOKEN, lookup, "change another user's access tokens")


def member_or(permission: perms.P, what: str) -> Rule:
    """The group's members, or users with ``permission``."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        u = _user(caller)
        if not await lookup.in_group(u.id, int(message.group_id)):
            await require(caller, permission, lookup, what)

    return rule


async def get_user_roles(caller: Caller, message: Any, lookup: Lookup) -> None:
    u = _user(caller)
    if int(message.user_id) != u.id:
        await require(caller, P.ASSIGN_ROLES, lookup, "see another user's roles")


async def get_roles_by_id(caller: Caller, message: Any, lookup: Lookup) -> None:
    """Roles one holds; any role with ASSIGN_ROLES or UPDATE_ROLES (as Determined)."""
    u = _user(caller)
    held = await lookup.grants.held(u.id)
    if P.ASSIGN_ROLES in held or P.UPDATE_ROLES in held:
        return
    own = await lookup.grants.roles_anywhere(u.id)
    for role_id in message.role_ids:
        if int(role_id) not in own:
            raise errors.PermissionDenied(
                f"only a user with {perms.label(P.ASSIGN_ROLES)} or"
                f" {perms.label(P.UPDATE_ROLES)} may see roles they do not hold"
            )


async def assign_roles(caller: Caller, message: Any, lookup: Lookup) -> None:
    """AssignRoles and RemoveAssignments: ASSIGN_ROLES where each assignment applies,
    cluster-wide for a cluster-wide one, on the workspace (or cluster-wide) for one on a
    workspace, as Determined asks."""
    u = _user(caller)
    scopes = {
        a.role_assignment.scope_workspace_id
        for a in (*message.user_role_assignments, *message.group_role_assignments)
        if a.role_assignment is not None
    }
    for workspace_id in sorted(scopes, key=lambda w: -1 if w is None else w) or [None]:
        if workspace_id is None:
            await require(caller, P.ASSIGN_ROLES, lookup, "assign roles cluster-wide")
            continue
        await lookup.workspace_owner(workspace_id)  # NotFound first
        if not await holds(u, P.ASSIGN_ROLES, lookup, workspace=workspace_id):
            raise _refuse(P.ASSIGN_ROLES, f"assign roles in workspace {workspace_id}")


async def agent(caller: Caller, message: Any, lookup: Lookup) -> None:
    if not isinstance(caller, AgentCaller):
        raise errors.PermissionDenied("only an agent with the cluster's agent token may connect")


# -- workspaces, projects, models and moves -----------------------------------------------------

# The default workspace: everybody's experiments go there.
DEFAULT_WORKSPACE = 1


def _owned_by(user: UserCaller, owner_id: int | None, as_owner: frozenset[perms.P]) -> frozenset[P]:
    """What the user holds over a thing whose creator is ``owner_id``."""
    return as_owner if owner_id is not None and owner_id == user.id else frozenset()


async def _may(
    user: UserCaller,
    permission: perms.P,
    lookup: Lookup,
    owned: frozenset[perms.P],
    workspace: int,
    refusal: str,
) -> None:
    """``permission`` over something in ``workspace`` (``owned``: what the user holds over
    it by owning it)."""
    if not await holds(user, permission, lookup, owned=owned, workspace=workspace):
        raise errors.PermissionDenied(refusal)


def owner_of_workspace(
    what: str, permission: perms.P = P.UPDATE_WORKSPACE, field: str = "id"
) -> Rule:
    """The workspace the request's ``field`` names: its owner (for what owners hold), or a
    user holding ``permission`` there or cluster-wide."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        u = _user(caller)
        workspace_id = int(getattr(message, field))
        owned = _owned_by(u, await lookup.workspace_owner(workspace_id), perms.WORKSPACE_OWNER)
        await _may(
            u,
            permission,
            lookup,
            owned,
            workspace_id,
            f"only the owner of workspace {workspace_id} or a user with "
            f"{perms.label(permission)} may {what} it",
        )

    return rule


async def patch_workspace(caller: Caller, message: Any, lookup: Lookup) -> None:
    """As Determined asks, by what changes: its name UPDATE_WORKSPACE, its checkpoint storage
    SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG, its default pools
    SET_WORKSPACE_DEFAULT_RESOURCE_POOL (the workspace's owner holds them all)."""
    change = message.workspace or v1.PatchWorkspace()
    needed: list[tuple[perms.P, str]] = []
    if change.checkpoint_storage_config is not None:
        needed.append((P.SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG, "set the checkpoint storage of"))
    if (
        change.default_compute_pool
        or change.default_aux_pool
        or change.default_compute_resource_pool is not None
        or change.default_aux_resource_pool is not None
    ):
        needed.append((P.SET_WORKSPACE_DEFAULT_RESOURCE_POOL, "set the default pools of"))
    if change.name is not None or not needed:
        needed.insert(0, (P.UPDATE_WORKSPACE, "change"))
    for permission, what in needed:
        pending = owner_of_workspace(what, permission)(caller, message, lookup)
        if pending is not None:
            await pending


def workspace_identity(rule: Rule) -> Rule:
    """``rule``, and naming the agent user and group a workspace's tasks run as (which decides
    what they may read and write on the agents) needs SET_WORKSPACE_AGENT_USER_GROUP."""

    async def checked(caller: Caller, message: Any, lookup: Lookup) -> None:
        pending = rule(caller, message, lookup)
        if pending is not None:
            await pending
        change = getattr(message, "workspace", message)
        if getattr(change, "agent_user_group", None) is not None:
            await require(
                caller,
                P.SET_WORKSPACE_AGENT_USER_GROUP,
                lookup,
                "set the agent user and group of a workspace",
            )

    return checked


async def _owns_project(
    caller: Caller, project_id: int, lookup: Lookup, what: str, permission: perms.P
) -> None:
    u = _user(caller)
    owner, workspace_owner, workspace_id = await lookup.project_owners(project_id)
    owned = _owned_by(u, owner, perms.PROJECT_OWNER) | _owned_by(
        u, workspace_owner, perms.WORKSPACE_OWNER
    )
    await _may(
        u,
        permission,
        lookup,
        owned,
        workspace_id,
        f"only the owner of project {project_id} (or of its workspace) or a user with "
        f"{perms.label(permission)} may {what} it",
    )


def owner_of_project(what: str, field: str = "id", permission: perms.P = P.UPDATE_PROJECT) -> Rule:
    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        await _owns_project(caller, int(getattr(message, field)), lookup, what, permission)

    return rule


async def _into_workspace(
    user: UserCaller, workspace_id: int, lookup: Lookup, what: str, permission: perms.P
) -> None:
    """Things move only into a workspace the user owns, the default one, or one where a
    role gives them ``permission``, cluster-wide or on that workspace (what every user holds
    does not count here)."""
    if workspace_id == DEFAULT_WORKSPACE:
        return
    if await lookup.workspace_owner(workspace_id) == user.id:
        return
    held = lookup.known(user.id)
    if held is not None and permission in held:
        return
    if permission not in await lookup.grants.held_in(user.id, workspace_id):
        raise errors.PermissionDenied(
            f"only the owner of workspace {workspace_id} or a user with "
            f"{perms.label(permission)} in it may move {what} into it"
        )


async def move_experiments(caller: Caller, message: Any, lookup: Lookup) -> None:
    """MoveExperiment and MoveExperiments: the experiments' owner (or a user with
    DELETE_EXPERIMENT, as Determined asks where they are), into a project of a workspace
    the caller may create experiments in (``_into_workspace``)."""
    u = _user(caller)
    ids = (
        [int(message.experiment_id)]
        if hasattr(message, "experiment_id")
        else [int(i) for i in message.experiment_ids]
    )
    owners = await lookup.experiment_owners(ids)
    if hasattr(message, "experiment_id") and ids[0] not in owners:
        raise errors.NotFound(f"experiment {ids[0]} not found")
    for other in sorted(i for i, owner in owners.items() if owner != u.username):
        where = functools.partial(lookup.experiment_workspace, other)
        if not await holds(u, P.DELETE_EXPERIMENT, lookup, workspace=where):
            raise errors.PermissionDenied(
                _owner_refusal("experiment", other, owners[other], P.DELETE_EXPERIMENT, "move")
            )
    _, _, workspace_id = await lookup.project_owners(int(message.destination_project_id))
    await _into_workspace(u, workspace_id, lookup, "experiments", P.CREATE_EXPERIMENT)


async def move_project(caller: Caller, message: Any, lookup: Lookup) -> None:
    """The project's owner or a user with DELETE_PROJECT (Determined's basic and RBAC
    rules), into a workspace the caller may create projects in."""
    u = _user(caller)
    project_id = int(message.project_id)
    owner, _, workspace_id = await lookup.project_owners(project_id)
    await _may(
        u,
        P.DELETE_PROJECT,
        lookup,
        _owned_by(u, owner, perms.PROJECT_OWNER),
        workspace_id,
        f"only the owner of project {project_id} or a user with "
        f"{perms.label(P.DELETE_PROJECT)} may move it",
    )
    destination = int(message.destination_workspace_id)
    await lookup.workspace_owner(destination)  # NotFound first
    await _into_workspace(u, destination, lookup, "projects", P.CREATE_PROJECT)


def owner_of_model(
    what: str, permission: perms.P = P.EDIT_MODEL_REGISTRY, others: perms.P | None = None
) -> Rule:
    """The model's owner or a user with ``permission`` (and, for another user's model, with
    ``others`` first, as Determined asks to delete one); and a model moved to a workspace
    goes only into one the caller may create models in, as experiments do."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        u = _user(caller)
        owner, name, workspace_id = await lookup.model_owner(str(message.model_name))
        owned = _owned_by(u, owner, perms.MODEL_OWNER)
        for needed in (permission,) if owned or others is None else (others, permission):
            await _may(
                u,
                needed,
                lookup,
                owned,
                workspace_id,
                f"only the owner of model {name!r} or a user with {perms.label(needed)} "
                f"may {what} it",
            )
        destination = getattr(message, "destination_workspace_id", None)
        patch = getattr(message, "model", None)
        if patch is not None and patch.workspace_id is not None:
            destination = patch.workspace_id
        elif patch is not None and patch.workspace_name:
            destination = await lookup.workspace_named(patch.workspace_name)
        if destination:
            await lookup.workspace_owner(int(destination))  # NotFound first
            await _into_workspace(u, int(destination), lookup, "models", P.CREATE_MODEL_REGISTRY)

    return rule


# -- the table ----------------------------------------------------------------------------------


def rules_table() -> dict[str, Rule]:
    """The rule of every RPC, made from ``permissions`` as they are now (a rule knows when
    it is made whether everybody holds its permission)."""
    _VIEW_EXP = needs(P.VIEW_EXPERIMENT_METADATA, "view experiments")
    _VIEW_ARTIFACTS = needs(P.VIEW_EXPERIMENT_ARTIFACTS, "view experiments' logs and checkpoints")
    _MANAGE_USERS = needs(P.ADMINISTRATE_USER, "create users")
    _AGENTS = needs(P.UPDATE_AGENTS, "enable or disable agents")
    _GROUPS = needs(P.UPDATE_GROUP, "create, change or delete user groups")
    _VIEW_WORKSPACES = needs(P.VIEW_WORKSPACE, "view workspaces")
    _VIEW_PROJECTS = needs(P.VIEW_PROJECT, "view projects")
    _VIEW_MODELS = needs(P.VIEW_MODEL_REGISTRY, "view the model registry")
    _MASTER_CONFIG = needs(P.UPDATE_MASTER_CONFIG, "change the master's config")
    _CLUSTER_MESSAGE = needs(P.UPDATE_MASTER_CONFIG, "see or set the cluster-wide message")
    _SLOTS = needs(P.UPDATE_AGENTS, "enable or disable slots")
    _USAGE = needs(P.VIEW_CLUSTER_USAGE, "view the cluster's resource use")
    _POLICIES = needs(P.MODIFY_GLOBAL_CONFIG_POLICIES, "set or delete config policies")
    _BINDINGS = needs(P.MODIFY_RP_WORKSPACE_BINDINGS, "bind resource pools to workspaces")

    return {
        "/v1.Determined/GetMaster": signed_in,
        "/v1.Determined/Login": anyone,
        "/v1.Determined/Logout": user,
        "/v1.Determined/GetMe": user,
        "/v1.Determined/GetUsers": user,
        "/v1.Determined/PostUser": _MANAGE_USERS,
        "/v1.Determined/SetUserPassword": set_password,
        "/v1.Determined/PatchUser": patch_user,
        "/v1.Determined/GetUser": user,
        "/v1.Determined/GetUserByUsername": user,
        "/v1.Determined/CreateExperiment": create_experiment,
        "/v1.Determined/GetExperiments": _VIEW_EXP,
        "/v1.Determined/GetExperiment": _VIEW_EXP,
        "/v1.Determined/GetExperimentTrials": _VIEW_EXP,
        "/v1.Determined/GetExperimentContext": reader_or_task_of_experiment(
            permission=P.VIEW_EXPERIMENT_ARTIFACTS
        ),
        "/v1.Determined/ActivateExperiment": owner_of_experiment("activate"),
        "/v1.Determined/PauseExperiment": owner_of_experiment("pause"),
        "/v1.Determined/CancelExperiment": owner_of_experiment("cancel"),
        "/v1.Determined/KillExperiment": owner_of_experiment("kill"),
        "/v1.Determined/ArchiveExperiment": owner_of_experiment("archive"),
        "/v1.Determined/UnarchiveExperiment": owner_of_experiment("unarchive"),
        "/v1.Determined/DeleteExperiment": owner_of_experiment("delete", P.DELETE_EXPERIMENT),
        "/v1.Determined/ContinueExperiment": continue_experiment,
        "/v1.Determined/PatchExperiment": patch_experiment,
        "/v1.Determined/PutExperimentLabel": owner_of_experiment("label"),
        "/v1.Determined/DeleteExperimentLabel": owner_of_experiment("label"),
        "/v1.Determined/DeleteTensorboardFiles": owner_of_experiment(
            "delete the TensorBoard files of"
        ),
        "/v1.Determined/GetTrial": _VIEW_EXP,
        "/v1.Determined/KillTrial": owner_of_trial("kill a trial of"),
        "/v1.Determined/CreateTrial": owner_of_experiment("add a trial to"),
        "/v1.Determined/StartTrial": owner_of_trial(
            "start a trial of", P.UPDATE_EXPERIMENT_METADATA
        ),
        "/v1.Determined/PatchTrial": owner_of_trial("end a trial of", P.UPDATE_EXPERIMENT_METADATA),
        "/v1.Determined/PostRunMetadata": task_of_trial("run_id"),
        "/v1.Determined/GetRunMetadata": reader_or_task_of_trial("run_id"),
        "/v1.Determined/TrialLogs": _VIEW_ARTIFACTS,
        "/v1.Determined/TaskLogs": _VIEW_ARTIFACTS,
        "/v1.Determined/GetTrialMetrics": _VIEW_EXP,
        "/v1.Determined/GetMetrics": _VIEW_EXP,
        "/v1.Determined/ReportTrialSourceInfo": report_trial_source_info,
        "/v1.Determined/GetTrialMetricsByCheckpoint": _VIEW_EXP,
        "/v1.Determined/GetAgents": user,
        "/v1.Determined/EnableAgent": _AGENTS,
        "/v1.Determined/DisableAgent": _AGENTS,
        "/v1.Determined/GetResourcePools": user,
        "/v1.Determined/GetJobs": user,
        "/v1.Determined/GetTasks": user,
        "/v1.Determined/UpdateJobQueue": update_jobs,
        "/v1.Determined/SetExperimentResources": owner_of_experiment("change the resources of"),
        "/v1.Determined/PreviewSearch": needs(P.CREATE_EXPERIMENT, "preview searches"),
        "/v1.Determined/ReportTrialMetrics": task_of_trial(),
        "/v1.Determined/ReportTrialProgress": task_of_trial(),
        "/v1.Determined/ReportTrialEarlyExit": task_of_trial(),
        "/v1.Determined/GetBestValidation": reader_or_task_of_experiment(),
        "/v1.Determined/GetCurrentSearcherOperation": task_of_trial(),
        "/v1.Determined/CompleteSearcherOperation": task_of_trial(),
        "/v1.Determined/AllocationAllGather": task_of_allocation,
        "/v1.Determined/AllocationPreemptionSignal": task_of_allocation,
        "/v1.Determined/AckAllocationPreemptionSignal": task_of_allocation,
        "/v1.Determined/MarkAllocationResourcesDaemon": task_of_allocation,
        "/v1.Determined/ReportCheckpoint": report_checkpoint,
        "/v1.Determined/GetCheckpoint": get_checkpoint,
        "/v1.Determined/GetCheckpoints": get_checkpoints,
        "/v1.Determined/DeleteCheckpoints": delete_checkpoints,
        "/v1.Determined/CheckpointsRemoveFiles": remove_checkpoint_files,
        "/v1.Determined/PostCheckpointMetadata": post_checkpoint_metadata,
        "/v1.Determined/PostWebhook": needs(P.EDIT_WEBHOOKS, "create webhooks"),
        "/v1.Determined/GetWebhooks": needs(P.VIEW_WEBHOOKS, "list webhooks"),
        "/v1.Determined/DeleteWebhook": needs(P.EDIT_WEBHOOKS, "delete webhooks"),
        "/v1.Determined/PostWebhookEventData": task_of_trial(),
        "/v1.Determined/GetTemplates": needs(P.VIEW_TEMPLATES, "view templates"),
        "/v1.Determined/GetTemplate": needs(P.VIEW_TEMPLATES, "view templates"),
        "/v1.Determined/PutTemplate": owner_of_template("template", P.UPDATE_TEMPLATES),
        "/v1.Determined/DeleteTemplate": owner_of_template("template_name", P.DELETE_TEMPLATES),
        "/v1.Determined/LaunchTensorboard": nsc(P.CREATE_NSC, "start TensorBoards"),
        "/v1.Determined/GetTensorboards": nsc(P.VIEW_NSC, "view TensorBoards"),
        "/v1.Determined/GetTensorboard": nsc(P.VIEW_NSC, "view TensorBoards"),
        "/v1.Determined/KillTensorboard": owner_of_task("tensorboard_id", "tensorboard", "kill"),
        "/v1.Determined/PostAllocationProxyAddress": task_of_allocation,
        "/v1.Determined/MoveExperiment": move_experiments,
        "/v1.Determined/MoveExperiments": move_experiments,
        "/v1.Determined/GetExperimentLabels": _VIEW_EXP,
        "/v1.Determined/GetWorkspace": _VIEW_WORKSPACES,
        "/v1.Determined/GetWorkspaces": _VIEW_WORKSPACES,
        "/v1.Determined/GetWorkspaceProjects": _VIEW_PROJECTS,
        "/v1.Determined/PostWorkspace": workspace_identity(
            needs(P.CREATE_WORKSPACE, "create workspaces")
        ),
        "/v1.Determined/PatchWorkspace": workspace_identity(patch_workspace),
        "/v1.Determined/BindRPToWorkspace": _BINDINGS,
        "/v1.Determined/UnbindRPFromWorkspace": _BINDINGS,
        "/v1.Determined/OverwriteRPWorkspaceBindings": _BINDINGS,
        "/v1.Determined/ListWorkspacesBoundToRP": user,
        "/v1.Determined/ListRPsBoundToWorkspace": user,
        "/v1.Determined/DeleteWorkspace": owner_of_workspace("delete", P.DELETE_WORKSPACE),
        "/v1.Determined/ArchiveWorkspace": owner_of_workspace("archive"),
        "/v1.Determined/UnarchiveWorkspace": owner_of_workspace("unarchive"),
        "/v1.Determined/GetProject": _VIEW_PROJECTS,
        "/v1.Determined/GetProjectByKey": _VIEW_PROJECTS,
        "/v1.Determined/PostProject": needs(P.CREATE_PROJECT, "create projects"),
        "/v1.Determined/AddProjectNote": owner_of_project("add notes to", "project_id"),
        "/v1.Determined/PutProjectNotes": owner_of_project("change the notes of", "project_id"),
        "/v1.Determined/PatchProject": owner_of_project("change"),
        "/v1.Determined/DeleteProject": owner_of_project("delete", permission=P.DELETE_PROJECT),
        "/v1.Determined/MoveProject": move_project,
        "/v1.Determined/ArchiveProject": owner_of_project("archive"),
        "/v1.Determined/UnarchiveProject": owner_of_project("unarchive"),
        "/v1.Determined/GetModel": _VIEW_MODELS,
        "/v1.Determined/GetModels": _VIEW_MODELS,
        "/v1.Determined/GetModelLabels": _VIEW_MODELS,
        "/v1.Determined/PostModel": needs(P.CREATE_MODEL_REGISTRY, "create models"),
        "/v1.Determined/PatchModel": owner_of_model("change"),
        "/v1.Determined/ArchiveModel": owner_of_model("archive"),
        "/v1.Determined/UnarchiveModel": owner_of_model("unarchive"),
        "/v1.Determined/MoveModel": owner_of_model("move"),
        "/v1.Determined/DeleteModel": owner_of_model(
            "delete", P.DELETE_MODEL_REGISTRY, P.DELETE_OTHER_USER_MODEL_REGISTRY
        ),
        "/v1.Determined/GetModelVersion": _VIEW_MODELS,
        "/v1.Determined/GetModelVersions": _VIEW_MODELS,
        "/v1.Determined/PostModelVersion": owner_of_model("register versions of"),
        "/v1.Determined/PatchModelVersion": owner_of_model("change versions of"),
        "/v1.Determined/DeleteModelVersion": owner_of_model(
            "delete versions of", P.DELETE_MODEL_VERSION, P.DELETE_OTHER_USER_MODEL_VERSION
        ),
        # Running the cluster (master/api_admin.py), with the permissions Determined's RBAC asks
        # for; the master's log, resource use and the policies in force are everybody's, as
        # under its basic authorization.
        "/v1.Determined/GetMasterConfig": needs(P.VIEW_MASTER_CONFIG, "view the master's config"),
        "/v1.Determined/PatchMasterConfig": _MASTER_CONFIG,
        "/v1.Determined/MasterLogs": needs(P.VIEW_MASTER_LOGS, "view the master's log"),
        "/v1.Determined/GetClusterMessage": _CLUSTER_MESSAGE,
        "/v1.Determined/SetClusterMessage": _CLUSTER_MESSAGE,
        "/v1.Determined/DeleteClusterMessage": _CLUSTER_MESSAGE,
        "/v1.Determined/EnableSlot": _SLOTS,
        "/v1.Determined/DisableSlot": _SLOTS,
        "/v1.Determined/ResourceAllocationRaw": _USAGE,
        "/v1.Determined/ResourceAllocationAggregated": _USAGE,
        "/v1.Determined/CleanupLogs": needs(P.UPDATE_MASTER_CONFIG, "clean up logs"),
        "/v1.Determined/PutGlobalConfigPolicies": _POLICIES,
        "/v1.Determined/GetGlobalConfigPolicies": needs(
            P.VIEW_GLOBAL_CONFIG_POLICIES, "view config policies"
        ),
        "/v1.Determined/DeleteGlobalConfigPolicies": _POLICIES,
        "/v1.Determined/PutWorkspaceConfigPolicies": owner_of_workspace(
            "set the config policies of", P.MODIFY_WORKSPACE_CONFIG_POLICIES, "workspace_id"
        ),
        "/v1.Determined/GetWorkspaceConfigPolicies": needs(
            P.VIEW_WORKSPACE_CONFIG_POLICIES, "view config policies"
        ),
        "/v1.Determined/DeleteWorkspaceConfigPolicies": owner_of_workspace(
            "delete the config policies of", P.MODIFY_WORKSPACE_CONFIG_POLICIES, "workspace_id"
        ),
        "/v1.Determined/CreateGenericTask": create_generic_task,
        "/v1.Determined/GetGenericTaskConfig": nsc(P.VIEW_NSC, "view tasks"),
        "/v1.Determined/KillGenericTask": owner_of_task("task_id", "generic", "kill"),
        "/v1.Determined/PauseGenericTask": owner_of_task("task_id", "generic", "pause"),
        "/v1.Determined/UnpauseGenericTask": owner_of_task("task_id", "generic", "unpause"),
        "/v1.Determined/PreviewExperimentGc": _VIEW_ARTIFACTS,
        "/v1.Determined/SetExperimentGcPolicy": owner_of_experiment("change the gc policy of"),
        "/v1.Determined/PutExperimentRetainLogs": owner_of_experiment(
            "change the log retention of"
        ),
        "/v1.Determined/PutTrialRetainLogs": owner_of_trial(
            "change the log retention of a trial of"
        ),
        "/v1.Determined/PostTemplate": needs(P.CREATE_TEMPLATES, "create templates"),
        "/v1.Determined/PatchTemplateConfig": owner_of_template(
            "template_name", P.UPDATE_TEMPLATES
        ),
        "/v1.Determined/SetTensorboardPriority": owner_of_task(
            "tensorboard_id", "tensorboard", "change the priority of"
        ),
        "/v1.Determined/LaunchCommand": nsc(P.CREATE_NSC, "start commands"),
        "/v1.Determined/GetCommands": nsc(P.VIEW_NSC, "view commands"),
        "/v1.Determined/GetCommand": nsc(P.VIEW_NSC, "view commands"),
        "/v1.Determined/KillCommand": owner_of_task("command_id", "command", "kill"),
        "/v1.Determined/SetCommandPriority": owner_of_task(
            "command_id", "command", "change the priority of"
        ),
        "/v1.Determined/LaunchNotebook": nsc(P.CREATE_NSC, "start notebooks"),
        "/v1.Determined/GetNotebooks": nsc(P.VIEW_NSC, "view notebooks"),
        "/v1.Determined/GetNotebook": nsc(P.VIEW_NSC, "view notebooks"),
        "/v1.Determined/KillNotebook": owner_of_task("notebook_id", "notebook", "kill"),
        "/v1.Determined/SetNotebookPriority": owner_of_task(
            "notebook_id", "notebook", "change the priority of"
        ),
        "/v1.Determined/IdleNotebook": own_task_or_owner("notebook_id", "notebook"),
        "/v1.Determined/LaunchShell": nsc(P.CREATE_NSC, "start shells"),
        "/v1.Determined/GetShells": nsc(P.VIEW_NSC, "view shells"),
        # A shell's answer carries its private key: for its owner or a user with UPDATE_NSC only.
        "/v1.Determined/GetShell": owner_of_task("shell_id", "shell", "open"),
        "/v1.Determined/KillShell": owner_of_task("shell_id", "shell", "kill"),
        "/v1.Determined/SetShellPriority": owner_of_task(
            "shell_id", "shell", "change the priority of"
        ),
        "/v1.Determined/GetTaskContext": own_task_or_owner("task_id", ""),
        "/v1.Determined/PostAccessToken": post_access_token,
        "/v1.Determined/GetAccessTokens": get_access_tokens,
        "/v1.Determined/PatchAccessToken": patch_access_token,
        "/v1.Determined/GetGroup": member_or(P.ASSIGN_ROLES, "see groups they are not in"),
        "/v1.Determined/GetGroups": user,
        "/v1.Determined/CreateGroup": _GROUPS,
        "/v1.Determined/UpdateGroup": _GROUPS,
        "/v1.Determined/DeleteGroup": _GROUPS,
        "/v1.Determined/AssignMultipleGroups": _GROUPS,
        "/v1.Determined/GetPermissionsSummary": user,
        "/v1.Determined/GetRolesByID": get_roles_by_id,
        "/v1.Determined/GetRolesAssignedToUser": get_user_roles,
        "/v1.Determined/GetRolesAssignedToGroup": member_or(
            P.ASSIGN_ROLES, "see the roles of groups they are not in"
        ),
        "/v1.Determined/GetGroupsAndUsersAssignedToWorkspace": workspace_reader(
            "see who holds roles on"
        ),
        "/v1.Determined/SearchRolesAssignableToScope": needs(P.VIEW_WORKSPACE, "list roles"),
        "/v1.Determined/ListRoles": user,
        "/v1.Determined/AssignRoles": assign_roles,
        "/v1.Determined/RemoveAssignments": assign_roles,
        "/v1.Agents/Connect": agent,
    }


RULES: dict[str, Rule] = rules_table()

OPEN = frozenset({"/v1.Determined/Login"})


async def authorize(rpc: str, caller: Caller, message: Any, lookup: Lookup) -> None:
    """Raise ``PermissionDenied`` (or ``NotFound`` for a missing object) unless allowed."""
    try:
        rule = RULES[rpc]
    except KeyError:
        raise errors.PermissionDenied(
            f"{rpc} is not open to anybody (no authorization rule)"
        ) from None
    pending = rule(caller, message, lookup)
    if pending is not None:
        await pending


def unknown_rpcs(paths: Iterable[str]) -> list[str]:
    """The RPCs of a service that have no rule (a test keeps this empty)."""
    return sorted(p for p in paths if p not in RULES)
