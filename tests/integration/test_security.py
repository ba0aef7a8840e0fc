"""Authentication and authorization on a real cluster, tried the way an intruder would.

Every RPC in the generated service descriptors and every ``/api/v1`` route is called without
credentials and with wrong ones; a trial's code tries to report for another trial and to
steer experiments with its task token; an agent without the agent token tries to join; one
user tries to steer another's experiment; sessions expire; logins are flooded; and
neither the logs nor the answers ever show a password, a token or a secret in a config.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import pathlib
import re
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import types
import urllib.error
from collections.abc import Iterator
from typing import Any

import grpclib.client
import grpclib.const
import pytest
from grpclib.exceptions import GRPCError

from determined.api.gen import v1
from determined.common import wire
from pydet.master import gateway
from pydet.master.gateway import auth as gateway_auth
from tests.cluster import ACTIVE_STATES, EXAMPLES, Cluster, cluster_fixture, free_port, wait_until

NOT_LOGGED_IN = "run det user login"
LOGIN = "/v1.Determined/Login"


def service_mapping() -> dict[str, grpclib.const.Handler]:
    """Every RPC of the generated service descriptors, with its types and cardinality."""
    determined = v1.DeterminedBase.__new__(v1.DeterminedBase)
    agents = v1.AgentsBase.__new__(v1.AgentsBase)
    return {**determined.__mapping__(), **agents.__mapping__()}


def channel(cluster: Cluster) -> grpclib.client.Channel:
    return grpclib.client.Channel("127.0.0.1", cluster.port, codec=wire.WireCodec())


async def rpc_error(
    ch: grpclib.client.Channel,
    path: str,
    message: Any,
    token: str | None,
    *,
    timeout: float = 30,
) -> GRPCError | None:
    """The error one call ends with (None if it succeeded), whatever its cardinality."""
    handler = service_mapping()[path]
    try:
        async with ch.request(
            path,
            handler.cardinality,
            handler.request_type,
            handler.reply_type,
            metadata={"x-det-token": token} if token is not None else None,
            timeout=timeout,
        ) as stream:
            await stream.send_message(message, end=True)
            await stream.recv_message()
    except GRPCError as e:
        return e
    return None


def run_det(
    cluster: Cluster, env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pydet.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def env_of(
    cluster: Cluster, user: str | None = None, password: str | None = None
) -> dict[str, str]:
    """The cluster's `det` environment as ``user`` (DET_USER/DET_PASS), or as nobody."""
    env = {k: v for k, v in cluster.env.items() if k not in ("DET_USER", "DET_PASS")}
    if user is not None:
        env["DET_USER"] = user
    if password is not None:
        env["DET_PASS"] = password
    return env


def as_user(
    cluster: Cluster, user: str, password: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return run_det(cluster, env_of(cluster, user, password), *args)


def succeeded(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc


def clear_failure(proc: subprocess.CompletedProcess[str], *expected: str) -> None:
    """A refusal a user can read: exit 1, one line naming why, no traceback."""
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr
    for text in expected:
        assert text in proc.stderr, proc.stderr


def http_status(cluster: Cluster, path: str, *, method: str, headers: dict[str, str]) -> int:
    body = b"{}" if method in ("POST", "PUT", "PATCH") else None
    conn = http.client.HTTPConnection("127.0.0.1", cluster.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def http_login(
    cluster: Cluster, username: str, password: str, *, source: str = "127.0.0.1"
) -> tuple[int, dict[str, Any]]:
    """POST /api/v1/auth/login from ``source`` (any loopback address will do)."""
    conn = http.client.HTTPConnection(
        "127.0.0.1", cluster.port, timeout=60, source_address=(source, 0)
    )
    try:
        conn.request(
            "POST",
            "/api/v1/auth/login",
            body=json.dumps({"username": username, "password": password}),
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


WAITER = """\
import json, os, pathlib, time
stop = pathlib.Path(json.loads(os.environ["DET_HPARAMS"])["stop_file"])
print("waiting", flush=True)
while not stop.exists():
    time.sleep(0.1)
print("done", flush=True)
"""


def waiter(tmp_path: pathlib.Path, name: str = "waiter") -> tuple[pathlib.Path, pathlib.Path]:
    """A config and context whose one trial runs until ``<tmp>/<name>.stop`` exists."""
    ctx = tmp_path / f"{name}-ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(WAITER)
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(
        f"name: {name}\nentrypoint: python3 train.py\n"
        f"hyperparameters: {{stop_file: {tmp_path / (name + '.stop')}}}\n"
        "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
    )
    return cfg, ctx


def stop(tmp_path: pathlib.Path, name: str = "waiter") -> None:
    (tmp_path / f"{name}.stop").write_text("")


# -- (a) nothing answers without credentials -------------------------------------------------


async def test_every_rpc_refuses_a_missing_or_wrong_token(cluster: Cluster) -> None:
    ch = channel(cluster)
    try:
        paths = sorted(service_mapping())
        assert len(paths) > 40
        for path in paths:
            handler = service_mapping()[path]
            if path == LOGIN:
                wrong = v1.LoginRequest(username="admin", password="not-the-password")
                e = await rpc_error(ch, path, wrong, None)
                assert e is not None and e.status == grpclib.const.Status.UNAUTHENTICATED
                continue
            for token in (None, "wrong-token", "x" * 43, cluster.admin_password):
                e = await rpc_error(ch, path, handler.request_type(), token)
                assert e is not None, f"{path} answered with token {token!r}"
                assert e.status == grpclib.const.Status.UNAUTHENTICATED, (path, token, e)
                assert e.message, path
                assert token is None or len(token) < 3 or token not in e.message
        # The agent token opens the agents' stream only.
        agent_token = cluster.agent_token_file.read_text().strip()
        for path in paths:
            if path in (LOGIN, "/v1.Agents/Connect"):
                continue
            handler = service_mapping()[path]
            e = await rpc_error(ch, path, handler.request_type(), agent_token)
            assert e is not None and e.status == grpclib.const.Status.PERMISSION_DENIED, path
    finally:
        ch.close()
    assert cluster.healthy()


def api_routes() -> list[tuple[str, str]]:
    """(method, path) of every ``/api/v1`` route of the master's Starlette app, with sample
    path parameters filled in."""
    service = types.SimpleNamespace(events=None)
    app = gateway.build(service, None, None)  # type: ignore[arg-type]  # routes only
    found = []
    for route in app.routes:
        path = getattr(route, "path", "")
        if not path.startswith("/api/v1") or path in gateway_auth.OPEN_PATHS:
            continue
        concrete = re.sub(r"\{\w+:int\}", "1", path)
        concrete = re.sub(r"\{action:str\}", "pause", concrete)
        concrete = re.sub(r"\{\w+:str\}", "name", concrete)
        for method in sorted(getattr(route, "methods", None) or ()):
            if method != "HEAD":
                found.append((method, concrete))
    return found


def test_every_api_route_refuses_a_missing_or_wrong_session(cluster: Cluster) -> None:
    routes = api_routes()
    assert ("GET", "/api/v1/experiments") in routes
    assert ("POST", "/api/v1/jobs/update") in routes
    assert ("PATCH", "/api/v1/workspaces/1") in routes
    assert ("GET", "/api/v1/projects/key/name") in routes
    assert ("DELETE", "/api/v1/models/name/versions/1") in routes
    assert ("POST", "/api/v1/notebooks/name/kill") in routes
    assert ("GET", "/api/v1/shells/name") in routes
    assert ("GET", "/api/v1/roles/workspace/1") in routes
    assert len(routes) >= 18
    agent_token = cluster.agent_token_file.read_text().strip()
    for method, path in routes:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token"},
            {"Authorization": "Basic YWRtaW46YWRtaW4="},
            {"Cookie": "det_session=wrong-token"},
            {"Authorization": f"Bearer {agent_token}"},
        ):
            headers = {**headers, "Content-Type": "application/json"}
            status = http_status(cluster, path, method=method, headers=headers)
            expected = 403 if agent_token in str(headers) else 401
            assert status == expected, (method, path, headers, status)
    # A task's page through the proxy: the same, before anything about the task is told.
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Cookie": "det_session=wrong-token"},
        {"Authorization": f"Bearer {agent_token}"},
    ):
        for path in ("/proxy/some-task/", "/proxy/some-task/data/runs", "/proxy/some-task"):
            status = http_status(cluster, path, method="GET", headers=headers)
            assert status == (403 if agent_token in str(headers) else 401), (path, headers)
    # The open paths stay open; the WebUI's files need no session.
    assert http_status(cluster, "/health", method="GET", headers={}) == 200
    assert http_status(cluster, "/", method="GET", headers={}) == 200


# -- (b) a task's token is scoped to its own trial ------------------------------------------------

ATTACKER = '''\
"""Uses this task's token against other trials and experiments; one line per attempt."""
import asyncio, json, os, pathlib

import determined as det
from determined.api.gen import v1
from determined.common import client, errors, structs

hp = json.loads(os.environ["DET_HPARAMS"])
victims = [int(t) for t in hp["victim_trials"]]
victim_experiment = int(hp["victim_experiment"])
own_trial = int(os.environ["DET_TRIAL_ID"])
token = os.environ["DET_SESSION_TOKEN"]
# Kept for the test, which tries the token once this allocation is over.
pathlib.Path(hp["token_file"]).write_text(token)


def report(trial_id):
    return v1.ReportTrialMetricsRequest(
        trial_id=trial_id,
        reports=[v1.MetricReport(group="training", steps_completed=1, metrics='{"stolen": 1}')],
    )


def checkpoint(trial_id):
    return v1.ReportCheckpointRequest(
        checkpoint=v1.Checkpoint(
            uuid=f"stolen-{trial_id}", steps_completed=1,
            training=v1.CheckpointTrainingMetadata(
                trial_id=trial_id, experiment_id=victim_experiment
            ),
            metadata=structs.struct({"steps_completed": 1}), state=v1.CheckpointState.COMPLETED,
        )
    )


async def attempts():
    async with client.session(os.environ["DET_MASTER"], token=token) as s:
        tries = [("own metrics", lambda: s.stub.report_trial_metrics(report(own_trial)))]
        for t in victims:
            tries += [
                (f"metrics {t}", lambda t=t: s.stub.report_trial_metrics(report(t))),
                (f"checkpoint {t}", lambda t=t: s.stub.report_checkpoint(checkpoint(t))),
                (f"progress {t}", lambda t=t: s.stub.report_trial_progress(
                    v1.ReportTrialProgressRequest(trial_id=t, progress=0.5))),
                (f"early exit {t}", lambda t=t: s.stub.report_trial_early_exit(
                    v1.ReportTrialEarlyExitRequest(trial_id=t, reason="ERRORED"))),
            ]
        tries += [
            ("create", lambda: s.stub.create_experiment(v1.CreateExperimentRequest(
                config="entrypoint: python3 x.py\\nsearcher: {name: single, metric: x}\\n"))),
            ("kill", lambda: s.stub.kill_experiment(
                v1.ExperimentActionRequest(experiment_id=victim_experiment))),
            ("pause own", lambda: s.stub.pause_experiment(v1.ExperimentActionRequest(
                experiment_id=int(os.environ["DET_EXPERIMENT_ID"])))),
            ("list", lambda: s.stub.get_experiments(v1.GetExperimentsRequest())),
            ("describe", lambda: s.stub.get_experiment(
                v1.GetExperimentRequest(experiment_id=victim_experiment))),
            ("context", lambda: s.stub.get_experiment_context(
                v1.GetExperimentContextRequest(experiment_id=victim_experiment))),
            ("users", lambda: s.stub.get_users(v1.GetUsersRequest())),
            ("tensorboard", lambda: s.stub.launch_tensorboard(
                v1.LaunchTensorboardRequest(experiment_ids=[victim_experiment]))),
            ("tensorboards", lambda: s.stub.get_tensorboards(v1.GetTensorboardsRequest())),
            ("proxy address", lambda: s.stub.post_allocation_proxy_address(
                v1.PostAllocationProxyAddressRequest(
                    allocation_id="someone-else", proxy_address="evil.example:80"))),
        ]
        # A checkpoint "stored" elsewhere, then deleted: the master must not remove it.
        canary = pathlib.Path(hp["canary_dir"])
        own_experiment = int(os.environ["DET_EXPERIMENT_ID"])
        config_storage = json.loads(os.environ["DET_EXPERIMENT_CONFIG"])["checkpoint_storage"]

        def foreign(uuid, storage):
            return v1.ReportCheckpointRequest(
                checkpoint=v1.Checkpoint(
                    uuid=uuid, allocation_id=os.environ["DET_ALLOCATION_ID"], steps_completed=1,
                    training=v1.CheckpointTrainingMetadata(
                        trial_id=own_trial, experiment_id=own_experiment
                    ),
                    metadata=structs.struct({"steps_completed": 1}),
                    state=v1.CheckpointState.COMPLETED, storage=structs.struct(storage),
                )
            )

        elsewhere = {"type": "shared_fs", "host_path": str(canary.parent)}
        climbing = f"../../../../../../../..{canary}"
        tries += [
            ("foreign storage", lambda: s.stub.report_checkpoint(
                foreign(canary.name, elsewhere))),
            ("climbing uuid", lambda: s.stub.report_checkpoint(
                foreign(climbing, config_storage))),
            ("delete foreign", lambda: s.stub.delete_checkpoints(
                v1.DeleteCheckpointsRequest(uuids=[canary.name, climbing]))),
        ]
        for name, call in tries:
            try:
                await s.call(call())
                print(f"ATTEMPT {name}: allowed", flush=True)
            except errors.DetError as e:
                print(f"ATTEMPT {name}: {type(e).__name__}: {e.message}", flush=True)


asyncio.run(attempts())

# The Core API with DET_TRIAL_ID set to another trial's id.
os.environ["DET_TRIAL_ID"] = str(victims[0])


def core_metrics(core):
    core.train.report_training_metrics(steps_completed=1, metrics={"stolen": 1.0})


def core_checkpoint(core):
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, _):
        (path / "stolen").write_text("x")


for name, body in (("metrics", core_metrics), ("checkpoint", core_checkpoint)):
    try:
        with det.core.init() as core:
            body(core)
        print(f"COREAPI {name}: allowed", flush=True)
    except Exception as e:
        print(f"COREAPI {name}: {type(e).__name__}: {e}", flush=True)
print("attacker done", flush=True)
'''


@pytest.fixture
def two_slots(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    (tmp_path / "cluster").mkdir()
    yield from cluster_fixture(tmp_path / "cluster", agents=1, slots=2)


def trial_ids(cluster: Cluster, exp_id: int) -> list[int]:
    return [int(t["id"]) for t in cluster.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]]


def test_a_trial_cannot_report_for_another_trial_or_steer_experiments(
    two_slots: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster = two_slots
    finished = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal")
    cluster.wait_state(finished, "COMPLETED")
    cfg, ctx = waiter(tmp_path)
    live = cluster.create(cfg, ctx)
    wait_until(lambda: trial_ids(cluster, live), 60, "the live victim's trial")
    victims = [trial_ids(cluster, live)[0], trial_ids(cluster, finished)[0]]

    attacker_ctx = tmp_path / "attacker"
    attacker_ctx.mkdir()
    (attacker_ctx / "train.py").write_text(ATTACKER)
    token_file = tmp_path / "attacker-token"
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "precious").write_text("keep me")
    attacker_cfg = tmp_path / "attacker.yaml"
    attacker_cfg.write_text(
        textwrap.dedent(
            f"""\
            name: attacker
            entrypoint: python3 train.py
            hyperparameters:
              victim_trials: {victims}
              victim_experiment: {live}
              token_file: {token_file}
              canary_dir: {canary}
            searcher: {{name: single, metric: x, max_length: 1}}
            max_restarts: 0
            """
        )
    )
    attacker = cluster.create(attacker_cfg, attacker_ctx)
    cluster.wait_state(attacker, "COMPLETED", "ERROR", timeout=120)
    own = trial_ids(cluster, attacker)[0]
    logs = cluster.logs(own)
    assert "attacker done" in logs, logs

    attempts = dict(
        line.split("ATTEMPT ", 1)[1].split(": ", 1)
        for line in logs.splitlines()
        if "ATTEMPT " in line
    )
    assert attempts.pop("own metrics") == "allowed"
    assert len(attempts) == 4 * len(victims) + 13, attempts
    deleted = attempts.pop("delete foreign")
    assert deleted.startswith(("PermissionDenied: ", "NotFound: ")), deleted
    for name, outcome in attempts.items():
        assert outcome.startswith("PermissionDenied: "), (name, outcome)
    assert (canary / "precious").read_text() == "keep me"
    assert f"not trial {victims[0]}" in attempts[f"metrics {victims[0]}"]
    core_api = dict(
        line.split("COREAPI ", 1)[1].split(": ", 1)
        for line in logs.splitlines()
        if "COREAPI " in line
    )
    assert set(core_api) == {"metrics", "checkpoint"}, logs
    for outcome in core_api.values():
        assert f"this task is trial {own}, not trial {victims[0]}" in outcome, outcome

    # Nothing reached the victims.
    for trial_id in victims:
        metrics = cluster.get(f"/api/v1/trials/{trial_id}/metrics")
        assert "stolen" not in json.dumps(metrics)
        assert cluster.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"] == []
        trial = cluster.get(f"/api/v1/trials/{trial_id}")["trial"]
        assert not trial["earlyExit"]
    assert cluster.state(live) in ACTIVE_STATES
    names = [e["name"] for e in cluster.get("/api/v1/experiments")["experiments"]]
    assert sorted(names) == ["attacker", "minimal", "waiter"]

    # The attacker's allocation is over: its token is good for nothing now.
    token = token_file.read_text()

    async def after() -> list[GRPCError | None]:
        ch = channel(cluster)
        try:
            return [
                await rpc_error(
                    ch,
                    "/v1.Determined/ReportTrialMetrics",
                    v1.ReportTrialMetricsRequest(trial_id=own, reports=[]),
                    token,
                ),
                await rpc_error(ch, "/v1.Determined/GetMaster", v1.GetMasterRequest(), token),
            ]
        finally:
            ch.close()

    for e in asyncio.run(after()):
        assert e is not None and e.status == grpclib.const.Status.UNAUTHENTICATED
    stop(tmp_path)
    cluster.wait_state(live, "COMPLETED")


# -- (c) agents need the agent token ---------------------------------------------------------------


def test_an_agent_without_the_agent_token_is_refused_on_both_sides(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    wrong = tmp_path / "wrong-agent-token"
    wrong.write_text("not-the-agent-token\n")
    env = {k: v for k, v in cluster.env.items() if k != "DET_AGENT_TOKEN_FILE"}
    for name, extra in (("rogue-none", []), ("rogue-wrong", ["--token-file", str(wrong)])):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pydet.agent",
                "--master",
                cluster.address,
                "--agent-id",
                name,
                "--slots",
                "1",
                "--work-dir",
                str(tmp_path / name),
                *extra,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0, proc
        assert "Traceback" not in proc.stderr
        assert "agent token" in proc.stderr, proc.stderr
        assert "--token-file" in proc.stderr
    master_log = (cluster.root / "master.log").read_text()
    assert master_log.count("refused an agent from 127.0.0.1") >= 2
    listed = cluster.det("agent", "list").stdout
    assert "rogue" not in listed and "agent-0" in listed
    assert [a["id"] for a in cluster.agents_json()] == ["agent-0"]


# -- (d) owners, other users and admins ------------------------------------------------------------


def test_only_the_owner_or_an_admin_may_steer_an_experiment(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster.det("user", "create", "alice", "--password", "alice-password")
    cluster.det("user", "create", "bob", "--password", "bob-password")
    cfg, ctx = waiter(tmp_path)
    out = as_user(cluster, "alice", "alice-password", "experiment", "create", str(cfg), str(ctx))
    assert out.returncode == 0, out
    exp_id = int(out.stdout.split("Created experiment ")[1].split()[0])
    wait_until(lambda: trial_ids(cluster, exp_id), 60, "the trial")
    described = cluster.experiment(exp_id)
    assert described["username"] == "alice"
    job_id = described["job_id"]

    # The owner shows in the lists; as in Determined, `det e list` alone lists one's own.
    assert "waiter" not in cluster.det("experiment", "list").stdout
    all_rows = cluster.det("experiment", "list", "-a").stdout.splitlines()
    row = next(r for r in all_rows if "waiter" in r)
    assert "alice" in row
    jobs = as_user(cluster, "bob", "bob-password", "job", "list")
    assert jobs.returncode == 0, jobs
    assert "User" in jobs.stdout.splitlines()[0]
    assert "alice" in next(r for r in jobs.stdout.splitlines() if job_id in r)
    priority_before = next(
        j for j in json.loads(cluster.det("job", "list", "--json").stdout) if j["job_id"] == job_id
    )["priority"]

    for verb in ("pause", "kill", "cancel", "archive", "delete"):
        extra = ["--yes"] if verb == "delete" else []
        proc = as_user(cluster, "bob", "bob-password", "experiment", verb, str(exp_id), *extra)
        needed = "DELETE" if verb == "delete" else "UPDATE"
        clear_failure(
            proc,
            f"only the owner of experiment {exp_id} (alice) or a user with"
            f" PERMISSION_TYPE_{needed}_EXPERIMENT",
        )
        assert cluster.state(exp_id) in ACTIVE_STATES
    proc = as_user(cluster, "bob", "bob-password", "job", "update", job_id, "--priority", "1")
    clear_failure(proc, "(alice) or a user with PERMISSION_TYPE_UPDATE_EXPERIMENT")
    proc = as_user(
        cluster, "bob", "bob-password", "experiment", "set", "priority", str(exp_id), "1"
    )
    clear_failure(proc, "(alice) or a user with PERMISSION_TYPE_UPDATE_EXPERIMENT")
    jobs_after = json.loads(cluster.det("job", "list", "--json").stdout)
    assert next(j for j in jobs_after if j["job_id"] == job_id)["priority"] == priority_before
    assert not cluster.experiment(exp_id)["archived"]

    # The owner and an admin may.
    succeeded(
        as_user(cluster, "alice", "alice-password", "job", "update", job_id, "--priority", "7")
    )
    cluster.det("experiment", "pause", str(exp_id))
    cluster.wait_state(exp_id, "PAUSED")
    succeeded(as_user(cluster, "alice", "alice-password", "experiment", "activate", str(exp_id)))
    stop(tmp_path)
    cluster.wait_state(exp_id, "COMPLETED")
    succeeded(as_user(cluster, "alice", "alice-password", "experiment", "archive", str(exp_id)))
    assert cluster.experiment(exp_id)["archived"]
    clear_failure(
        as_user(cluster, "bob", "bob-password", "experiment", "delete", str(exp_id), "--yes"),
        "(alice) or a user with PERMISSION_TYPE_DELETE_EXPERIMENT",
    )
    cluster.det("experiment", "delete", str(exp_id), "--yes")


# Every RPC that acts on one command, notebook or shell, with the field naming it.
TASK_RPCS = {
    "command": ("KillCommand", "SetCommandPriority"),
    "notebook": ("KillNotebook", "SetNotebookPriority", "IdleNotebook"),
    "shell": ("GetShell", "KillShell", "SetShellPriority"),
}


async def test_another_user_can_do_nothing_to_a_users_commands_notebooks_or_shells(
    cluster: Cluster,
) -> None:
    cluster.det("user", "create", "dora", "--password", "dora-password")
    cluster.det("user", "create", "bob", "--password", "bob-password")
    # Never placed (no agent has that many slots): nothing runs, everything is checked.
    ids = {}
    for noun, verb in (("command", "run"), ("notebook", "start"), ("shell", "start")):
        args = [noun, verb, "-d", "--config", "resources.slots=64"]
        proc = as_user(
            cluster, "dora", "dora-password", *args, *(["true"] if noun == "command" else [])
        )
        succeeded(proc)
        ids[noun] = proc.stdout.strip()
    bob = cluster.login("bob", "bob-password")
    ch = channel(cluster)
    try:
        # Every RPC about one of them is in TASK_RPCS, but the reads any user may make
        # (a shell's carries its key, so it is its owner's).
        about_one = {
            path.rsplit("/", 1)[1]
            for path in service_mapping()
            if re.fullmatch(r"/v1\.Determined/(Kill|Set|Get|Idle)(Command|Notebook|Shell)\w*", path)
            and not path.endswith("s")
        }
        assert about_one - {"GetCommand", "GetNotebook"} == {
            rpc for rpcs in TASK_RPCS.values() for rpc in rpcs
        }
        for noun, rpcs in TASK_RPCS.items():
            for rpc in rpcs:
                path = f"/v1.Determined/{rpc}"
                message = service_mapping()[path].request_type(**{f"{noun}_id": ids[noun]})
                e = await rpc_error(ch, path, message, bob)
                assert e is not None and e.status == grpclib.const.Status.PERMISSION_DENIED, rpc
                assert "dora" not in (e.message or "") and "or a user with" in (e.message or "")
    finally:
        ch.close()
    for noun, task_id in ids.items():
        base = f"/api/v1/{noun}s/{task_id}"
        headers = {"Authorization": f"Bearer {bob}", "Content-Type": "application/json"}
        for method, path in (("POST", f"{base}/kill"), ("POST", f"{base}/set_priority")):
            assert http_status(cluster, path, method=method, headers=headers) == 403, path
        for path in (f"/proxy/{task_id}/", f"/proxy/{task_id}/api/kernels"):
            assert http_status(cluster, path, method="GET", headers=headers) == 403, path
    assert (
        http_status(cluster, f"/api/v1/shells/{ids['shell']}", method="GET", headers=headers) == 403
    )
    # All still there, as dora left them; she (or an admin) ends them.
    for noun, task_id in ids.items():
        listed = json.loads(cluster.det(noun, "list", "-a", "--json").stdout)
        assert [t["state"] for t in listed if t["id"] == task_id] == ["STATE_QUEUED"]
        assert [t["priority"] for t in listed if t["id"] == task_id] == [42]
        succeeded(as_user(cluster, "dora", "dora-password", noun, "kill", task_id))


def test_users_log_in_change_passwords_and_are_deactivated_end_to_end(
    cluster: Cluster,
) -> None:
    cluster.det("user", "create", "carol", "--password", "carol-password")
    nobody = env_of(cluster)

    # A login with DET_PASS caches the session; later commands need no password.
    proc = run_det(cluster, {**nobody, "DET_PASS": "carol-password"}, "user", "login", "carol")
    assert proc.returncode == 0 and proc.stdout.strip() == (
        f"Logged in to {cluster.address} as carol"
    ), proc
    proc = run_det(cluster, nobody, "user", "whoami")
    assert proc.stdout.strip() == "You are logged in as user 'carol'", proc
    listed = run_det(cluster, nobody, "user", "list")
    assert listed.returncode == 0
    assert {"admin", "carol"} <= {line.split()[0] for line in listed.stdout.splitlines()[2:]}

    # carol is no admin.
    clear_failure(
        run_det(cluster, nobody, "user", "create", "dave", "--password", "dave-password"),
        "only a user with PERMISSION_TYPE_ADMINISTRATE_USER",
    )
    clear_failure(
        run_det(cluster, nobody, "user", "deactivate", "admin"),
        "only a user with PERMISSION_TYPE_ADMINISTRATE_USER",
    )
    assert "dave" not in cluster.det("user", "list").stdout

    # Her own password she may change; the old one stops working.
    proc = run_det(
        cluster, {**nobody, "DET_NEW_PASSWORD": "carol-new-password"}, "user", "change-password"
    )
    assert proc.returncode == 0 and "Changed the password of carol" in proc.stdout, proc
    assert run_det(cluster, nobody, "user", "whoami").returncode == 0  # this session stays
    assert http_login(cluster, "carol", "carol-password")[0] == 401
    assert http_login(cluster, "carol", "carol-new-password")[0] == 200

    # Deactivated: her session ends and she cannot log in again.
    cluster.det("user", "deactivate", "carol")
    users = json.loads(cluster.det("user", "list", "-a", "--json").stdout)
    assert next(u for u in users if u["username"] == "carol")["active"] is False
    # As in Determined, `det user list` alone lists active users only.
    assert "carol" not in cluster.det("user", "list").stdout
    clear_failure(run_det(cluster, nobody, "user", "whoami"), NOT_LOGGED_IN)
    clear_failure(
        run_det(cluster, {**nobody, "DET_PASS": "carol-new-password"}, "user", "login", "carol"),
        "carol is deactivated",
    )
    status, _ = http_login(cluster, "carol", "carol-new-password")
    assert status == 403

    cluster.det("user", "activate", "carol")
    proc = run_det(cluster, {**nobody, "DET_PASS": "carol-new-password"}, "user", "login", "carol")
    assert proc.returncode == 0, proc
    assert run_det(cluster, nobody, "user", "whoami").stdout.strip().endswith("'carol'")
    proc = run_det(cluster, nobody, "user", "logout")
    assert proc.returncode == 0 and "Logged out" in proc.stdout
    clear_failure(run_det(cluster, nobody, "user", "whoami"), NOT_LOGGED_IN)


# -- (e) sessions expire ---------------------------------------------------------------------------


@pytest.fixture
def short_sessions(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    (tmp_path / "cluster").mkdir()
    c = Cluster(tmp_path / "cluster", master_config="security:\n  session_lifetime: 3\n")
    try:
        c.start_master()
        c.start_agent("agent-0", 1)
        yield c
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


def test_an_expired_session_says_log_in_again_and_loses_nothing(
    short_sessions: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster = short_sessions
    nobody = env_of(cluster)
    proc = run_det(cluster, {**nobody, "DET_PASS": cluster.admin_password}, "user", "login")
    assert proc.returncode == 0, proc
    cfg, ctx = waiter(tmp_path)
    created = run_det(cluster, nobody, "experiment", "create", str(cfg), str(ctx))
    assert created.returncode == 0, created
    exp_id = int(created.stdout.split("Created experiment ")[1].split()[0])

    time.sleep(3.5)
    proc = run_det(cluster, nobody, "experiment", "list")
    assert proc.returncode == 1
    assert proc.stderr == (
        f"Error: not logged in to {cluster.address} (the session has expired or was revoked):"
        f" {NOT_LOGGED_IN}\n"
    )
    # The trial runs on: a task's token is not the user's session.
    stop(tmp_path)
    cluster._token = None
    cluster.wait_state(exp_id, "COMPLETED")
    # With DET_PASS the CLI logs in again by itself and the command runs once.
    out = cluster.det("experiment", "list", "--json").stdout
    assert [e["id"] for e in json.loads(out)] == [exp_id]
    time.sleep(3.5)
    cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal")
    experiments = json.loads(cluster.det("experiment", "list", "--json").stdout)
    assert [e["id"] for e in experiments] == [exp_id, exp_id + 1]
    assert experiments[0]["state"] == "COMPLETED"


def test_a_session_that_expires_mid_command_does_not_repeat_the_command(
    short_sessions: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster = short_sessions
    cfg, ctx = waiter(tmp_path)
    timer = threading.Timer(5, stop, (tmp_path,))
    timer.start()
    try:
        proc = cluster.det("experiment", "create", str(cfg), str(ctx), "-f", check=False)
    finally:
        timer.cancel()
    assert "Traceback" not in proc.stderr
    experiments = json.loads(cluster.det("experiment", "list", "--json").stdout)
    assert len(experiments) == 1, (experiments, proc.stdout, proc.stderr)


# -- (f) huge headers and login floods ---------------------------------------------------------


async def test_a_huge_token_is_refused_clearly_and_the_master_stays_up(
    cluster: Cluster,
) -> None:
    ch = channel(cluster)
    try:
        for size in (300, 16_000, 60_000):
            token = "x" * size
            e = await rpc_error(ch, "/v1.Determined/GetMaster", v1.GetMasterRequest(), token)
            assert e is not None and e.status == grpclib.const.Status.UNAUTHENTICATED
            assert e.message == "malformed token: log in again (det user login)"
    finally:
        ch.close()
    for size in (300, 16_000, 60_000):
        status = http_status(
            cluster,
            "/api/v1/experiments",
            method="GET",
            headers={"Authorization": "Bearer " + "x" * size},
        )
        assert status == 401, (size, status)
    # Past what the HTTP parser takes: refused at once, before any handler.
    try:
        status = http_status(
            cluster,
            "/api/v1/experiments",
            method="GET",
            headers={"Authorization": "Bearer " + "x" * 1_000_000},
        )
        assert 400 <= status < 500
    except ConnectionError:
        pass
    assert cluster.healthy()
    cluster.det("experiment", "list")


async def test_a_login_flood_is_slowed_down_and_others_still_log_in(cluster: Cluster) -> None:
    cluster.det("user", "create", "erin", "--password", "erin-password")
    ch = channel(cluster)
    try:
        stub = v1.DeterminedStub(ch)

        async def guess(i: int) -> str:
            try:
                await stub.login(v1.LoginRequest(username="admin", password=f"guess-{i}"))
            except GRPCError as e:
                assert e.status == grpclib.const.Status.UNAUTHENTICATED
                return e.message or ""
            raise AssertionError("a wrong password logged in")

        started = time.monotonic()
        messages = await asyncio.gather(*(guess(i) for i in range(30)))
        took = time.monotonic() - started
    finally:
        ch.close()
    assert len(set(messages)) == 1 and "invalid username or password" in messages[0]
    # Sent all at once, the later guesses still waited their turn (up to 8 s each).
    assert took >= 4, took
    master_log = (cluster.root / "master.log").read_text()
    assert master_log.count("refused a login for 'admin'") == 30
    # Another user from another address is not held up, and neither is admin: guesses from
    # elsewhere never keep the right password waiting. The guessing address is named.
    started = time.monotonic()
    status, user = http_login(cluster, "erin", "erin-password", source="127.0.0.2")
    assert status == 200 and user["user"]["username"] == "erin"
    assert time.monotonic() - started < 3
    started = time.monotonic()
    status, user = http_login(cluster, "admin", cluster.admin_password, source="127.0.0.2")
    assert status == 200 and user["user"]["username"] == "admin"
    assert time.monotonic() - started < 3
    assert "slowing logins from 127.0.0.1 (for 'admin')" in master_log
    # An unknown user is refused in the same words as a wrong password.
    status, body = http_login(cluster, "nobody-here", "whatever-password", source="127.0.0.3")
    assert status == 401 and body["error"]["error"] == messages[0]


# -- (g) no session, one line ----------------------------------------------------------------------


def test_without_a_session_the_cli_says_exactly_how_to_log_in(cluster: Cluster) -> None:
    nobody = env_of(cluster)
    for args in (("experiment", "list"), ("user", "whoami"), ("agent", "list")):
        proc = run_det(cluster, nobody, *args)
        assert proc.returncode == 1
        assert proc.stdout == ""
        assert proc.stderr == f"Error: not logged in to {cluster.address}: {NOT_LOGGED_IN}\n"
    # DET_USER alone (no password, no cached session) is no session either.
    proc = run_det(cluster, {**nobody, "DET_USER": "admin"}, "experiment", "list")
    assert proc.stderr == f"Error: not logged in to {cluster.address}: {NOT_LOGGED_IN}\n"
    # A wrong password says so, in one line.
    proc = run_det(cluster, env_of(cluster, "admin", "wrong-password"), "experiment", "list")
    clear_failure(proc, "invalid username or password")
    assert proc.stderr.count("\n") == 1


# -- (h) secrets stay secret -----------------------------------------------------------------------


def secret_values(cluster: Cluster) -> dict[str, str]:
    """Every password and token of this cluster that a log or an answer must not show."""
    found = {
        "admin password": cluster.admin_password,
        "agent token": cluster.agent_token_file.read_text().strip(),
        "HTTP session": cluster.token,
    }
    auth_json = cluster.root / "config" / "pydet" / "auth.json"
    for master in json.loads(auth_json.read_text())["masters"].values():
        for user, token in master["tokens"].items():
            found[f"CLI session of {user}"] = token
    for alloc_id, token in cluster.sql("SELECT id, token FROM allocations"):
        found[f"task token of {alloc_id}"] = token
    return found


def test_secret_files_are_private_and_logs_show_no_secret(cluster: Cluster) -> None:
    data = cluster.root / "master"
    for name in ("admin-password", "agent-token"):
        assert stat.S_IMODE((data / name).stat().st_mode) == 0o600, name
    exp_id = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal")
    cluster.wait_state(exp_id, "COMPLETED")
    trial = trial_ids(cluster, exp_id)[0]
    status, _ = http_login(cluster, "admin", "a-wrong-password")
    assert status == 401
    secrets = secret_values(cluster)
    assert any(k.startswith("task token") for k in secrets)
    master_log = (cluster.root / "master.log").read_text()
    assert str(data / "admin-password") in master_log
    shown = {
        "master log": master_log,
        "agent log": (cluster.root / "agent-0.log").read_text(),
        "trial logs": cluster.logs(trial),
        "describe": cluster.det("experiment", "describe", str(exp_id), "--json").stdout,
        "experiment JSON": json.dumps(cluster.get(f"/api/v1/experiments/{exp_id}")),
    }
    assert "DEBUG" in shown["master log"] and "DEBUG" in shown["agent log"]
    for where, text in shown.items():
        for what, secret in secrets.items():
            assert secret not in text, f"the {what} is in the {where}"


CREDENTIALS = {
    "access_key": "AKIAIOSFODNN7EXAMPLE",
    "secret_key": "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY",
    "password": "registry-password-1234",
}


def test_describe_and_the_webui_show_no_secret_from_a_config(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text("print('never runs')\n")
    cfg = tmp_path / "secret.yaml"
    cfg.write_text(
        textwrap.dedent(
            f"""\
            name: with-secrets  # credentials below
            entrypoint: python3 train.py
            searcher: {{name: single, metric: x, max_length: 1}}
            checkpoint_storage:
              type: s3
              bucket: my-bucket
              access_key: {CREDENTIALS["access_key"]}
              secret_key: "{CREDENTIALS["secret_key"]}"
            environment:
              registry_auth:
                username: robot
                password: '{CREDENTIALS["password"]}'
            """
        )
    )
    exp_id = cluster.create(cfg, ctx, "--paused")
    described = cluster.det("experiment", "describe", str(exp_id), "--json").stdout
    config = cluster.det("experiment", "config", str(exp_id)).stdout
    webui = cluster.get(f"/api/v1/experiments/{exp_id}")
    for text in (described, config, json.dumps(webui)):
        for secret in CREDENTIALS.values():
            assert secret not in text
    shown = webui["config"]
    assert shown["checkpoint_storage"]["secret_key"] == "********"
    assert shown["checkpoint_storage"]["bucket"] == "my-bucket"
    assert shown["environment"]["registry_auth"]["username"] == "robot"
    assert "# credentials below" in webui["experiment"]["originalConfig"]
    # The task still gets them: the stored config is complete.
    ((stored,),) = cluster.sql("SELECT config FROM experiments WHERE id = ?", (exp_id,))
    assert all(secret in stored for secret in CREDENTIALS.values())

    # A fork of the config as shown runs with the parent's credentials.
    fork = json.loads(
        cluster.urlopen(
            cluster.request(
                "/api/v1/experiments",
                method="POST",
                body={
                    "config": webui["experiment"]["originalConfig"],
                    "parentId": exp_id,
                    "activate": False,
                },
            ),
            timeout=30,
        ).read()
    )
    fork_id = fork["experiment"]["id"]
    ((stored,),) = cluster.sql("SELECT config FROM experiments WHERE id = ?", (int(fork_id),))
    assert json.loads(stored)["checkpoint_storage"]["secret_key"] == CREDENTIALS["secret_key"]

    # A refused config does not quote the secret it refuses.
    bad = cfg.read_text().replace(f"'{CREDENTIALS['password']}'", "987654321")
    with pytest.raises(urllib.error.HTTPError) as refused:
        cluster.urlopen(
            cluster.request("/api/v1/experiments", method="POST", body={"config": bad}),
            timeout=30,
        )
    error = json.loads(refused.value.read())["error"]["error"]
    assert "registry_auth.password" in error and "987654321" not in error
    master_log = (cluster.root / "master.log").read_text()
    for secret in (*CREDENTIALS.values(), "987654321"):
        assert secret not in master_log


def test_the_admin_password_file_is_the_only_place_the_password_is_written(
    cluster: Cluster,
) -> None:
    password = cluster.admin_password
    for path in cluster.root.rglob("*"):
        if not path.is_file() or path.name == "admin-password":
            continue
        if path.stat().st_size > 50_000_000:
            continue
        assert password.encode() not in path.read_bytes(), path
    assert os.stat(cluster.root / "master" / "admin-password").st_mode & 0o077 == 0


# -- det deploy local --------------------------------------------------------------------------


def test_a_local_deploy_listens_on_loopback_and_logs_the_cli_in(tmp_path: pathlib.Path) -> None:
    port = free_port()
    data_dir = tmp_path / "local"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DET_USER", "DET_PASS", "DET_MASTER", "DET_MASTER_CERT_FILE")
    }
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), DET_MASTER=f"localhost:{port}")

    def det(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pydet.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    for _ in range(3):
        # A free port can be taken by another process's connection before cluster-up binds.
        up = det(
            "deploy",
            "local",
            "cluster-up",
            "--master-port",
            str(port),
            "--data-dir",
            str(data_dir),
            "--agents",
            "1",
            "--slots",
            "1",
        )
        if "is in use" not in up.stderr:
            break
        port = free_port()
        env["DET_MASTER"] = f"localhost:{port}"
    try:
        assert up.returncode == 0, up
        password_file = next(data_dir.rglob("admin-password"))
        assert f"the admin password (for the WebUI and other machines) is in {password_file}" in (
            up.stdout
        )
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert password_file.read_text().strip() not in up.stdout + up.stderr
        # Logged in as admin already: no password needed.
        whoami = det("user", "whoami")
        assert whoami.stdout.strip() == "You are logged in as user 'admin' (admin)", whoami
        # Bound to 127.0.0.1 only: another loopback address is not answered.
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with pytest.raises(OSError):
            with socket.create_connection(("127.0.0.2", port), timeout=5):
                pass
    finally:
        down = det("deploy", "local", "cluster-down", "--data-dir", str(data_dir))
        assert down.returncode == 0, down
