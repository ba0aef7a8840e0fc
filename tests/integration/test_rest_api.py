"""The REST API (``/api/v1``) as Determined's clients and scripts use it, against a real
master and agent.

Every route's answer is Determined's JSON: it is read by the official protobuf runtime
(``json_format.ParseDict``, refusing unknown fields) into the message compiled from pydet's
protos, and written back by ``MessageToDict`` to exactly the same JSON (less the ``null`` of
unset fields, which pydet writes as Determined's gateway does); the fields Determined's own
clients require are there under Determined's names. Requests are read as Determined's are:
camelCase or snake_case keys, and a 400 naming the field for anything else.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import pathlib
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import json_format, message

from tests.cluster import Cluster, cluster_fixture, wait_until
from tests.unit.test_wire_oracle import (
    PROTO_DIR,
    _as_json,
    _official_classes,
    _protoc,
    _without_nulls,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("rest"))


TRAIN = """\
import determined as det

with det.core.init() as core:
    for step in range(1, 6):
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1 / step})
        print(f"[rank=0] INFO: step {step}", flush=True)
    core.train.report_validation_metrics(steps_completed=5, metrics={"loss": 0.2, "acc": 0.9})
    with core.checkpoint.store_path({"steps_completed": 5}) as (path, _):
        (path / "weights").write_text("w")
"""


@pytest.fixture(scope="module")
def finished(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> int:
    """An experiment that ran to completion: a trial, its metrics, a checkpoint, logs."""
    ctx = tmp_path_factory.mktemp("ctx")
    (ctx / "train.py").write_text(TRAIN)
    config = ctx / "config.yaml"
    config.write_text(
        "name: reported\nentrypoint: python3 train.py\nhyperparameters: {steps: 5}\n"
        "searcher: {name: single, metric: loss, max_length: 5}\nmax_restarts: 0\n"
    )
    exp_id = cluster.create(config, ctx)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", timeout=180) == "COMPLETED"
    return exp_id


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> dict[str, type[message.Message]]:
    """The official runtime's classes for pydet's protos (compiled by grpc_tools' protoc)."""
    out = tmp_path_factory.mktemp("official") / "v1.pb"
    files = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.glob("v1/*.proto"))
    _protoc(f"-I{PROTO_DIR}", f"--descriptor_set_out={out}", "--include_imports", *files)
    return _official_classes(out)


def call(
    cluster: Cluster, path: str, *, method: str = "GET", body: Any = None, token: str | None = None
) -> tuple[int, Any]:
    """One request with a script's Bearer session: its status and JSON answer."""
    try:
        with cluster.urlopen(cluster.request(path, method=method, body=body, token=token), 60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def ok(cluster: Cluster, path: str, **kwargs: Any) -> Any:
    status, answer = call(cluster, path, **kwargs)
    assert status == 200, (path, answer)
    return answer


def assert_determineds_json(
    official: dict[str, type[message.Message]], name: str, answer: Any
) -> message.Message:
    """``answer`` is the JSON mapping of the message ``v1.<name>``, as the official runtime
    reads and writes it."""
    parsed = json_format.ParseDict(answer, official[f"v1.{name}"]())
    written = json_format.MessageToDict(parsed, always_print_fields_with_no_presence=True)
    assert _as_json(_without_nulls(answer, written)) == _as_json(written)
    return parsed


# What Determined's clients require of each message (its protos' json_schema), by JSON name.
REQUIRED = {
    "Experiment": [
        "id",
        "name",
        "startTime",
        "state",
        "archived",
        "numTrials",
        "username",
        "jobId",
        "searcherType",
        "projectId",
        "originalConfig",
        "projectOwnerId",
        "config",
    ],
    "Pagination": ["offset", "limit", "startIndex", "endIndex", "total"],
    "Trial": [
        "id",
        "experimentId",
        "startTime",
        "state",
        "restarts",
        "hparams",
        "totalBatchesProcessed",
    ],
    "User": ["username", "admin", "active"],
    "Checkpoint": ["uuid", "resources", "metadata", "training", "state"],
    "Agent": ["id", "slotStats"],
    "Job": [
        "type",
        "submissionTime",
        "username",
        "resourcePool",
        "isPreemptible",
        "entityId",
        "name",
        "workspaceId",
        "requestedSlots",
        "allocatedSlots",
        "jobId",
    ],
    "ResourcePool": ["name", "description", "type", "numAgents", "slotsAvailable", "slotsUsed"],
    "GetMasterResponse": [
        "version",
        "masterId",
        "clusterId",
        "clusterName",
        "strictJobQueueControl",
        "hasCustomLogo",
    ],
}


def assert_required(name: str, answer: dict[str, Any]) -> None:
    missing = [key for key in REQUIRED[name] if key not in answer]
    assert not missing, f"{name} lacks {missing}: {sorted(answer)}"


# -- a script's session ------------------------------------------------------------------------


def test_a_script_logs_in_and_reads_the_master_as_from_determined(
    cluster: Cluster, official: dict[str, type[message.Message]]
) -> None:
    body = json.dumps({"username": "admin", "password": cluster.admin_password}).encode()
    req = urllib.request.Request(
        f"{cluster.url}/api/v1/auth/login",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with cluster.urlopen(req, 30) as r:
        login = json.load(r)
    assert_determineds_json(official, "LoginResponse", login)
    assert_required("User", login["user"])
    token = login["token"]
    me = ok(cluster, "/api/v1/me", token=token)
    assert_determineds_json(official, "GetMeResponse", me)
    assert me["user"]["username"] == "admin" and me["user"]["modifiedAt"].endswith("Z")
    info = ok(cluster, "/api/v1/master", token=token)
    assert_determineds_json(official, "GetMasterResponse", info)
    assert_required("GetMasterResponse", info)


# -- experiments -------------------------------------------------------------------------------


def test_experiments_answer_determineds_messages(
    cluster: Cluster, finished: int, official: dict[str, type[message.Message]]
) -> None:
    listed = ok(cluster, "/api/v1/experiments")
    assert_determineds_json(official, "GetExperimentsResponse", listed)
    assert_required("Pagination", listed["pagination"])
    (e,) = [e for e in listed["experiments"] if e["id"] == finished]
    assert_required("Experiment", e)
    assert (e["state"], e["searcherType"], e["numTrials"]) == ("STATE_COMPLETED", "single", 1)
    assert e["startTime"].endswith("Z") and e["endTime"] >= e["startTime"]
    assert e["hyperparameters"] == {"steps": {"type": "const", "val": 5}}
    assert e["config"] is None  # lists leave the config out; the experiment's own GET has it

    got = ok(cluster, f"/api/v1/experiments/{finished}")
    assert_determineds_json(official, "GetExperimentResponse", got)
    assert_required("Experiment", got["experiment"])
    # The config is an object with whole numbers as integers, as Determined's Go writes them.
    assert got["config"]["searcher"]["max_length"] == 5
    assert got["experiment"]["config"] == got["config"]
    assert "entrypoint: python3 train.py" in got["experiment"]["originalConfig"]
    assert got["experiment"]["bestTrialSearcherMetric"] == 0.2
    assert got["experiment"]["checkpointCount"] == 1
    assert got["jobSummary"] is None  # ended: in no queue
    trials = ok(cluster, f"/api/v1/experiments/{finished}/trials")["trials"]
    assert got["experiment"]["trialIds"] == [t["id"] for t in trials]
    assert got["experiment"]["userId"] == 1 and got["experiment"]["projectId"] == 1


def test_experiments_are_listed_as_determineds_parameters_ask(
    cluster: Cluster, finished: int
) -> None:
    ids = {"id": finished}
    for query in (
        "sortBy=SORT_BY_START_TIME&orderBy=ORDER_BY_DESC",
        "sort_by=SORT_BY_ID&order_by=ORDER_BY_ASC&states=STATE_COMPLETED",
        "states=COMPLETED,ERROR&archived=false&limit=1",
        "users=admin&name=report",
    ):
        listed = ok(cluster, f"/api/v1/experiments?{query}")
        assert ids["id"] in [e["id"] for e in listed["experiments"]], query
    none = ok(cluster, "/api/v1/experiments?states=STATE_PAUSED&offset=0&limit=5")
    assert none["experiments"] == [] and none["pagination"]["limit"] == 5
    for query, problem in (
        ("limit=ten", "limit: expected an integer"),
        ("sortBy=SORT_BY_SHOE_SIZE", "sortBy: expected one of"),
        ("sortBy=SORT_BY_CHECKPOINT_SIZE", "sortBy: pydet does not sort by"),
        ("states=STATE_NAPPING", "states[0]: expected one of"),
        ("archived=maybe", "archived: expected true or false"),
    ):
        status, answer = call(cluster, f"/api/v1/experiments?{query}")
        assert status == 400 and answer["error"]["error"].startswith(problem), (query, answer)


# -- trials ------------------------------------------------------------------------------------


def test_trials_answer_determineds_messages(
    cluster: Cluster, finished: int, official: dict[str, type[message.Message]]
) -> None:
    listed = ok(cluster, f"/api/v1/experiments/{finished}/trials")
    assert_determineds_json(official, "GetExperimentTrialsResponse", listed)
    (t,) = listed["trials"]
    assert_required("Trial", t)
    assert (t["state"], t["totalBatchesProcessed"], t["hparams"]) == (
        "STATE_COMPLETED",
        5,
        {"steps": 5},
    )
    validation = t["latestValidation"]
    assert validation["totalBatches"] == 5 and validation["endTime"].endswith("Z")
    assert set(validation["metrics"]["avgMetrics"]) >= {"loss"}
    assert t["checkpointCount"] >= 1 and int(t["totalCheckpointSize"]) > 0
    assert t["taskIds"] == [t["taskId"]] and t["warmStartCheckpointUuid"] == ""
    got = ok(cluster, f"/api/v1/trials/{t['id']}")
    assert_determineds_json(official, "GetTrialResponse", got)
    assert got["trial"] == t


def test_trials_are_listed_as_determineds_parameters_ask(cluster: Cluster, finished: int) -> None:
    path = f"/api/v1/experiments/{finished}/trials"
    for query in (
        "sortBy=SORT_BY_BEST_VALIDATION_METRIC&orderBy=ORDER_BY_DESC",
        "states=STATE_COMPLETED&limit=1&offset=0",
    ):
        assert len(ok(cluster, f"{path}?{query}")["trials"]) == 1, query
    none = ok(cluster, f"{path}?states=STATE_ERROR")
    assert none["trials"] == [] and none["pagination"]["total"] == 0
    status, answer = call(cluster, f"{path}?sortBy=SORT_BY_DURATION")
    assert status == 400 and answer["error"]["error"].startswith(
        "sortBy: pydet does not sort trials by"
    )


# -- checkpoints -------------------------------------------------------------------------------


def test_checkpoints_answer_determineds_messages(
    cluster: Cluster, finished: int, official: dict[str, type[message.Message]]
) -> None:
    (trial,) = ok(cluster, f"/api/v1/experiments/{finished}/trials")["trials"]
    for path in (
        f"/api/v1/experiments/{finished}/checkpoints",
        f"/api/v1/trials/{trial['id']}/checkpoints",
    ):
        listed = ok(cluster, path)
        assert_determineds_json(official, "GetCheckpointsResponse", listed)
        (c,) = listed["checkpoints"]
        assert_required("Checkpoint", c)
        assert c["state"] == "STATE_COMPLETED" and c["metadata"] == {"steps_completed": 5}
        assert c["training"] == {
            "trialId": trial["id"],
            "experimentId": finished,
            "searcherMetric": 0.2,
            "validationMetrics": {"avgMetrics": {"acc": 0.9, "loss": 0.2}, "batchMetrics": []},
        }
        assert c["resources"] == {"weights": "1", "metadata.json": c["resources"]["metadata.json"]}
        assert c["reportTime"].endswith("Z") and c["storage"]["type"] == "shared_fs"


# -- logs ----------------------------------------------------------------------------------------


def stream(cluster: Cluster, path: str) -> list[Any]:
    """A streamed answer, Determined's way: one JSON document a line."""
    with cluster.urlopen(cluster.request(path), 60) as r:
        assert r.headers["content-type"].startswith("application/json")
        return [json.loads(line) for line in r.read().decode().splitlines() if line.strip()]


def test_trial_logs_stream_as_determineds_do(
    cluster: Cluster, finished: int, official: dict[str, type[message.Message]]
) -> None:
    (trial,) = ok(cluster, f"/api/v1/experiments/{finished}/trials")["trials"]
    path = f"/api/v1/trials/{trial['id']}/logs"
    lines = stream(cluster, path)
    assert lines and all(set(line) == {"result"} for line in lines)
    for line in lines:
        assert_determineds_json(official, "TaskLog", line["result"])
    steps = [x["result"] for x in lines if x["result"]["message"].startswith("INFO: step ")]
    assert [x["message"] for x in steps] == [f"INFO: step {i}" for i in range(1, 6)]
    first = steps[0]
    assert (first["rankId"], first["level"], first["trialId"]) == (0, "LOG_LEVEL_INFO", trial["id"])
    assert first["timestamp"].endswith("Z") and first["log"] == first["message"]
    # Determined's filters: levels, ranks, text; limit with order_by takes the last lines.
    query = "levels=LOG_LEVEL_INFO&rankIds=0&searchText=step&limit=2&orderBy=ORDER_BY_DESC"
    assert [x["result"]["message"] for x in stream(cluster, f"{path}?{query}")] == [
        "INFO: step 4",
        "INFO: step 5",
    ]
    # follow: the trial has ended, so the stream ends once every line is sent.
    assert len(stream(cluster, f"{path}?follow=true")) == len(lines)
    status, answer = call(cluster, f"{path}?levels=LOUD")
    assert status == 400 and answer["error"]["error"].startswith("levels[0]: expected one of")
    status, answer = call(cluster, "/api/v1/trials/999/logs")
    assert status == 404 and "trial 999 not found" in answer["error"]["error"]


# -- the cluster -------------------------------------------------------------------------------


def test_agents_pools_and_jobs_answer_determineds_messages(
    cluster: Cluster, official: dict[str, type[message.Message]], tmp_path: pathlib.Path
) -> None:
    agents = ok(cluster, "/api/v1/agents")
    assert_determineds_json(official, "GetAgentsResponse", agents)
    (agent,) = agents["agents"]
    assert_required("Agent", agent)
    assert (agent["id"], agent["resourcePools"], agent["connected"]) == (
        "agent-0",
        ["default"],
        True,
    )
    (slot,) = agent["slots"].values()
    assert slot["device"]["type"] == "TYPE_CPU" and slot["enabled"]
    assert agent["slotStats"]["typeStats"]["TYPE_CPU"]["total"] == 1
    assert agent["registeredTime"].endswith("Z") and agent["addresses"]

    pools = ok(cluster, "/api/v1/resource-pools")
    assert_determineds_json(official, "GetResourcePoolsResponse", pools)
    (pool,) = pools["resourcePools"]
    assert_required("ResourcePool", pool)
    assert (pool["name"], pool["schedulerType"], pool["slotsAvailable"]) == (
        "default",
        "SCHEDULER_TYPE_PRIORITY",
        1,
    )
    assert (
        pool["defaultComputePool"] and pool["details"]["priorityScheduler"]["preemption"] is False
    )

    # A job in the queue: a long trial holds the one slot, a second waits.
    (tmp_path / "sleep.py").write_text("import time\ntime.sleep(600)\n")
    config = tmp_path / "sleep.yaml"
    config.write_text(CONFIG.format(name="sleeper", entrypoint="python3 sleep.py"))
    running, waiting = cluster.create(config, tmp_path), cluster.create(config, tmp_path)
    try:
        for path in ("/api/v1/jobs", "/api/v1/job-queues"):
            listed = wait_until(
                lambda path=path: (j := ok(cluster, path))["jobs"][1:] and j, 60, "two jobs"
            )
            assert_determineds_json(official, "GetJobsResponse", listed)
            first, second = listed["jobs"]
            for job in (first, second):
                assert_required("Job", job)
            assert [first["entityId"], second["entityId"]] == [str(running), str(waiting)]
            assert first["summary"] == {"state": "STATE_SCHEDULED", "jobsAhead": 0}
            assert second["summary"] == {"state": "STATE_QUEUED", "jobsAhead": 1}
            assert first["type"] == "TYPE_EXPERIMENT" and first["allocatedSlots"] == 1
        got = ok(cluster, f"/api/v1/experiments/{waiting}")
        assert got["jobSummary"] == {"state": "STATE_QUEUED", "jobsAhead": 1}
        # Determined's UpdateJobQueueRequest, at Determined's path.
        body = {"updates": [{"jobId": second["jobId"], "aheadOf": first["jobId"]}]}
        assert ok(cluster, "/api/v1/job-queues", method="POST", body=body) == {}
        status, answer = call(
            cluster, "/api/v1/job-queues", method="POST", body={"updates": [{"priority": 1}]}
        )
        assert status == 400 and answer["error"]["error"] == "updates[0].jobId: required"
    finally:
        for exp_id in (running, waiting):
            ok(cluster, f"/api/v1/experiments/{exp_id}/kill", method="POST")


# -- webhooks and tensorboards -----------------------------------------------------------------


def test_webhooks_and_tensorboards_answer_determineds_messages(
    cluster: Cluster, official: dict[str, type[message.Message]]
) -> None:
    body = {
        "url": "http://127.0.0.1:9/hook",
        "name": "rest",
        "webhookType": "WEBHOOK_TYPE_DEFAULT",
        "mode": "WEBHOOK_MODE_WORKSPACE",
        "triggers": [
            {"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": {"state": "ERROR"}}
        ],
    }
    created = ok(cluster, "/api/v1/webhooks", method="POST", body=body)
    assert_determineds_json(official, "PostWebhookResponse", created)
    assert created["webhook"]["triggers"][0]["condition"] == {"state": "ERROR"}
    listed = ok(cluster, "/api/v1/webhooks")
    assert_determineds_json(official, "GetWebhooksResponse", listed)
    assert [w["name"] for w in listed["webhooks"]] == ["rest"]
    assert ok(cluster, f"/api/v1/webhooks/{created['webhook']['id']}", method="DELETE") == {}
    # A condition nested past what the gateway reads is a 400, not a crash.
    deep: Any = "ERROR"
    for _ in range(100):
        deep = {"state": deep}
    trigger = {"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": deep}
    status, answer = call(
        cluster, "/api/v1/webhooks", method="POST", body={**body, "triggers": [trigger]}
    )
    assert status == 400 and "nested more than 64 levels deep" in answer["error"]["error"]
    assert "Traceback" not in (cluster.root / "master.log").read_text()

    boards = ok(cluster, "/api/v1/tensorboards")
    assert_determineds_json(official, "GetTensorboardsResponse", boards)
    assert boards == {"tensorboards": [], "pagination": {**boards["pagination"], "total": 0}}


CONFIG = "name: {name}\nentrypoint: {entrypoint}\nsearcher: {{name: single, metric: x}}\n"


def _tar_files(context: bytes) -> dict[str, bytes]:
    out = {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(context))) as tar:
        for member in tar.getmembers():
            f = tar.extractfile(member)
            if f is not None:
                out[member.name] = f.read()
    return out


def test_an_experiment_is_created_from_a_config_alone_or_with_determineds_files(
    cluster: Cluster, official: dict[str, type[message.Message]]
) -> None:
    # As Determined: no model definition (the code is in the image), created paused unless
    # activate is true.
    body = {"config": CONFIG.format(name="echo", entrypoint="echo yo")}
    created = ok(cluster, "/api/v1/experiments", method="POST", body=body)
    assert_determineds_json(official, "CreateExperimentResponse", created)
    exp_id = created["experiment"]["id"]
    assert created["experiment"]["state"] == "STATE_PAUSED"
    assert created["config"]["entrypoint"] == "echo yo"
    assert created["warnings"] == []
    activated = ok(cluster, f"/api/v1/experiments/{exp_id}/activate", method="POST")
    assert_determineds_json(official, "ExperimentActionResponse", activated)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    assert "yo" in cluster.logs(cluster.trials(exp_id)[0]["id"])

    # Determined's empty answers: an action's experiment aside, deletion is {}.
    paused = ok(cluster, "/api/v1/experiments", method="POST", body=body)["experiment"]["id"]
    killed = ok(cluster, f"/api/v1/experiments/{paused}/kill", method="POST")
    assert_determineds_json(official, "ExperimentActionResponse", killed)
    cluster.wait_state(paused, "CANCELED", timeout=60)
    assert ok(cluster, f"/api/v1/experiments/{paused}", method="DELETE") == {}
    status, answer = call(cluster, f"/api/v1/experiments/{paused}")
    assert status == 404 and answer["error"] == {
        "code": 5,
        "reason": "NotFound",
        "error": f"experiment {paused} not found",
    }

    # Determined's SDK sends the context as modelDefinition files (base64 content).
    script = b"print('from the files')\n"
    files = [
        {"path": "code", "type": ord("5"), "content": "", "mtime": 0, "mode": 0o755},
        {
            "path": "code/run.py",
            "type": ord("0"),
            "content": base64.b64encode(script).decode(),
            "mtime": 1700000000,
            "mode": 0o644,
        },
    ]
    body = {
        "config": CONFIG.format(name="files", entrypoint="python3 code/run.py"),
        "modelDefinition": files,
        "activate": True,
        "validateOnly": False,
    }
    created = ok(cluster, "/api/v1/experiments", method="POST", body=body)
    exp_id = created["experiment"]["id"]
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    assert "from the files" in cluster.logs(cluster.trials(exp_id)[0]["id"])
    ((context,),) = cluster.sql("SELECT data FROM contexts WHERE experiment_id = ?", (exp_id,))
    assert _tar_files(bytes(context)) == {"code/run.py": script}

    # snake_case keys are Determined's too.
    body = {"config": CONFIG.format(name="v", entrypoint="echo"), "validate_only": True}
    checked = ok(cluster, "/api/v1/experiments", method="POST", body=body)
    assert checked["experiment"] is None and checked["config"]["name"] == "v"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"config": "name: x", "paused": True}, "paused: unknown field"),
        ({"config": 5}, "config: expected a string, got the number 5"),
        ({"config": "name: x", "activate": "yes"}, "activate: expected true or false"),
        ({"config": "name: x", "parentId": "seven"}, "parentId: expected an integer"),
        ({"config": "name: x", "modelDefinition": {"path": "x"}}, "modelDefinition: expected an"),
        (
            {"config": "name: x", "modelDefinition": [{"path": "../x", "type": 48}]},
            "modelDefinition[0].path: '../x' must be relative",
        ),
        ({"activate": True}, "config: required"),
        ([1, 2], "request body: expected an object"),
        (
            {"config": "name: x", "modelDefinition": [{"content": {"a": {"b": {}}}}]},
            "modelDefinition[0].content: expected base64 text",
        ),
    ],
)
def test_a_body_determined_would_not_take_is_a_400_naming_the_field(
    cluster: Cluster, body: Any, problem: str
) -> None:
    status, answer = call(cluster, "/api/v1/experiments", method="POST", body=body)
    assert status == 400 and answer["error"]["error"].startswith(problem), answer
    assert "Traceback" not in (cluster.root / "master.log").read_text()
