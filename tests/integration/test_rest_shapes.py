"""Every route of the REST API answers the protobuf JSON mapping of its response message, as
the official protobuf runtime reads and writes it.

The table below names, for every route of the master's HTTP app (read from the app itself,
so that a new route without a row fails ``test_every_route_has_a_row``), the ``v1`` message
it answers, or why it answers no protobuf message at all. Against a real master and agent,
each answer is parsed by ``json_format.Parse(..., ignore_unknown_fields=False)`` into the
message compiled from pydet's protos by the official runtime, and ``MessageToDict`` of it
must give the same JSON back (less the ``null`` pydet writes for unset fields, as
Determined's gateway does). Streamed routes are checked line by line (``{"result": ...}``).
"""

from __future__ import annotations

import json
import re
import types
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from google.protobuf import json_format, message

from pydet.master import gateway
from tests.cluster import Cluster, running, wait_until
from tests.unit.test_wire_oracle import (
    PROTO_DIR,
    _as_json,
    _official_classes,
    _protoc,
    _without_nulls,
)

# Routes whose answer is not a protobuf message, and why.
NOT_PROTOBUF = {
    ("GET", "/health"): "pydet's liveness probe for load balancers, not Determined's API",
    ("GET", "/checkpoints/{uuid}"): "a checkpoint's files as a tar archive",
    ("GET", "/api/v1/stream"): "server-sent events: pydet's live updates for the WebUI",
    ("GET", "/api/v1/trials/{id:int}/metrics"): (
        "pydet's chart series (thinned with max_points), read by pydet's WebUI only"
    ),
    ("GET", "/{path:path}"): "the WebUI's files",
}
# The proxy answers what the proxied task (JupyterLab, TensorBoard, sshd) answers.
_PROXIED = re.compile(r"^/proxy/")

# GET routes: the message each answers, and whether it streams it ({"result": ...} lines).
GETS: dict[str, tuple[str, bool]] = {
    "/api/v1/master": ("GetMasterResponse", False),
    "/api/v1/me": ("GetMeResponse", False),
    "/api/v1/agents": ("GetAgentsResponse", False),
    "/api/v1/resource-pools": ("GetResourcePoolsResponse", False),
    "/api/v1/jobs": ("GetJobsResponse", False),
    "/api/v1/job-queues": ("GetJobsResponse", False),
    "/api/v1/experiments": ("GetExperimentsResponse", False),
    "/api/v1/experiments/{id:int}": ("GetExperimentResponse", False),
    "/api/v1/experiments/{id:int}/trials": ("GetExperimentTrialsResponse", False),
    "/api/v1/experiments/{id:int}/checkpoints": ("GetCheckpointsResponse", False),
    "/api/v1/experiment/labels": ("GetExperimentLabelsResponse", False),
    "/api/v1/trials/{id:int}": ("GetTrialResponse", False),
    "/api/v1/trials/{id:int}/checkpoints": ("GetCheckpointsResponse", False),
    "/api/v1/trials/{id:int}/logs": ("TaskLog", True),
    "/api/v1/tasks/{id:str}/logs": ("TaskLog", True),
    "/api/v1/webhooks": ("GetWebhooksResponse", False),
    "/api/v1/tensorboards": ("GetTensorboardsResponse", False),
    "/api/v1/tensorboards/{id:str}": ("GetTensorboardResponse", False),
    "/api/v1/commands": ("GetCommandsResponse", False),
    "/api/v1/commands/{id:str}": ("GetCommandResponse", False),
    "/api/v1/notebooks": ("GetNotebooksResponse", False),
    "/api/v1/notebooks/{id:str}": ("GetNotebookResponse", False),
    "/api/v1/shells": ("GetShellsResponse", False),
    "/api/v1/shells/{id:str}": ("GetShellResponse", False),
    "/api/v1/workspaces": ("GetWorkspacesResponse", False),
    "/api/v1/workspaces/{id:int}": ("GetWorkspaceResponse", False),
    "/api/v1/workspaces/{id:int}/projects": ("GetWorkspaceProjectsResponse", False),
    "/api/v1/projects/{id:int}": ("GetProjectResponse", False),
    "/api/v1/projects/key/{key:str}": ("GetProjectByKeyResponse", False),
    "/api/v1/models": ("GetModelsResponse", False),
    "/api/v1/model/labels": ("GetModelLabelsResponse", False),
    "/api/v1/models/{model_name:str}": ("GetModelResponse", False),
    "/api/v1/models/{model_name:str}/versions": ("GetModelVersionsResponse", False),
    "/api/v1/models/{model_name:str}/versions/{model_version_num:int}": (
        "GetModelVersionResponse",
        False,
    ),
    "/api/v1/resource-pools/{pool:str}/workspace-bindings": (
        "ListWorkspacesBoundToRPResponse",
        False,
    ),
    "/api/v1/workspaces/{id:int}/available-resource-pools": (
        "ListRPsBoundToWorkspaceResponse",
        False,
    ),
    "/api/v1/tasks/{id:str}/config": ("GetGenericTaskConfigResponse", False),
    "/api/v1/tokens": ("GetAccessTokensResponse", False),
    "/api/v1/groups/{group_id:int}": ("GetGroupResponse", False),
    "/api/v1/permissions/summary": ("GetPermissionsSummaryResponse", False),
    "/api/v1/roles/search/by-user/{user_id:int}": ("GetRolesAssignedToUserResponse", False),
    "/api/v1/roles/search/by-group/{group_id:int}": ("GetRolesAssignedToGroupResponse", False),
    "/api/v1/roles/workspace/{workspace_id:int}": (
        "GetGroupsAndUsersAssignedToWorkspaceResponse",
        False,
    ),
}

BINDINGS = "/api/v1/resource-pools/{pool:str}/workspace-bindings"
# A second pool, which (unlike the default one) can be bound to a workspace.
POOLS = "resource_pools:\n  - pool_name: default\n  - pool_name: gpu\n"

# Every other route: the message it answers (each is called by test_changes_answer_...).
CHANGES: dict[tuple[str, str], str] = {
    ("POST", "/api/v1/auth/login"): "LoginResponse",
    ("POST", "/api/v1/auth/logout"): "LogoutResponse",
    ("POST", "/api/v1/jobs/update"): "UpdateJobQueueResponse",
    ("POST", "/api/v1/job-queues"): "UpdateJobQueueResponse",
    ("POST", "/api/v1/experiments"): "CreateExperimentResponse",
    ("POST", "/api/v1/experiments/{id:int}/{action:str}"): "ExperimentActionResponse",
    ("DELETE", "/api/v1/experiments/{id:int}"): "ExperimentActionResponse",
    ("POST", "/api/v1/experiments/{id:int}/move"): "MoveExperimentResponse",
    ("POST", "/api/v1/trials/{id:int}/kill"): "KillTrialResponse",
    ("POST", "/api/v1/webhooks"): "PostWebhookResponse",
    ("DELETE", "/api/v1/webhooks/{id:int}"): "DeleteWebhookResponse",
    ("POST", "/api/v1/tensorboards"): "LaunchTensorboardResponse",
    ("POST", "/api/v1/tensorboards/{id:str}/kill"): "KillTensorboardResponse",
    **{
        change: f"{verb}{kind}{what}Response"
        for kind in ("Command", "Notebook", "Shell")
        for change, verb, what in (
            (("POST", f"/api/v1/{kind.lower()}s"), "Launch", ""),
            (("POST", f"/api/v1/{kind.lower()}s/{{id:str}}/kill"), "Kill", ""),
            (("POST", f"/api/v1/{kind.lower()}s/{{id:str}}/set_priority"), "Set", "Priority"),
        )
    },
    ("POST", "/api/v1/workspaces"): "PostWorkspaceResponse",
    ("PATCH", "/api/v1/workspaces/{id:int}"): "PatchWorkspaceResponse",
    ("POST", "/api/v1/workspaces/{id:int}/archive"): "ArchiveWorkspaceResponse",
    ("POST", "/api/v1/workspaces/{id:int}/unarchive"): "UnarchiveWorkspaceResponse",
    ("DELETE", "/api/v1/workspaces/{id:int}"): "DeleteWorkspaceResponse",
    ("POST", "/api/v1/workspaces/{id:int}/projects"): "PostProjectResponse",
    ("PATCH", "/api/v1/projects/{id:int}"): "PatchProjectResponse",
    ("POST", "/api/v1/projects/{id:int}/archive"): "ArchiveProjectResponse",
    ("POST", "/api/v1/projects/{id:int}/unarchive"): "UnarchiveProjectResponse",
    ("POST", "/api/v1/projects/{id:int}/move"): "MoveProjectResponse",
    ("POST", "/api/v1/projects/{id:int}/notes"): "AddProjectNoteResponse",
    ("PUT", "/api/v1/projects/{id:int}/notes"): "PutProjectNotesResponse",
    ("POST", "/api/v1/projects/{id:int}/experiments/move"): "MoveExperimentsResponse",
    ("DELETE", "/api/v1/projects/{id:int}"): "DeleteProjectResponse",
    ("POST", "/api/v1/models"): "PostModelResponse",
    ("PATCH", "/api/v1/models/{model_name:str}"): "PatchModelResponse",
    ("POST", "/api/v1/models/{model_name:str}/archive"): "ArchiveModelResponse",
    ("POST", "/api/v1/models/{model_name:str}/unarchive"): "UnarchiveModelResponse",
    ("POST", "/api/v1/models/{model_name:str}/move"): "MoveModelResponse",
    ("DELETE", "/api/v1/models/{model_name:str}"): "DeleteModelResponse",
    ("POST", "/api/v1/models/{model_name:str}/versions"): "PostModelVersionResponse",
    (
        "PATCH",
        "/api/v1/models/{model_name:str}/versions/{model_version_num:int}",
    ): "PatchModelVersionResponse",
    (
        "DELETE",
        "/api/v1/models/{model_name:str}/versions/{model_version_num:int}",
    ): "DeleteModelVersionResponse",
    ("POST", BINDINGS): "BindRPToWorkspaceResponse",
    ("PUT", BINDINGS): "OverwriteRPWorkspaceBindingsResponse",
    ("DELETE", BINDINGS): "UnbindRPFromWorkspaceResponse",
    ("POST", "/api/v1/generic-tasks"): "CreateGenericTaskResponse",
    ("POST", "/api/v1/tasks/{id:str}/pause"): "PauseGenericTaskResponse",
    ("POST", "/api/v1/tasks/{id:str}/unpause"): "UnpauseGenericTaskResponse",
    ("POST", "/api/v1/tasks/{id:str}/kill"): "KillGenericTaskResponse",
    ("POST", "/api/v1/tokens"): "PostAccessTokenResponse",
    ("PATCH", "/api/v1/tokens/{token_id:int}"): "PatchAccessTokenResponse",
    ("POST", "/api/v1/groups"): "CreateGroupResponse",
    ("POST", "/api/v1/groups/search"): "GetGroupsResponse",
    ("PUT", "/api/v1/groups/{group_id:int}"): "UpdateGroupResponse",
    ("DELETE", "/api/v1/groups/{group_id:int}"): "DeleteGroupResponse",
    ("PATCH", "/api/v1/users/assignments"): "AssignMultipleGroupsResponse",
    ("POST", "/api/v1/roles/search"): "ListRolesResponse",
    ("POST", "/api/v1/roles/search/by-ids"): "GetRolesByIDResponse",
    ("POST", "/api/v1/roles/search/by-assignability"): "SearchRolesAssignableToScopeResponse",
    ("POST", "/api/v1/roles/add-assignments"): "AssignRolesResponse",
    ("POST", "/api/v1/roles/remove-assignments"): "RemoveAssignmentsResponse",
}


def app_routes() -> set[tuple[str, str]]:
    """(method, path template) of every route of the master's HTTP app (HEAD, which
    Starlette adds to every GET, aside)."""
    app = gateway.build(types.SimpleNamespace(events=None), None, None)  # type: ignore[arg-type]
    return {
        (method, route.path)
        for route in app.routes
        for method in (getattr(route, "methods", None) or ("WEBSOCKET",))
        if method != "HEAD" and not _PROXIED.match(getattr(route, "path", ""))
    }


def test_every_route_has_a_row() -> None:
    routes = app_routes()
    rows = {("GET", p) for p in GETS} | set(CHANGES) | set(NOT_PROTOBUF)
    assert not routes - rows, f"routes without a row here: {sorted(routes - rows)}"
    assert not rows - routes, f"rows for routes the app lacks: {sorted(rows - routes)}"


# -- against a real master -----------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    def start(c: Cluster) -> None:
        c.start_master()
        c.start_agent("agent-0", 1)

    yield from running(Cluster(tmp_path_factory.mktemp("shapes"), master_config=POOLS), start)


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> dict[str, type[message.Message]]:
    """The official runtime's classes for pydet's protos (compiled by grpc_tools' protoc)."""
    out = tmp_path_factory.mktemp("official") / "v1.pb"
    files = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.glob("v1/*.proto"))
    _protoc(f"-I{PROTO_DIR}", f"--descriptor_set_out={out}", "--include_imports", *files)
    return _official_classes(out)


def call(cluster: Cluster, method: str, path: str, body: Any = None) -> Any:
    """One request with the admin's session; its JSON answer (a 200 or the test fails)."""
    try:
        with cluster.urlopen(cluster.request(path, method=method, body=body), 60) as r:
            text = r.read().decode()
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{method} {path}: {e.code} {e.read().decode()}") from None
    return json.loads(text)


def lines(cluster: Cluster, path: str) -> list[Any]:
    """A streamed answer: one JSON document a line."""
    with cluster.urlopen(cluster.request(path), 60) as r:
        return [json.loads(line) for line in r.read().decode().splitlines() if line.strip()]


def assert_mapping_of(
    official: dict[str, type[message.Message]], name: str, answer: Any, where: str
) -> None:
    """``answer`` is the JSON mapping of ``v1.<name>``: parsed by the official runtime,
    refusing unknown fields, and written back to the same JSON."""
    try:
        parsed = json_format.Parse(
            json.dumps(answer), official[f"v1.{name}"](), ignore_unknown_fields=False
        )
    except json_format.ParseError as e:
        raise AssertionError(f"{where}: not the JSON of v1.{name}: {e}") from None
    written = json_format.MessageToDict(parsed, always_print_fields_with_no_presence=True)
    assert _as_json(_without_nulls(answer, written)) == _as_json(written), where


@dataclass
class World:
    """What the routes' paths name: made through the REST API itself, each answer kept with
    the message it must be (``answers``)."""

    experiment: int = 0
    trial: int = 0
    trial_task: str = ""
    checkpoint: str = ""
    workspace: int = 0
    project: int = 0
    project_key: str = ""
    model: str = ""
    tensorboard: str = ""
    generic_task: str = ""
    user: int = 0
    group: int = 0
    token: int = 0
    tasks: dict[str, str] = field(default_factory=dict)
    answers: list[tuple[str, str, Any]] = field(default_factory=list)

    def keep(self, route: tuple[str, str], answer: Any) -> Any:
        self.answers.append((f"{route[0]} {route[1]}", CHANGES[route], answer))
        return answer


SLEEP = "name: sleeps\nentrypoint: sleep 60\nsearcher: {name: single, metric: x, max_length: 1}\n"
TRAIN = """\
import determined as det

with det.core.init() as core:
    core.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
    core.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.4})
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, _):
        (path / "weights").write_text("w")
    print("[rank=0] INFO: done", flush=True)
"""


GENERIC = "entrypoint: sleep 600\nresources: {slots: 0}\npreemption_timeout: 1\n"


def _generic_state(cluster: Cluster, task_id: str) -> str:
    ((found,),) = cluster.sql("SELECT state FROM generic_tasks WHERE id = ?", (task_id,))
    return str(found)


def _state(cluster: Cluster, exp_id: int) -> str:
    return str(call(cluster, "GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"])


@pytest.fixture(scope="module")
def world(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> World:
    w = World()
    ctx = tmp_path_factory.mktemp("ctx")
    (ctx / "train.py").write_text(TRAIN)
    config = ctx / "config.yaml"
    config.write_text(
        "name: shapes\nentrypoint: python3 train.py\nlabels: [shape]\n"
        "searcher: {name: single, metric: loss, max_length: 1}\nmax_restarts: 0\n"
    )
    w.experiment = cluster.create(config, ctx)
    assert cluster.wait_state(w.experiment, "COMPLETED", "ERROR", timeout=180) == "COMPLETED"
    (trial,) = call(cluster, "GET", f"/api/v1/experiments/{w.experiment}/trials")["trials"]
    w.trial, w.trial_task = trial["id"], trial["taskId"]
    (ckpt,) = call(cluster, "GET", f"/api/v1/trials/{w.trial}/checkpoints")["checkpoints"]
    w.checkpoint = ckpt["uuid"]

    route = ("POST", "/api/v1/workspaces")
    w.workspace = w.keep(route, call(cluster, *route, {"name": "shapes"}))["workspace"]["id"]
    route = ("POST", "/api/v1/workspaces/{id:int}/projects")
    made = call(cluster, "POST", f"/api/v1/workspaces/{w.workspace}/projects", {"name": "p"})
    w.project, w.project_key = w.keep(route, made)["project"]["id"], made["project"]["key"]
    route = ("POST", "/api/v1/models")
    w.model = w.keep(route, call(cluster, *route, {"name": "m", "labels": ["a"]}))["model"]["name"]
    route = ("POST", "/api/v1/models/{model_name:str}/versions")
    body = {"checkpointUuid": w.checkpoint, "name": "v1"}
    w.keep(route, call(cluster, "POST", f"/api/v1/models/{w.model}/versions", body))
    route = ("POST", "/api/v1/webhooks")
    hook = {
        "url": "http://127.0.0.1:9/hook",
        "webhookType": "WEBHOOK_TYPE_DEFAULT",
        "triggers": [
            {
                "triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
                "condition": {"state": "COMPLETED"},
            }
        ],
    }
    w.keep(route, call(cluster, *route, hook))
    route = ("POST", "/api/v1/tensorboards")
    launched = call(cluster, *route, {"experimentIds": [w.experiment]})
    w.tensorboard = w.keep(route, launched)["tensorboard"]["id"]
    for kind, config_doc in (
        ("command", {"entrypoint": ["sh", "-c", "echo yo; sleep 60"], "resources": {"slots": 0}}),
        ("notebook", {"resources": {"slots": 0}}),
        ("shell", {"resources": {"slots": 0}}),
    ):
        route = ("POST", f"/api/v1/{kind}s")
        w.tasks[kind] = w.keep(route, call(cluster, *route, {"config": config_doc}))[kind]["id"]
    route = ("POST", "/api/v1/generic-tasks")
    task = {"config": GENERIC}
    w.generic_task = w.keep(route, call(cluster, *route, task))["taskId"]
    w.user = call(cluster, "GET", "/api/v1/me")["user"]["id"]
    route = ("POST", "/api/v1/groups")
    made = call(cluster, *route, {"name": "lab", "addUsers": [w.user]})
    w.group = w.keep(route, made)["group"]["groupId"]
    route = ("POST", "/api/v1/tokens")
    w.token = w.keep(route, call(cluster, *route, {"userId": w.user}))["tokenId"]
    return w


def _concrete(template: str, w: World) -> str:
    """A GET route's path with the world's ids in it."""
    by_prefix: list[tuple[str, Callable[[World], object]]] = [
        ("/api/v1/experiments/", lambda w: w.experiment),
        ("/api/v1/trials/", lambda w: w.trial),
        ("/api/v1/tasks/", lambda w: w.trial_task),
        ("/api/v1/tensorboards/", lambda w: w.tensorboard),
        ("/api/v1/commands/", lambda w: w.tasks["command"]),
        ("/api/v1/notebooks/", lambda w: w.tasks["notebook"]),
        ("/api/v1/shells/", lambda w: w.tasks["shell"]),
        ("/api/v1/workspaces/", lambda w: w.workspace),
        ("/api/v1/projects/", lambda w: w.project),
    ]
    path = template.replace("{key:str}", w.project_key).replace("{pool:str}", "gpu")
    path = path.replace("{group_id:int}", str(w.group)).replace("{user_id:int}", str(w.user))
    path = path.replace("{workspace_id:int}", str(w.workspace))
    path = path.replace("/tasks/{id:str}/config", f"/tasks/{w.generic_task}/config")
    path = path.replace("{model_name:str}", w.model).replace("{model_version_num:int}", "1")
    for prefix, value in by_prefix:
        if path.startswith(prefix):
            path = re.sub(r"\{id:\w+\}", str(value(w)), path)
    return path


@pytest.mark.parametrize("template", sorted(GETS))
def test_get_routes_answer_their_messages(
    cluster: Cluster, world: World, official: dict[str, type[message.Message]], template: str
) -> None:
    name, streamed = GETS[template]
    path = _concrete(template, world)
    if not streamed:
        assert_mapping_of(official, name, call(cluster, "GET", path), f"GET {path}")
        return
    found = lines(cluster, path)
    assert found, f"GET {path}: no lines"
    for line in found:
        assert set(line) == {"result"}, line
        assert_mapping_of(official, name, line["result"], f"GET {path}")


def test_the_second_task_logs_route_streams_a_commands_lines(
    cluster: Cluster, world: World, official: dict[str, type[message.Message]]
) -> None:
    path = f"/api/v1/tasks/{world.tasks['command']}/logs"
    wait_until(lambda: lines(cluster, path), 60, "the command's lines")
    for line in lines(cluster, path):
        assert_mapping_of(official, "TaskLog", line["result"], f"GET {path}")


def test_changes_answer_their_messages(
    cluster: Cluster, world: World, official: dict[str, type[message.Message]]
) -> None:
    """Every route that changes something, in an order that leaves each target there until
    its own change (the creations were made by ``world``)."""
    w = world
    done = [(where.split(" ", 1)[0], where.split(" ", 1)[1]) for where, _, _ in w.answers]

    def change(route: tuple[str, str], path: str, body: Any = None) -> Any:
        done.append(route)
        return w.keep(route, call(cluster, route[0], path, body))

    # A config alone, no code (as Determined's `echo yo` experiments are made).
    body = {"config": SLEEP, "activate": True}
    created = change(("POST", "/api/v1/experiments"), "/api/v1/experiments", body)
    exp = created["experiment"]["id"]

    def its_job() -> Any:
        jobs = call(cluster, "GET", "/api/v1/jobs")["jobs"]
        return next((j for j in jobs if j["entityId"] == str(exp)), None)

    updates = [{"jobId": wait_until(its_job, 60, "its job")["jobId"], "priority": 40}]
    for route in (("POST", "/api/v1/jobs/update"), ("POST", "/api/v1/job-queues")):
        change(route, route[1], {"updates": updates})
    (trial,) = wait_until(
        lambda: call(cluster, "GET", f"/api/v1/experiments/{exp}/trials")["trials"], 60, "a trial"
    )
    change(("POST", "/api/v1/trials/{id:int}/kill"), f"/api/v1/trials/{trial['id']}/kill")
    action = ("POST", "/api/v1/experiments/{id:int}/{action:str}")
    change(action, f"/api/v1/experiments/{exp}/kill")
    wait_until(lambda: _state(cluster, exp) == "STATE_CANCELED", 120, "the experiment to end")
    for kind in ("command", "notebook", "shell"):
        base = f"/api/v1/{kind}s/{w.tasks[kind]}"
        change(
            ("POST", f"/api/v1/{kind}s/{{id:str}}/set_priority"),
            f"{base}/set_priority",
            {"priority": 30},
        )
        change(("POST", f"/api/v1/{kind}s/{{id:str}}/kill"), f"{base}/kill")
    change(
        ("POST", "/api/v1/tensorboards/{id:str}/kill"),
        f"/api/v1/tensorboards/{w.tensorboard}/kill",
    )
    ws, proj, model = w.workspace, w.project, f"/api/v1/models/{w.model}"
    change(("PATCH", "/api/v1/workspaces/{id:int}"), f"/api/v1/workspaces/{ws}", {"name": "s2"})
    change(("PATCH", "/api/v1/projects/{id:int}"), f"/api/v1/projects/{proj}", {"name": "q"})
    note = {"name": "Readme", "contents": "# hi"}
    change(("POST", "/api/v1/projects/{id:int}/notes"), f"/api/v1/projects/{proj}/notes", note)
    change(
        ("PUT", "/api/v1/projects/{id:int}/notes"),
        f"/api/v1/projects/{proj}/notes",
        {"notes": [note]},
    )
    change(
        ("POST", "/api/v1/experiments/{id:int}/move"),
        f"/api/v1/experiments/{exp}/move",
        {"destinationProjectId": proj},
    )
    change(
        ("POST", "/api/v1/projects/{id:int}/experiments/move"),
        f"/api/v1/projects/{proj}/experiments/move",
        {"destinationProjectId": 1, "experimentIds": [exp]},
    )
    second = call(cluster, "POST", "/api/v1/workspaces", {"name": "elsewhere"})["workspace"]["id"]
    change(
        ("POST", "/api/v1/projects/{id:int}/move"),
        f"/api/v1/projects/{proj}/move",
        {"destinationWorkspaceId": second},
    )
    for what, path in (
        ("projects", f"/api/v1/projects/{proj}"),
        ("workspaces", f"/api/v1/workspaces/{ws}"),
    ):
        for verb in ("archive", "unarchive"):
            change(("POST", f"/api/v1/{what}/{{id:int}}/{verb}"), f"{path}/{verb}")
    change(("PATCH", "/api/v1/models/{model_name:str}"), model, {"description": "d"})
    version = "/api/v1/models/{model_name:str}/versions/{model_version_num:int}"
    change(("PATCH", version), f"{model}/versions/1", {"comment": "c"})
    for verb in ("archive", "unarchive"):
        change(("POST", f"/api/v1/models/{{model_name:str}}/{verb}"), f"{model}/{verb}")
    change(
        ("POST", "/api/v1/models/{model_name:str}/move"),
        f"{model}/move?destinationWorkspaceId={second}",
    )
    change(("DELETE", version), f"{model}/versions/1")
    change(("DELETE", "/api/v1/models/{model_name:str}"), model)
    (hook,) = call(cluster, "GET", "/api/v1/webhooks")["webhooks"]
    change(("DELETE", "/api/v1/webhooks/{id:int}"), f"/api/v1/webhooks/{hook['id']}")
    _changes_of_access_and_pools(change, cluster, w)
    change(("DELETE", "/api/v1/experiments/{id:int}"), f"/api/v1/experiments/{exp}")
    change(("DELETE", "/api/v1/projects/{id:int}"), f"/api/v1/projects/{proj}")
    change(("DELETE", "/api/v1/workspaces/{id:int}"), f"/api/v1/workspaces/{ws}")
    login = ("POST", "/api/v1/auth/login")
    token = change(login, login[1], {"username": "admin", "password": cluster.admin_password})
    logout = cluster.request("/api/v1/auth/logout", method="POST", token=token["token"])
    with cluster.urlopen(logout, 60) as r:
        done.append(("POST", "/api/v1/auth/logout"))
        w.answers.append(("POST /api/v1/auth/logout", "LogoutResponse", json.load(r)))

    for where, name, answer in w.answers:
        assert_mapping_of(official, name, answer, where)
    untested = set(CHANGES) - set(done)
    assert not untested, f"changes this test does not make: {sorted(untested)}"


def _changes_of_access_and_pools(change: Callable[..., Any], cluster: Cluster, w: World) -> None:
    """main's routes since the REST move: pool bindings, a generic task's steering, access
    tokens, groups and roles (each target made by ``world``)."""
    bind = {"workspaceIds": [w.workspace]}
    for method in ("POST", "PUT", "DELETE"):
        change((method, BINDINGS), "/api/v1/resource-pools/gpu/workspace-bindings", bind)
    task = f"/api/v1/tasks/{w.generic_task}"
    wait_until(lambda: _generic_state(cluster, w.generic_task) == "RUNNING", 60, "the task")
    change(("POST", "/api/v1/tasks/{id:str}/pause"), f"{task}/pause")
    wait_until(lambda: _generic_state(cluster, w.generic_task) == "PAUSED", 60, "the pause")
    change(("POST", "/api/v1/tasks/{id:str}/unpause"), f"{task}/unpause")
    change(("POST", "/api/v1/tasks/{id:str}/kill"), f"{task}/kill", {"killFromRoot": True})
    change(
        ("PATCH", "/api/v1/tokens/{token_id:int}"),
        f"/api/v1/tokens/{w.token}",
        {"description": "ci"},
    )
    group = f"/api/v1/groups/{w.group}"
    found = change(("POST", "/api/v1/groups/search"), "/api/v1/groups/search", {"name": "lab"})
    assert found["pagination"]["total"] == len(found["groups"]) == 1
    change(("PUT", "/api/v1/groups/{group_id:int}"), group, {"name": "lab2"})
    change(
        ("PATCH", "/api/v1/users/assignments"),
        "/api/v1/users/assignments",
        {"userIds": [w.user], "removeGroups": [w.group]},
    )
    roles = change(("POST", "/api/v1/roles/search"), "/api/v1/roles/search", {})["roles"]
    change(
        ("POST", "/api/v1/roles/search/by-ids"),
        "/api/v1/roles/search/by-ids",
        {"roleIds": [r["roleId"] for r in roles]},
    )
    assignable = change(
        ("POST", "/api/v1/roles/search/by-assignability"),
        "/api/v1/roles/search/by-assignability",
        {"workspaceId": w.workspace},
    )["roles"]
    assignment = {
        "groupRoleAssignments": [
            {
                "groupId": w.group,
                "roleAssignment": {
                    "role": {"roleId": assignable[0]["roleId"]},
                    "scopeWorkspaceId": w.workspace,
                },
            }
        ]
    }
    for verb in ("add-assignments", "remove-assignments"):
        change(("POST", f"/api/v1/roles/{verb}"), f"/api/v1/roles/{verb}", assignment)
    change(("DELETE", "/api/v1/groups/{group_id:int}"), group)


def _status(cluster: Cluster, method: str, path: str, raw: bytes) -> tuple[int, Any]:
    req = cluster.request(path, method=method)
    req.data = raw
    req.add_header("Content-Type", "application/json")
    try:
        with cluster.urlopen(req, 60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize(
    ("method", "path", "body", "problem"),
    [
        ("POST", "/api/v1/workspaces", {"name": "x", "bogus": 1}, "bogus: unknown field"),
        ("POST", "/api/v1/workspaces", {"name": 5}, "name: expected a string"),
        ("POST", "/api/v1/models", {"name": "x", "labels": "a"}, "labels: expected an array"),
        ("POST", "/api/v1/commands", {"config": "entrypoint: x"}, "config: expected an object"),
        ("POST", "/api/v1/notebooks", {"templateName": 3}, "templateName: expected a string"),
        ("POST", "/api/v1/shells", {"config": {}, "extra": True}, "extra: unknown field"),
        ("POST", "/api/v1/projects/1/notes", {"name": ["x"]}, "name: expected a string"),
        ("POST", "/api/v1/tensorboards", {"experimentIds": ["x"]}, "experimentIds[0]: expected"),
        ("PATCH", "/api/v1/workspaces/1", {"name": {}}, "name: expected a string"),
    ],
)
def test_a_body_determined_would_not_take_is_a_400_naming_the_field(
    cluster: Cluster, method: str, path: str, body: Any, problem: str
) -> None:
    status, answer = _status(cluster, method, path, json.dumps(body).encode())
    assert status == 400 and problem in answer["error"]["error"], answer


@pytest.mark.parametrize(
    ("method", "path"),
    [(m, p) for (m, p) in sorted(CHANGES) if "{" not in p and "auth" not in p],
)
def test_a_body_nested_200000_deep_is_a_400_not_a_crash(
    cluster: Cluster, method: str, path: str
) -> None:
    status, answer = _status(cluster, method, path, DEEP)
    assert status == 400 and "nested too deeply" in answer["error"]["error"], answer
    assert "Traceback" not in (cluster.root / "master.log").read_text()
