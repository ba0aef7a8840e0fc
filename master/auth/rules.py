"""Authorization: one table that says, for every RPC, which callers may make it.

The gRPC servicer and the HTTP gateway both check a call here, by the RPC's name and its
request message, before the call reaches the domain. The rules:

- Any logged-in user may read. Creating an experiment needs a user; forking one (a create
  with a parent) is for the parent's owner or an admin.
- Steering an experiment (pause, activate, cancel, kill, archive, delete, its job's
  priority, weight, pool and position, its resources) is for its owner or an admin.
- Users and agents are managed by admins; a user may change their own password, username
  and display name, and any user may read any user (Determined's basic rules).
- An experiment's name, description, labels and notes, and its TensorBoard files, are
  its owner's or an admin's to change, as is removing some files of its checkpoints.
- A trial's task (or its experiment's owner) says which checkpoint it used; any user reads
  the metrics of the trials that used a checkpoint.
- A task acts only on its own allocation and trial, reads only its own experiment (and the
  checkpoint it started from), and can create, steer or read nothing else.
- Webhooks are managed (created, listed, deleted) by admins, as in Determined; a task posts
  alerts (core_context.alert) for its own trial only.
- Any user may start a TensorBoard, command, notebook or shell and list them; killing one,
  changing its priority, and opening it through the gateway's proxy (a page, a notebook's
  kernels, a shell's ssh) is for its owner or an admin. Its task may only report the address
  it serves on, for its own allocation, and fetch its own context.
- Workspaces, projects and models: any user reads them and creates them; a workspace is
  changed (renamed, archived, deleted, its storage and pools set) by its owner or an admin,
  a project by its owner, its workspace's owner or an admin, a model (and its versions) by
  its owner or an admin. Moving an experiment is for
  its owner or an admin, and a non-admin moves experiments (and projects) only into a
  workspace they own, or into the default one, where everybody's experiments go.
- Running the cluster: the master's config, the cluster-wide message, slots, log cleanup
  and config policies are for admins; the master's log, resource use and the policies in
  force for any user; an experiment's gc policy and log retention for its owner or an admin.
- The agent token is good for the agents' stream only.

An RPC missing from the table is refused for everybody, so a new RPC cannot be added
unprotected by accident.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from determined.common import checkpoint_info, errors, structs
from pydet.master import queries
from pydet.master.auth.callers import AgentCaller, Caller, TaskCaller, UserCaller
from pydet.master.store.db import Database

_TASK_REFUSED = "a task's token is good only for calls about its own allocation and trial"


# Facts cached per experiment: they never change once the experiment exists.
_CACHED_EXPERIMENTS = 100_000


class Lookup:
    """The few facts rules need that the request does not carry: who owns what.

    An experiment's owner, job and checkpoint storage are fixed at creation, so they are
    cached (bounded): a job update or a checkpoint report costs no table scan."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._owners: dict[int, str] = {}
        self._jobs: dict[str, int] = {}
        self._storage: dict[int, dict[str, Any]] = {}

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

    def forget_owners(self) -> None:
        """Drop the cached owners (a user was renamed: their experiments' owner changed)."""
        self._owners.clear()
        self._jobs.clear()

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

    async def model_owner(self, identifier: str) -> tuple[int | None, str]:
        """The user id of its creator, and its name (``identifier``: its name or id)."""
        found = await queries.model_owner(self._db, identifier)
        if found is None:
            raise errors.NotFound(f"model {identifier!r} not found")
        return found

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


Rule = Callable[[Caller, Any, Lookup], Awaitable[None]]


def _user(caller: Caller) -> UserCaller:
    if isinstance(caller, UserCaller):
        return caller
    if isinstance(caller, TaskCaller):
        raise errors.PermissionDenied(_TASK_REFUSED)
    raise errors.PermissionDenied("the agent token is good only for the agents' stream")


async def _owns(caller: Caller, experiment_id: int, lookup: Lookup, what: str) -> None:
    user = _user(caller)
    owner = await lookup.experiment_owner(experiment_id)
    if not user.admin and owner != user.username:
        raise errors.PermissionDenied(
            f"only the owner of experiment {experiment_id} ({owner or 'unknown'}) or an admin "
            f"may {what} it"
        )


# -- the rule kinds -----------------------------------------------------------------------------


async def anyone(caller: Caller, message: Any, lookup: Lookup) -> None:
    """Login: the one call open to callers without a token (checked elsewhere)."""


async def user(caller: Caller, message: Any, lookup: Lookup) -> None:
    _user(caller)


async def signed_in(caller: Caller, message: Any, lookup: Lookup) -> None:
    """Users and tasks (harmless facts about the master)."""
    if isinstance(caller, AgentCaller):
        _user(caller)


async def admin(caller: Caller, message: Any, lookup: Lookup) -> None:
    if not _user(caller).admin:
        raise errors.PermissionDenied("only an admin may do this")


async def patch_user(caller: Caller, message: Any, lookup: Lookup) -> None:
    """An admin changes anyone; a user only their own username and display name (in
    Determined's form, by user_id; pydet's older form by name is for admins)."""
    u = _user(caller)
    if u.admin:
        return
    if not message.user_id or message.user_id != u.id:
        raise errors.PermissionDenied("only an admin may change another user")
    change = message.user
    if change is not None and (
        change.admin is not None
        or change.active is not None
        or change.remote is not None
        or change.agent_user_group is not None
    ):
        raise errors.PermissionDenied(
            "only an admin may change who is an admin, active or remote, or a user's agent "
            "user and group"
        )


async def self_or_admin(caller: Caller, message: Any, lookup: Lookup) -> None:
    u = _user(caller)
    if not u.admin and message.username != u.username:
        raise errors.PermissionDenied("only an admin may change another user's password")


def owner_of_experiment(what: str) -> Rule:
    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        await _owns(caller, int(message.experiment_id), lookup, what)

    return rule


async def create_experiment(caller: Caller, message: Any, lookup: Lookup) -> None:
    _user(caller)
    if message.parent_id:
        await _owns(caller, int(message.parent_id), lookup, "fork")


async def patch_experiment(caller: Caller, message: Any, lookup: Lookup) -> None:
    _user(caller)
    if message.experiment is not None and message.experiment.id:  # else refused as invalid
        await _owns(caller, int(message.experiment.id), lookup, "change")


async def continue_experiment(caller: Caller, message: Any, lookup: Lookup) -> None:
    # Determined names the experiment ``id`` in this request.
    await _owns(caller, int(message.id), lookup, "continue")


def owner_of_trial(what: str) -> Rule:
    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        _user(caller)
        exp = await lookup.trial_experiment(int(message.trial_id))
        await _owns(caller, exp, lookup, what)

    return rule


async def update_jobs(caller: Caller, message: Any, lookup: Lookup) -> None:
    _user(caller)
    for update in message.updates:
        # Jobs named by ahead_of/behind_of need no rights: the queue checks they exist.
        await _owns(caller, await lookup.job_experiment(update.job_id), lookup, "reorder")


def owner_of_template(field: str) -> Rule:
    """Any user for a new template; its owner or an admin for an existing one."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        u = _user(caller)
        name = message.template.name if field == "template" and message.template else ""
        name = name or str(getattr(message, field, "") or "")
        owner = await lookup.template_owner(name) if name else None
        if owner is not None and owner != u.username and not u.admin:
            raise errors.PermissionDenied(
                f"only the owner of template {name!r} ({owner}) or an admin may change it"
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
    """Any user, or the trial's own task."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        task = _own_task(caller)
        if task is None:
            _user(caller)
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


def reader_or_task_of_experiment(field: str = "experiment_id") -> Rule:
    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        task = _own_task(caller)
        if task is None:
            _user(caller)
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
        _user(caller)
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
        _user(caller)
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
    """The owner of each checkpoint's experiment or an admin, or a task of that experiment."""
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
            await _owns(caller, exp, lookup, "delete checkpoints of")


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
        )


def owner_of_task(field: str, noun: str, what: str) -> Rule:
    """The owner of the task named by ``field`` (a ``noun``: "command", "notebook", ...) or
    an admin."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        await owns_task(caller, str(getattr(message, field)), noun, lookup, what)

    return rule


async def owns_task(caller: Caller, task_id: str, noun: str, lookup: Lookup, what: str) -> None:
    """The task's owner or an admin (the gateway's proxy checks the same). The refusal does
    not say whose it is."""
    user = _user(caller)
    owner = await lookup.task_owner(task_id, noun)
    if not user.admin and owner != user.username:
        raise errors.PermissionDenied(
            f"only the owner of {noun} {task_id} or an admin may {what} it"
        )


def own_task_or_owner(field: str, noun: str) -> Rule:
    """The task itself (its own allocation's token), or its owner or an admin: a task's own
    context, a notebook's report of its idleness."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        task_id = str(getattr(message, field))
        task = _own_task(caller)
        if task is None:
            await owns_task(caller, task_id, noun, lookup, "act for")
        elif task_id != task.task_id:
            raise errors.PermissionDenied(f"{_TASK_REFUSED}: this task is {task.task_id}")

    return rule


async def agent(caller: Caller, message: Any, lookup: Lookup) -> None:
    if not isinstance(caller, AgentCaller):
        raise errors.PermissionDenied("only an agent with the cluster's agent token may connect")


# -- workspaces, projects and moves ---------------------------------------------------------------

# The default workspace: everybody's experiments go there.
DEFAULT_WORKSPACE = 1


def owner_of_workspace(what: str) -> Rule:
    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        u = _user(caller)
        workspace_id = int(message.id)
        owner = await lookup.workspace_owner(workspace_id)
        if not u.admin and owner != u.id:
            raise errors.PermissionDenied(
                f"only the owner of workspace {workspace_id} or an admin may {what} it"
            )

    return rule


async def _owns_project(caller: Caller, project_id: int, lookup: Lookup, what: str) -> None:
    u = _user(caller)
    owner, workspace_owner, _ = await lookup.project_owners(project_id)
    if not u.admin and u.id not in (owner, workspace_owner):
        raise errors.PermissionDenied(
            f"only the owner of project {project_id} (or of its workspace) or an admin may "
            f"{what} it"
        )


def owner_of_project(what: str, field: str = "id") -> Rule:
    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        await _owns_project(caller, int(getattr(message, field)), lookup, what)

    return rule


async def _into_workspace(user: UserCaller, workspace_id: int, lookup: Lookup, what: str) -> None:
    """A non-admin moves things only into a workspace they own (or the default one)."""
    if user.admin or workspace_id == DEFAULT_WORKSPACE:
        return
    if await lookup.workspace_owner(workspace_id) != user.id:
        raise errors.PermissionDenied(
            f"only the owner of workspace {workspace_id} or an admin may move {what} into it"
        )


async def move_experiments(caller: Caller, message: Any, lookup: Lookup) -> None:
    """MoveExperiment and MoveExperiments: the experiments' owner (or an admin), into a
    project of a workspace the caller owns (or the default one)."""
    u = _user(caller)
    ids = (
        [int(message.experiment_id)]
        if hasattr(message, "experiment_id")
        else [int(i) for i in message.experiment_ids]
    )
    owners = await lookup.experiment_owners(ids)
    if hasattr(message, "experiment_id") and ids[0] not in owners:
        raise errors.NotFound(f"experiment {ids[0]} not found")
    if not u.admin:
        others = sorted(i for i, owner in owners.items() if owner != u.username)
        if others:
            raise errors.PermissionDenied(
                f"only the owner of experiment {others[0]} ({owners[others[0]]}) or an admin "
                "may move it"
            )
    _, _, workspace_id = await lookup.project_owners(int(message.destination_project_id))
    await _into_workspace(u, workspace_id, lookup, "experiments")


async def move_project(caller: Caller, message: Any, lookup: Lookup) -> None:
    """The project's owner or an admin (as Determined), into a workspace the caller owns."""
    u = _user(caller)
    project_id = int(message.project_id)
    owner, _, _ = await lookup.project_owners(project_id)
    if not u.admin and owner != u.id:
        raise errors.PermissionDenied(
            f"only the owner of project {project_id} or an admin may move it"
        )
    destination = int(message.destination_workspace_id)
    await lookup.workspace_owner(destination)  # NotFound first
    await _into_workspace(u, destination, lookup, "projects")


def owner_of_model(what: str) -> Rule:
    """The model's owner or an admin; and a model moved to a workspace goes only into one the
    caller owns (or the default one), as experiments do."""

    async def rule(caller: Caller, message: Any, lookup: Lookup) -> None:
        u = _user(caller)
        owner, name = await lookup.model_owner(str(message.model_name))
        if not u.admin and owner != u.id:
            raise errors.PermissionDenied(
                f"only the owner of model {name!r} or an admin may {what} it"
            )
        destination = getattr(message, "destination_workspace_id", None)
        patch = getattr(message, "model", None)
        if patch is not None and patch.workspace_id is not None:
            destination = patch.workspace_id
        if destination:
            await lookup.workspace_owner(int(destination))  # NotFound first
            await _into_workspace(u, int(destination), lookup, "models")

    return rule


# -- the table ----------------------------------------------------------------------------------

RULES: dict[str, Rule] = {
    "/v1.Determined/GetMaster": signed_in,
    "/v1.Determined/Login": anyone,
    "/v1.Determined/Logout": user,
    "/v1.Determined/GetMe": user,
    "/v1.Determined/GetUsers": user,
    "/v1.Determined/PostUser": admin,
    "/v1.Determined/SetUserPassword": self_or_admin,
    "/v1.Determined/PatchUser": patch_user,
    "/v1.Determined/GetUser": user,
    "/v1.Determined/GetUserByUsername": user,
    "/v1.Determined/CreateExperiment": create_experiment,
    "/v1.Determined/GetExperiments": user,
    "/v1.Determined/GetExperiment": user,
    "/v1.Determined/GetExperimentTrials": user,
    "/v1.Determined/GetExperimentContext": reader_or_task_of_experiment(),
    "/v1.Determined/ActivateExperiment": owner_of_experiment("activate"),
    "/v1.Determined/PauseExperiment": owner_of_experiment("pause"),
    "/v1.Determined/CancelExperiment": owner_of_experiment("cancel"),
    "/v1.Determined/KillExperiment": owner_of_experiment("kill"),
    "/v1.Determined/ArchiveExperiment": owner_of_experiment("archive"),
    "/v1.Determined/UnarchiveExperiment": owner_of_experiment("unarchive"),
    "/v1.Determined/DeleteExperiment": owner_of_experiment("delete"),
    "/v1.Determined/ContinueExperiment": continue_experiment,
    "/v1.Determined/PatchExperiment": patch_experiment,
    "/v1.Determined/PutExperimentLabel": owner_of_experiment("label"),
    "/v1.Determined/DeleteExperimentLabel": owner_of_experiment("label"),
    "/v1.Determined/DeleteTensorboardFiles": owner_of_experiment("delete the TensorBoard files of"),
    "/v1.Determined/GetTrial": user,
    "/v1.Determined/KillTrial": owner_of_trial("kill a trial of"),
    "/v1.Determined/CreateTrial": owner_of_experiment("add a trial to"),
    "/v1.Determined/StartTrial": owner_of_trial("start a trial of"),
    "/v1.Determined/PatchTrial": owner_of_trial("end a trial of"),
    "/v1.Determined/PostRunMetadata": task_of_trial("run_id"),
    "/v1.Determined/GetRunMetadata": reader_or_task_of_trial("run_id"),
    "/v1.Determined/TrialLogs": user,
    "/v1.Determined/TaskLogs": user,
    "/v1.Determined/GetTrialMetrics": user,
    "/v1.Determined/GetMetrics": user,
    "/v1.Determined/ReportTrialSourceInfo": report_trial_source_info,
    "/v1.Determined/GetTrialMetricsByCheckpoint": user,
    "/v1.Determined/GetAgents": user,
    "/v1.Determined/EnableAgent": admin,
    "/v1.Determined/DisableAgent": admin,
    "/v1.Determined/GetResourcePools": user,
    "/v1.Determined/GetJobs": user,
    "/v1.Determined/GetTasks": user,
    "/v1.Determined/UpdateJobQueue": update_jobs,
    "/v1.Determined/SetExperimentResources": owner_of_experiment("change the resources of"),
    "/v1.Determined/PreviewSearch": user,
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
    "/v1.Determined/PostWebhook": admin,
    "/v1.Determined/GetWebhooks": admin,
    "/v1.Determined/DeleteWebhook": admin,
    "/v1.Determined/PostWebhookEventData": task_of_trial(),
    "/v1.Determined/GetTemplates": user,
    "/v1.Determined/GetTemplate": user,
    "/v1.Determined/PutTemplate": owner_of_template("template"),
    "/v1.Determined/DeleteTemplate": owner_of_template("template_name"),
    "/v1.Determined/LaunchTensorboard": user,
    "/v1.Determined/GetTensorboards": user,
    "/v1.Determined/GetTensorboard": user,
    "/v1.Determined/KillTensorboard": owner_of_task("tensorboard_id", "tensorboard", "kill"),
    "/v1.Determined/PostAllocationProxyAddress": task_of_allocation,
    "/v1.Determined/MoveExperiment": move_experiments,
    "/v1.Determined/MoveExperiments": move_experiments,
    "/v1.Determined/GetExperimentLabels": user,
    "/v1.Determined/GetWorkspace": user,
    "/v1.Determined/GetWorkspaces": user,
    "/v1.Determined/GetWorkspaceProjects": user,
    "/v1.Determined/PostWorkspace": user,
    "/v1.Determined/PatchWorkspace": owner_of_workspace("change"),
    "/v1.Determined/DeleteWorkspace": owner_of_workspace("delete"),
    "/v1.Determined/ArchiveWorkspace": owner_of_workspace("archive"),
    "/v1.Determined/UnarchiveWorkspace": owner_of_workspace("unarchive"),
    "/v1.Determined/GetProject": user,
    "/v1.Determined/GetProjectByKey": user,
    "/v1.Determined/PostProject": user,
    "/v1.Determined/AddProjectNote": owner_of_project("add notes to", "project_id"),
    "/v1.Determined/PutProjectNotes": owner_of_project("change the notes of", "project_id"),
    "/v1.Determined/PatchProject": owner_of_project("change"),
    "/v1.Determined/DeleteProject": owner_of_project("delete"),
    "/v1.Determined/MoveProject": move_project,
    "/v1.Determined/ArchiveProject": owner_of_project("archive"),
    "/v1.Determined/UnarchiveProject": owner_of_project("unarchive"),
    "/v1.Determined/GetModel": user,
    "/v1.Determined/GetModels": user,
    "/v1.Determined/GetModelLabels": user,
    "/v1.Determined/PostModel": user,
    "/v1.Determined/PatchModel": owner_of_model("change"),
    "/v1.Determined/ArchiveModel": owner_of_model("archive"),
    "/v1.Determined/UnarchiveModel": owner_of_model("unarchive"),
    "/v1.Determined/MoveModel": owner_of_model("move"),
    "/v1.Determined/DeleteModel": owner_of_model("delete"),
    "/v1.Determined/GetModelVersion": user,
    "/v1.Determined/GetModelVersions": user,
    "/v1.Determined/PostModelVersion": owner_of_model("register versions of"),
    "/v1.Determined/PatchModelVersion": owner_of_model("change versions of"),
    "/v1.Determined/DeleteModelVersion": owner_of_model("delete versions of"),
    # Running the cluster (master/api_admin.py): as Determined's basic authorization, the
    # master's config, the cluster message, slots, log cleanup and config policies are for
    # admins; its log, resource use and the policies in force are for any user.
    "/v1.Determined/GetMasterConfig": admin,
    "/v1.Determined/PatchMasterConfig": admin,
    "/v1.Determined/MasterLogs": user,
    "/v1.Determined/GetClusterMessage": admin,
    "/v1.Determined/SetClusterMessage": admin,
    "/v1.Determined/DeleteClusterMessage": admin,
    "/v1.Determined/EnableSlot": admin,
    "/v1.Determined/DisableSlot": admin,
    "/v1.Determined/ResourceAllocationRaw": user,
    "/v1.Determined/ResourceAllocationAggregated": user,
    "/v1.Determined/CleanupLogs": admin,
    "/v1.Determined/PutGlobalConfigPolicies": admin,
    "/v1.Determined/GetGlobalConfigPolicies": user,
    "/v1.Determined/DeleteGlobalConfigPolicies": admin,
    "/v1.Determined/PreviewExperimentGc": user,
    "/v1.Determined/SetExperimentGcPolicy": owner_of_experiment("change the gc policy of"),
    "/v1.Determined/PutExperimentRetainLogs": owner_of_experiment("change the log retention of"),
    "/v1.Determined/PutTrialRetainLogs": owner_of_trial("change the log retention of a trial of"),
    "/v1.Determined/PostTemplate": user,
    "/v1.Determined/PatchTemplateConfig": owner_of_template("template_name"),
    "/v1.Determined/SetTensorboardPriority": owner_of_task(
        "tensorboard_id", "tensorboard", "change the priority of"
    ),
    "/v1.Determined/LaunchCommand": user,
    "/v1.Determined/GetCommands": user,
    "/v1.Determined/GetCommand": user,
    "/v1.Determined/KillCommand": owner_of_task("command_id", "command", "kill"),
    "/v1.Determined/SetCommandPriority": owner_of_task(
        "command_id", "command", "change the priority of"
    ),
    "/v1.Determined/LaunchNotebook": user,
    "/v1.Determined/GetNotebooks": user,
    "/v1.Determined/GetNotebook": user,
    "/v1.Determined/KillNotebook": owner_of_task("notebook_id", "notebook", "kill"),
    "/v1.Determined/SetNotebookPriority": owner_of_task(
        "notebook_id", "notebook", "change the priority of"
    ),
    "/v1.Determined/IdleNotebook": own_task_or_owner("notebook_id", "notebook"),
    "/v1.Determined/LaunchShell": user,
    "/v1.Determined/GetShells": user,
    # A shell's answer carries its private key: for its owner or an admin only.
    "/v1.Determined/GetShell": owner_of_task("shell_id", "shell", "open"),
    "/v1.Determined/KillShell": owner_of_task("shell_id", "shell", "kill"),
    "/v1.Determined/SetShellPriority": owner_of_task("shell_id", "shell", "change the priority of"),
    "/v1.Determined/GetTaskContext": own_task_or_owner("task_id", ""),
    "/v1.Agents/Connect": agent,
}

OPEN = frozenset({"/v1.Determined/Login"})


async def authorize(rpc: str, caller: Caller, message: Any, lookup: Lookup) -> None:
    """Raise ``PermissionDenied`` (or ``NotFound`` for a missing object) unless allowed."""
    rule = RULES.get(rpc)
    if rule is None:
        raise errors.PermissionDenied(f"{rpc} is not open to anybody (no authorization rule)")
    await rule(caller, message, lookup)


def unknown_rpcs(paths: Iterable[str]) -> list[str]:
    """The RPCs of a service that have no rule (a test keeps this empty)."""
    return sorted(p for p in paths if p not in RULES)
