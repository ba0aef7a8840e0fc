"""The HTTP gateway without sockets: JSON encoding, parameters, error mapping, the
server-sent event stream, the SPA's files and client-side routes, the fast metrics
listing, and sessions and origins (login, logout, the cookie, what other sites cannot
send). The ASGI app is called directly."""

from __future__ import annotations

import asyncio
import json
import math
import pathlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import betterproto2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors, protojson, structs, timestamps
from pydet.master import gateway
from pydet.master.auth import rules as authz
from pydet.master.auth.authenticator import ADMIN_PASSWORD_FILE, Authenticator
from pydet.master.auth.callers import TaskCaller
from pydet.master.cluster.messages import ClusterMessages
from pydet.master.events import Event, EventBus
from pydet.master.gateway import cluster as gateway_cluster
from pydet.master.gateway import codec as gateway_codec
from pydet.master.gateway import mapped
from pydet.master.gateway import spa as gateway_spa
from pydet.master.gateway import stream as gateway_stream
from pydet.master.service import Service
from pydet.master.store.db import Database
from pydet.master.tasks.task_spec import MasterInfo


async def respond(
    app: Any,
    path: str,
    method: str = "GET",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, list[str]], bytes]:
    """One HTTP request through an ASGI app (Host: test); returns (status, headers, body)."""
    raw_path, _, query = path.partition("?")
    sent_headers = {"host": "test", **(headers or {})}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in sent_headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    sent = False
    status = 0
    answer_headers: dict[str, list[str]] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            for k, v in message.get("headers", []):
                answer_headers.setdefault(k.decode().lower(), []).append(v.decode())
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, answer_headers, b"".join(chunks)


async def call(app: Any, path: str, method: str = "GET", body: bytes = b"") -> tuple[int, bytes]:
    """One HTTP request through an ASGI app; returns (status, body)."""
    status, _, answer = await respond(app, path, method, body)
    return status, answer


def slow(message: betterproto2.Message) -> dict[str, Any]:
    return message.to_dict(casing=betterproto2.Casing.CAMEL, include_default_values=True)


MESSAGES: list[betterproto2.Message] = [
    v1.Experiment(
        id=3, name="x", labels=["a"], state=v1.State.PAUSED, start_time=timestamps.to_datetime(1.5)
    ),
    v1.Experiment(
        id=4,
        end_time=timestamps.to_datetime(2.0),
        best_trial_searcher_metric=0.25,
        progress=0.5,
        forked_from=0,
    ),
    v1.GetExperimentsResponse(
        experiments=[v1.Experiment(id=1)], pagination=v1.Pagination(total=10_000)
    ),
    v1.GetExperimentResponse(experiment=None, config=structs.struct({"a": ["x", None, True]})),
    v1.Trial(
        id=1,
        seed=2**40,
        total_batches_processed=7,
        latest_checkpoint_uuid="u",
        state=v1.State.PAUSED,
        latest_validation=v1.MetricsWorkload(
            total_batches=5, metrics=v1.Metrics(avg_metrics=structs.struct({"loss": "x"}))
        ),
    ),
    v1.Trial(id=2, best_validation_metric=float("-inf")),
    v1.TaskLog(id=9, rank_id=None, level=v1.LogLevel.INFO, message="hi", log="hi"),
    v1.TaskLog(id=10, rank_id=3, timestamp=timestamps.to_datetime(1.25)),
    v1.Checkpoint(uuid="u", resources={"a.pt": 12, "b": 2**40}, size=5, training=None),
    v1.Checkpoint(
        uuid="v", training=v1.CheckpointTrainingMetadata(trial_id=1, searcher_metric=float("inf"))
    ),
    v1.GetAgentsResponse(
        agents=[
            v1.Agent(
                id="a",
                slots={"0": v1.Slot(id="0", device=v1.Device(type=v1.DeviceType.CPU))},
            )
        ]
    ),
    v1.Job(
        job_id="j",
        priority=42,
        weight=1.5,
        submission_time=timestamps.to_datetime(3.0),
        entity_id="3",
        summary=v1.JobSummary(state=v1.JobSummaryState.QUEUED),
    ),
    v1.ResourcePool(name="default", slots_available=4, default_compute_pool=True),
    v1.JobUpdate(job_id="j", priority=None, ahead_of="k"),
    v1.MetricReport(group="training", steps_completed=5, metrics='{"loss": 1}'),
    v1.AllGatherResponse(data=[b"\x00\x01", b""]),
    v1.GetExperimentContextResponse(context=b"tar"),
    v1.StartContainer(container_id="c", env={"A": "1"}, argv=["x"], spec=v1.ContainerSpec()),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_fast_json_encoding_matches_betterproto(message: betterproto2.Message) -> None:
    fast, reference = protojson.to_dict(message), slow(message)
    assert json.dumps(fast, sort_keys=True) == json.dumps(reference, sort_keys=True)


def test_int64_values_are_strings_and_states_are_names() -> None:
    out = gateway_codec.to_dict(v1.Trial(id=1, seed=5, state=v1.State.ACTIVE))
    assert out["seed"] == "5"
    assert out["state"] == "STATE_ACTIVE"
    assert out["endTime"] is None


def test_query_parameters_are_checked_with_the_parameter_named() -> None:
    def request(query: str) -> Request:
        return Request({"type": "http", "query_string": query.encode(), "path_params": {}})

    assert gateway_codec.integers(request("rank_ids=0,1&rank_ids=3"), "rank_ids") == [0, 1, 3]
    assert gateway_codec.states(request("state=active&state=STATE_PAUSED"), "state") == [
        v1.State.ACTIVE,
        v1.State.PAUSED,
    ]
    with pytest.raises(errors.InvalidArgument, match="limit: expected an integer, got 'ten'"):
        gateway_codec.integer(request("limit=ten"), "limit")
    with pytest.raises(errors.InvalidArgument, match="offset: must be >= 0"):
        gateway_codec.integer(request("offset=-1"), "offset")
    with pytest.raises(errors.InvalidArgument, match="state: unknown state 'napping'"):
        gateway_codec.states(request("state=napping"), "state")
    with pytest.raises(errors.InvalidArgument, match="archived: expected true or false"):
        gateway_codec.boolean(request("archived=maybe"), "archived")


def test_job_updates_are_validated_field_by_field() -> None:
    # Determined's UpdateJobQueueRequest, camelCase or snake_case; or the list alone.
    body = {"updates": [{"jobId": "j", "priority": 5, "behind_of": "k"}]}
    (update,) = gateway_cluster.job_updates(body)
    assert update == v1.JobUpdate(job_id="j", priority=5, behind_of="k")
    assert gateway_cluster.job_updates([{"job_id": "j", "weight": 2}]) == [
        v1.JobUpdate(job_id="j", weight=2.0)
    ]
    with pytest.raises(errors.InvalidArgument, match=r"updates\[1\].priority: expected an integer"):
        gateway_cluster.job_updates([{"jobId": "j"}, {"jobId": "j", "priority": "high"}])
    with pytest.raises(errors.InvalidArgument, match=r"updates\[0\].colour: unknown field"):
        gateway_cluster.job_updates([{"jobId": "j", "colour": 1}])
    with pytest.raises(errors.InvalidArgument, match=r"updates\[0\].jobId: required"):
        gateway_cluster.job_updates([{"priority": 1}])
    with pytest.raises(errors.InvalidArgument, match="updates: expected a non-empty list"):
        gateway_cluster.job_updates([])


async def test_errors_map_to_their_http_status_and_unexpected_ones_to_a_generic_500() -> None:
    async def missing(request: Request) -> Response:
        raise errors.NotFound("experiment 9 not found")

    async def broken(request: Request) -> Response:
        raise RuntimeError("secret detail")

    app = Starlette(routes=[Route("/a", mapped(missing)), Route("/b", mapped(broken))])
    status, body = await call(app, "/a")
    assert status == 404
    assert json.loads(body) == {
        "error": {"code": 5, "reason": "NotFound", "error": "experiment 9 not found"}
    }
    status, body = await call(app, "/b")
    assert status == 500
    assert json.loads(body)["error"]["reason"] == "Internal" and b"secret" not in body


# -- server-sent events ------------------------------------------------------------------


async def test_stream_sends_matching_events_then_cleans_up() -> None:
    bus = EventBus()
    only = gateway_stream.StreamFilter(trial_id=2)
    stream = gateway_stream.event_stream(bus, only, heartbeat=60)
    assert (await anext(stream)).startswith("retry:")
    bus.publish("trial", id=1, experiment_id=1, state="ACTIVE")
    bus.publish("logs", trial_id=2)
    bus.publish("metrics", trial_id=2, experiment_id=1, groups=["training"], steps_completed=5)
    # Keyed in lowerCamelCase, as the API's JSON is.
    assert await anext(stream) == 'event: logs\ndata: {"trialId":2}\n\n'
    assert (await anext(stream)).startswith('event: metrics\ndata: {"trialId":2,"experimentId":1,')
    await stream.aclose()
    assert not bus._subscribers


async def test_stream_sends_a_heartbeat_when_idle() -> None:
    stream = gateway_stream.event_stream(EventBus(), gateway_stream.StreamFilter(), heartbeat=0.01)
    await anext(stream)
    assert await anext(stream) == ": heartbeat\n\n"
    await stream.aclose()


async def test_stream_ends_once_its_session_has_ended() -> None:
    # A tab left open after logout (or session expiry) stops getting events.
    answers = [True, False]
    checks: list[bool] = []

    async def signed_in() -> bool:
        checks.append(answers[len(checks)])
        return checks[-1]

    bus = EventBus()
    stream = gateway_stream.event_stream(
        bus, gateway_stream.StreamFilter(), heartbeat=0.01, signed_in=signed_in
    )
    await anext(stream)
    assert await anext(stream) == ": heartbeat\n\n"  # still signed in
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    assert checks == [True, False]
    assert not bus._subscribers


def test_stream_filters_by_experiment() -> None:
    only = gateway_stream.StreamFilter(experiment_id=3)
    assert only.matches(Event("experiment", {"id": 3, "state": "PAUSED"}))
    assert only.matches(Event("trial", {"id": 7, "experiment_id": 3, "state": "ACTIVE"}))
    assert not only.matches(Event("experiment", {"id": 4, "state": "PAUSED"}))
    assert not only.matches(Event("logs", {"trial_id": 7}))
    assert only.matches(Event("overflow", {}))


# -- the SPA -------------------------------------------------------------------------------


@pytest.fixture
def spa(tmp_path: pathlib.Path) -> Starlette:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<!doctype html><title>pydet</title>")
    (dist / "assets" / "index-abc.js").write_text("console.log(1)")
    (tmp_path / "secret.txt").write_text("no")

    async def api(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/api/v1/ok", api), *gateway_spa.routes(dist)])


async def test_client_routes_get_the_app_so_a_reload_works(spa: Starlette) -> None:
    for path in ("/", "/experiments/3", "/trials/7/continue", "/jobs"):
        assert await call(spa, path) == (200, b"<!doctype html><title>pydet</title>")


async def test_files_are_served_and_missing_ones_are_404(spa: Starlette) -> None:
    assert await call(spa, "/assets/index-abc.js") == (200, b"console.log(1)")
    assert (await call(spa, "/assets/index-old.js"))[0] == 404
    assert (await call(spa, "/../secret.txt"))[0] == 404
    assert (await call(spa, "/assets/..%2F..%2Fsecret.txt"))[1] != b"no"


async def test_unknown_api_paths_are_json_404_not_the_app(spa: Starlette) -> None:
    assert await call(spa, "/api/v1/ok") == (200, b'{"ok":true}')
    status, body = await call(spa, "/api/v1/nope")
    assert status == 404
    # Determined's error body: the gRPC code, its name, the message.
    assert json.loads(body) == {
        "error": {"code": 5, "reason": "NotFound", "error": "no API route /api/v1/nope"}
    }


async def test_an_empty_development_build_says_what_to_run(tmp_path: pathlib.Path) -> None:
    app = Starlette(routes=gateway_spa.routes(tmp_path))
    status, body = await call(app, "/experiments")
    assert status == 200
    assert b"scripts/webui.sh watch DIR" in body
    (tmp_path / "index.html").write_text("<!doctype html><title>dev</title>")
    assert await call(app, "/experiments") == (200, b"<!doctype html><title>dev</title>")


def test_the_build_is_found_in_the_package_not_the_checkout() -> None:
    package = pathlib.Path(gateway.__file__).parent
    assert gateway_spa.packaged_build() == package / "webui"


# -- the metrics listing -------------------------------------------------------------------


@pytest.fixture
async def store(tmp_path: pathlib.Path) -> Any:
    db = Database(tmp_path / "pydet.db")
    await db.open()
    await db.execute(
        "INSERT INTO experiments (state, config, original_config, start_time, job_id)"
        " VALUES ('ACTIVE', '{}', '', 1.0, 'j')"
    )
    await db.execute(
        "INSERT INTO trials (experiment_id, request_id, state, hparams, seed, start_time)"
        " VALUES (1, 'r', 'ACTIVE', '{}', 1, 1.0)"
    )
    rows = [
        (
            1,
            0,
            "validation" if step % 5 == 0 else "training",
            step,
            json.dumps({"loss": 1 / step}),
            "",
            1700000000.25 + step,
        )
        for step in range(1, 21)
    ]
    await db.execute_many(
        "INSERT INTO metrics (trial_id, run_id, grp, steps_completed, metrics, batch_metrics,"
        " timestamp) VALUES (?,?,?,?,?,?,?)",
        rows,
    )
    # Only what the queries need: the store.
    service = Service.__new__(Service)
    service.db = db
    yield service
    await db.close()


@pytest.mark.parametrize(
    "req",
    [
        v1.GetTrialMetricsRequest(trial_id=1),
        v1.GetTrialMetricsRequest(trial_id=1, group="validation"),
        v1.GetTrialMetricsRequest(trial_id=1, after_steps=12, limit=3),
    ],
    ids=["all", "group", "after-limit"],
)
async def test_metrics_json_is_the_api_messages_encoded(
    store: Service, req: v1.GetTrialMetricsRequest
) -> None:
    fast = json.loads(await store.get_trial_metrics_json(req))
    reference = [slow(m) for m in await store.get_trial_metrics(req)]
    assert fast == reference
    assert fast


async def test_metrics_of_an_unknown_trial_are_not_found(store: Service) -> None:
    with pytest.raises(errors.NotFound, match="trial 5 not found"):
        await store.get_trial_metrics_json(v1.GetTrialMetricsRequest(trial_id=5))


def test_nan_is_written_as_proto3_json_does() -> None:
    out = protojson.to_dict(v1.Experiment(progress=math.nan))
    assert out["progress"] == "NaN"
    assert cast(Any, json.dumps(out))


# -- sessions and origins ------------------------------------------------------------------

ORIGIN = "http://test"
JSON = {"content-type": "application/json", "origin": ORIGIN, "sec-fetch-site": "same-origin"}
AGENT_TOKEN = "the-agent-token"


class NoTasks:
    """A cluster with no running allocations: no task token is valid."""

    def task_caller(self, token: str) -> TaskCaller | None:
        return None


@dataclass
class Master:
    app: Starlette
    password: str

    async def login(self, password: str | None = None) -> tuple[int, dict[str, list[str]], Any]:
        body = json.dumps({"username": "admin", "password": password or self.password})
        status, headers, raw = await respond(
            self.app, "/api/v1/auth/login", "POST", body.encode(), JSON
        )
        return status, headers, json.loads(raw)

    async def session(self) -> str:
        status, headers, _ = await self.login()
        assert status == 200
        return headers["set-cookie"][0].split(";", 1)[0]  # det_session=...


@pytest.fixture
async def master(tmp_path: pathlib.Path) -> AsyncIterator[Master]:
    """The gateway as the master builds it, over a real store and authenticator (with the
    generated admin password); the Service has only what these routes use."""
    db = Database(tmp_path / "pydet.db")
    await db.open()
    auth = Authenticator(db, tasks=NoTasks(), agent_token=AGENT_TOKEN)
    await auth.bootstrap(tmp_path)
    service = Service.__new__(Service)
    service.db = db
    service.version = "test"
    service.master_id = "m"
    service.events = EventBus()
    service.info = MasterInfo(
        cluster_id="c", master_address="", pools=("default",), default_pool="default", defaults={}
    )
    service.messages = ClusterMessages(db)
    app = gateway.build(service, auth, authz.Lookup(db), session_lifetime=3600)
    yield Master(app, (tmp_path / ADMIN_PASSWORD_FILE).read_text().strip())
    await db.close()


async def test_every_api_route_needs_a_session_but_health_login_and_the_app(
    master: Master,
) -> None:
    for path in ("/api/v1/experiments", "/api/v1/master", "/api/v1/me", "/api/v1/jobs"):
        status, _, body = await respond(master.app, path)
        assert status == 401, path
        assert "log in" in json.loads(body)["error"]["error"]
    status, _, body = await respond(master.app, "/api/v1/experiments/1/kill", "POST", b"{}", JSON)
    assert status == 401
    assert (await respond(master.app, "/health"))[0] == 200
    status, headers, _ = await respond(master.app, "/experiments/3")
    assert status == 200
    assert headers["content-type"][0].startswith("text/html")


async def test_login_sets_an_httponly_strict_cookie_that_is_the_session(master: Master) -> None:
    status, headers, body = await master.login()
    assert status == 200
    user = body["user"]
    assert user["username"] == "admin"
    assert user["admin"] is True
    cookie = headers["set-cookie"][0]
    attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")[1:]}
    assert cookie.startswith("det_session=")
    assert {"httponly", "samesite", "path", "max-age"} <= attributes
    assert "samesite=strict" in cookie.lower()
    # A browser's login (it sends Origin) never has the token in the body, where a script
    # could read it.
    assert body["token"] == ""
    assert cookie.split(";")[0].split("=", 1)[1] not in json.dumps(body)

    session = cookie.split(";", 1)[0]
    status, _, body = await respond(master.app, "/api/v1/me", headers={"cookie": session})
    assert (status, json.loads(body)["user"]["username"]) == (200, "admin")
    status, _, body = await respond(master.app, "/api/v1/experiments", headers={"cookie": session})
    assert (status, json.loads(body)["pagination"]["total"]) == (200, 0)


async def test_a_wrong_password_is_refused_with_the_masters_message_and_no_cookie(
    master: Master,
) -> None:
    status, headers, body = await master.login("not-the-password")
    assert status == 401
    assert "invalid username or password" in body["error"]["error"]
    assert "set-cookie" not in headers


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        ({"content-type": "text/plain"}, 400, "Content-Type must be application/json"),
        ({"content-type": "application/x-www-form-urlencoded"}, 400, "Content-Type must be"),
        ({"content-type": "multipart/form-data; boundary=x"}, 400, "Content-Type must be"),
        ({}, 400, "Content-Type must be application/json"),
        ({"origin": "http://evil.example"}, 403, "origin http://evil.example are refused"),
        ({"origin": "http://test:8081"}, 403, "are refused"),
        ({"origin": "null"}, 403, "origin null are refused"),
        ({"sec-fetch-site": "cross-site"}, 403, "cross-site requests are refused"),
        ({"sec-fetch-site": "same-site"}, 403, "cross-site requests are refused"),
    ],
    ids=[
        "text-plain",
        "form",
        "multipart",
        "no-content-type",
        "other-origin",
        "other-port",
        "null-origin",
        "cross-site",
        "same-site",
    ],
)
async def test_a_change_must_be_json_from_the_masters_own_origin(
    master: Master, headers: dict[str, str], status: int, message: str
) -> None:
    session = await master.session()
    sent = {**JSON, "cookie": session, **headers}
    if not headers:
        del sent["content-type"]
    body = json.dumps({"config": "name: x", "parent_id": 1}).encode()
    got, _, answer = await respond(master.app, "/api/v1/experiments", "POST", body, sent)
    assert got == status
    assert message in json.loads(answer)["error"]["error"]
    # Logout is a change too: refused alike, and the session lives on.
    assert (await respond(master.app, "/api/v1/auth/logout", "POST", b"{}", sent))[0] == status
    assert (await respond(master.app, "/api/v1/me", headers={"cookie": session}))[0] == 200


async def test_a_scripts_login_gets_determineds_login_response_with_the_token(
    master: Master,
) -> None:
    # requests.post(f"{master}/api/v1/auth/login", json={...}).json()["token"], as with
    # Determined: no Origin header, so the token is in the body (and it is the session).
    body = json.dumps({"username": "admin", "password": master.password}).encode()
    plain = {"content-type": "application/json"}
    status, _, raw = await respond(master.app, "/api/v1/auth/login", "POST", body, plain)
    answer = json.loads(raw)
    assert status == 200 and set(answer) == {"token", "user"}
    assert answer["user"]["username"] == "admin" and answer["user"]["modifiedAt"].endswith("Z")
    bearer = {"authorization": f"Bearer {answer['token']}"}
    status, _, raw = await respond(master.app, "/api/v1/me", headers=bearer)
    assert (status, json.loads(raw)["user"]["username"]) == (200, "admin")
    # A body Determined's LoginRequest would not take, or a client-side hash, is a 400.
    for sent, problem in [
        ({"username": "admin", "password": master.password, "remember": True}, "remember"),
        ({"username": "admin", "password": 5}, "password: expected a string"),
        ({"username": "admin", "password": "x", "isHashed": True}, "isHashed"),
    ]:
        status, _, raw = await respond(
            master.app, "/api/v1/auth/login", "POST", json.dumps(sent).encode(), plain
        )
        assert status == 400 and problem in json.loads(raw)["error"]["error"]


async def test_login_from_another_origin_is_refused(master: Master) -> None:
    body = json.dumps({"username": "admin", "password": master.password}).encode()
    headers = {**JSON, "origin": "http://evil.example", "sec-fetch-site": "cross-site"}
    status, answer_headers, _ = await respond(
        master.app, "/api/v1/auth/login", "POST", body, headers
    )
    assert status == 403
    assert "set-cookie" not in answer_headers


async def test_logout_ends_the_session_and_clears_the_cookie(master: Master) -> None:
    session = await master.session()
    other = await master.session()
    headers = {**JSON, "cookie": session}
    status, answer_headers, _ = await respond(
        master.app, "/api/v1/auth/logout", "POST", b"{}", headers
    )
    assert status == 200
    cleared = answer_headers["set-cookie"][0].lower()
    assert cleared.startswith('det_session="";') or cleared.startswith("det_session=;")
    assert "max-age=0" in cleared
    assert (await respond(master.app, "/api/v1/me", headers={"cookie": session}))[0] == 401
    # Only that session: the same user's other one still works.
    assert (await respond(master.app, "/api/v1/me", headers={"cookie": other}))[0] == 200


async def test_no_cors_is_granted_to_other_origins(master: Master) -> None:
    session = await master.session()
    preflight = {
        "origin": "http://evil.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    status, headers, _ = await respond(master.app, "/api/v1/experiments", "OPTIONS", b"", preflight)
    assert status >= 400
    assert not any(k.startswith("access-control-") for k in headers)
    read = {"origin": "http://evil.example", "cookie": session}
    status, headers, _ = await respond(master.app, "/api/v1/experiments", headers=read)
    assert not any(k.startswith("access-control-") for k in headers)


async def test_the_http_api_takes_bearer_sessions_but_not_the_agent_token(master: Master) -> None:
    token = (await master.session()).split("=", 1)[1]
    bearer = {"authorization": f"Bearer {token}"}
    assert (await respond(master.app, "/api/v1/me", headers=bearer))[0] == 200
    agent = {"authorization": f"Bearer {AGENT_TOKEN}"}
    status, _, body = await respond(master.app, "/api/v1/me", headers=agent)
    assert status == 403
    assert "for users" in json.loads(body)["error"]["error"]


async def test_a_scripts_bearer_change_needs_no_content_type_but_a_cookies_does(
    master: Master,
) -> None:
    # Determined's clients POST an action without a body; a page cannot make a browser send
    # an Authorization header, so only the cookie's requests must be marked JSON.
    session = await master.session()
    token = session.split("=", 1)[1]
    bearer = {"authorization": f"Bearer {token}"}
    status, _, _ = await respond(master.app, "/api/v1/auth/logout", "POST", b"", bearer)
    assert status == 200
    session = await master.session()
    status, _, body = await respond(
        master.app, "/api/v1/auth/logout", "POST", b"", {"cookie": session}
    )
    assert (
        status == 400
        and "Content-Type must be application/json" in json.loads(body)["error"]["error"]
    )
