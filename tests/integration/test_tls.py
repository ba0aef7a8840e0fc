"""A master that serves TLS, with a throw-away CA made by trustme at test time.

The CLI, the agent and the tasks all reach the master over TLS, verified against the CA
(``DET_MASTER_CERT_FILE``, the agent's ``--master-cert-file``); the WebUI and the JSON API
answer over https; a client that cannot verify the master, or that speaks plain HTTP or
gRPC to it, fails with one clear line.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpclib.client
import grpclib.exceptions
import pytest
import trustme

from determined.api.gen import v1
from pydet.agent import docker_runtime
from pydet.master import config
from tests.cluster import ROOT, Cluster, wait_until


@dataclass(frozen=True)
class Pki:
    ca: pathlib.Path
    cert: pathlib.Path
    key: pathlib.Path
    other_ca: pathlib.Path  # a CA that signed nothing of this master's

    def master_config(self) -> str:
        return f"security:\n  tls:\n    cert: {self.cert}\n    key: {self.key}\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    files = Pki(root / "ca.pem", root / "master.pem", root / "master-key.pem", root / "other.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    issued.cert_chain_pems[0].write_to_path(str(files.cert))
    issued.private_key_pem.write_to_path(str(files.key))
    trustme.CA().cert_pem.write_to_path(str(files.other_ca))
    return files


@pytest.fixture(scope="module")
def tls_cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("tls"), master_config=pki.master_config(), ca_file=pki.ca)
    try:
        c.start_master()
        c.start_agent()
        yield c
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


def _det(cluster: Cluster, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pydet.cli", *args],
        env={**cluster.env, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_experiment_completes_with_the_task_talking_tls(
    tls_cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(
        textwrap.dedent(
            """
            import determined as det

            info = det.get_cluster_info()
            print("master", info.master_url, "cert", info.master_cert_file, flush=True)
            with det.core.init() as core_context:
                for op in core_context.searcher.operations():
                    core_context.train.report_training_metrics(op.length, {"loss": 0.5})
                    core_context.train.report_validation_metrics(op.length, {"loss": 0.25})
                    op.report_completed(0.25)
            """
        )
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        "entrypoint: python3 train.py\n"
        "searcher: {name: single, metric: loss, max_length: 2}\n"
        "max_restarts: 0\n"
    )
    exp_id = tls_cluster.create(config, ctx)
    assert tls_cluster.wait_state(exp_id, "COMPLETED", "ERROR", "CANCELED") == "COMPLETED"
    (trial,) = tls_cluster.trials(exp_id)
    described = json.loads(tls_cluster.det("trial", "describe", str(trial["id"]), "--json").stdout)
    groups = sorted(m["group"] for m in described["workloads"])
    assert groups == ["training", "validation"]
    logs = tls_cluster.logs(trial["id"])
    assert f"master {tls_cluster.url} cert {tls_cluster.ca_file}" in logs


def test_webui_and_api_answer_over_https(tls_cluster: Cluster) -> None:
    with tls_cluster.urlopen(f"{tls_cluster.url}/", timeout=10) as r:
        assert r.status == 200
        assert "<html" in r.read().decode().lower()
    agents = tls_cluster.get("/api/v1/agents")["agents"]
    assert [a["id"] for a in agents] == ["agent-0"]
    assert agents[0]["connected"]


@pytest.mark.parametrize(("offered", "chosen"), [(["h2", "http/1.1"], "http/1.1"), (["h2"], "h2")])
def test_browsers_get_http1_and_grpc_clients_get_h2(
    tls_cluster: Cluster, offered: list[str], chosen: str
) -> None:
    # A browser offers h2 first; served h2 it would reach the gRPC server, not the WebUI.
    ctx = ssl.create_default_context(cafile=str(tls_cluster.ca_file))
    ctx.set_alpn_protocols(offered)
    with socket.create_connection(("127.0.0.1", tls_cluster.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.selected_alpn_protocol() == chosen


def test_a_client_that_cannot_verify_the_master_says_so(tls_cluster: Cluster, pki: Pki) -> None:
    wrong = _det(tls_cluster, "experiment", "list", DET_MASTER_CERT_FILE=str(pki.other_ca))
    assert wrong.returncode == 1, wrong.stderr
    (line,) = wrong.stderr.strip().splitlines()
    assert line.startswith(f"Error: cannot verify the master's certificate at {tls_cluster.url}")
    assert "set DET_MASTER_CERT_FILE" in line
    # No CA file: the system's CAs do not know the throw-away CA either.
    env = {k: v for k, v in tls_cluster.env.items() if k != "DET_MASTER_CERT_FILE"}
    system = subprocess.run(
        [sys.executable, "-m", "pydet.cli", "experiment", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert system.returncode == 1
    assert "cannot verify the master's certificate" in system.stderr
    assert "Traceback" not in system.stderr
    missing = _det(tls_cluster, "experiment", "list", DET_MASTER_CERT_FILE="/nonexistent/ca.pem")
    assert missing.returncode == 1
    assert "DET_MASTER_CERT_FILE: cannot read /nonexistent/ca.pem" in missing.stderr


def test_plain_http_and_grpc_to_the_tls_port_fail(tls_cluster: Cluster) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://{tls_cluster.address}/health", timeout=10)

    async def plain_call() -> None:
        channel = grpclib.client.Channel("127.0.0.1", tls_cluster.port)
        try:
            await v1.DeterminedStub(channel).get_master(v1.GetMasterRequest(), timeout=10)
        finally:
            channel.close()

    with pytest.raises((grpclib.exceptions.StreamTerminatedError, ConnectionError, OSError)):
        asyncio.run(plain_call())
    plain = _det(tls_cluster, "experiment", "list", DET_MASTER=f"http://{tls_cluster.address}")
    assert plain.returncode == 1
    (line,) = plain.stderr.strip().splitlines()
    assert line.startswith("Error: cannot reach the master at")
    assert "https://HOST:PORT" in line


@pytest.mark.parametrize(
    ("key_of", "expected"),
    [
        ("mismatched", "does not belong to the certificate"),
        ("missing", "security.tls.key: cannot read"),
        ("garbage", "both must be PEM files"),
    ],
)
def test_a_bad_certificate_or_key_stops_the_master_with_its_reason(
    pki: Pki, tmp_path: pathlib.Path, key_of: str, expected: str
) -> None:
    key = tmp_path / "key.pem"
    if key_of == "mismatched":
        trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(str(key))
    elif key_of == "garbage":
        key.write_text("not a key\n")
    config = tmp_path / "master.yaml"
    config.write_text(f"security:\n  tls:\n    cert: {pki.cert}\n    key: {key}\n")
    argv = ["--config-file", str(config), "--port", "0", "--host", "127.0.0.1"]
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.master", *argv, "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 1
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        # Another CA's certificate, and none at all: the system's CAs do not know ours.
        ("other-ca", "cannot verify the master's certificate"),
        ("no-ca", "cannot verify the master's certificate"),
        # Neither https:// nor a CA file: the agent speaks plain HTTP/2 to a TLS port.
        ("plain", "hung up before welcoming this agent; if it serves TLS, give --master"),
    ],
)
def test_an_agent_that_cannot_verify_the_master_says_why_in_one_line(
    tls_cluster: Cluster, pki: Pki, tmp_path: pathlib.Path, how: str, expected: str
) -> None:
    env = {k: v for k, v in tls_cluster.env.items() if k != "DET_MASTER_CERT_FILE"}
    log = tmp_path / "agent.log"
    argv = {
        "other-ca": ["--master", tls_cluster.url, "--master-cert-file", str(pki.other_ca)],
        "no-ca": ["--master", tls_cluster.url],
        "plain": ["--master", tls_cluster.address],
    }[how]
    argv += ["--agent-id", "doubtful", "--work-dir", str(tmp_path / "work")]
    argv += ["--token-file", str(tls_cluster.agent_token_file)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pydet.agent", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_until(lambda: expected in log.read_text(), 30, f"the agent to say {expected!r}")
        # It keeps trying (a fixed certificate is read at the next attempt), saying it once.
        time.sleep(2)
        text = log.read_text()
        assert proc.poll() is None, text
        (line,) = [x for x in text.splitlines() if "WARNING" in x or "ERROR" in x]
        assert expected in line and "--master-cert-file" in line, text
        assert "Traceback" not in text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "doubtful" not in [a["id"] for a in tls_cluster.agents_json()]


def test_docker_tasks_get_the_ca_file_mounted_read_only(pki: Pki) -> None:
    body: dict[str, Any] = {
        "Env": ["DET_MASTER=https://127.0.0.1:1", "DET_MASTER_CERT_FILE=/elsewhere"],
        "HostConfig": {"Mounts": []},
    }
    docker_runtime._add_master_cert(body, str(pki.ca))
    assert body["Env"] == [
        "DET_MASTER=https://127.0.0.1:1",
        f"DET_MASTER_CERT_FILE={docker_runtime.MASTER_CERT_PATH}",
    ]
    assert body["HostConfig"]["Mounts"] == [
        {
            "Type": "bind",
            "Source": str(pki.ca),
            "Target": docker_runtime.MASTER_CERT_PATH,
            "ReadOnly": True,
        }
    ]


def test_tasks_of_a_tls_master_are_told_https(pki: Pki) -> None:
    tls = config.SecurityConfig(tls=config.TlsConfig(cert=pki.cert, key=pki.key))
    assert config.MasterConfig(host="10.0.0.5", port=8443, security=tls).address_for_tasks() == (
        "https://10.0.0.5:8443"
    )
    advertised = config.MasterConfig(advertised_address="master:8443", security=tls)
    assert advertised.address_for_tasks() == "https://master:8443"
    assert config.MasterConfig(port=8080).address_for_tasks() == "127.0.0.1:8080"


def test_the_sdk_verifies_the_master_with_cert_path_or_not_at_all_with_noverify(
    tls_cluster: Cluster, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    from determined.common import errors
    from determined.experimental import client

    monkeypatch.delenv("DET_MASTER_CERT_FILE", raising=False)
    url, password = tls_cluster.url, tls_cluster.admin_password

    def experiments(**tls: Any) -> list[client.Experiment]:
        d = client.Determined(master=url, user="admin", password=password, **tls)
        try:
            return d.list_experiments()
        finally:
            d.close()

    assert isinstance(experiments(cert_path=str(pki.ca)), list)
    assert isinstance(experiments(noverify=True), list)
    with pytest.raises(errors.FailedPrecondition, match="cannot verify the master"):
        experiments(cert_path=str(pki.other_ca))
