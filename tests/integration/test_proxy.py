"""The master's task proxy (``/proxy/<task id>/``): it forwards only to the address of the
agent that runs the task and to a port declared for the task, whatever the task reports;
it carries WebSockets and HTTP alike, each authenticated as the owner's or as a user's with
UPDATE_NSC (an admin's)."""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.cluster import Cluster, free_port, running, wait_until

# Agents on loopback addresses of their own, as on two other hosts.
AGENTS = {"agent-0": "127.0.0.2", "agent-1": "127.0.0.3"}

POSTER = """
import json, os
from determined.api import lite as v1
from determined.common import client

own = json.loads(os.environ["DET_CONTAINER_ADDRS"])[0]
other = "127.0.0.3" if own == "127.0.0.2" else "127.0.0.2"
master = os.environ["DET_MASTER"].rpartition(":")[2]
declared = int(os.environ["DECLARED"])
targets = [
    f"127.0.0.1:{master}",      # the master's own loopback
    f"localhost:{master}",
    f"{other}:2950",            # another agent
    "169.254.169.254:80",       # a cloud's metadata service
    f"{own}:22",                # its own agent, a port nobody declared
    f"{own}:{declared}",        # its own agent, its declared port: the one allowed
]
ch = client.blocking_channel(os.environ["DET_MASTER"])
stub = v1.stub(ch.unary, metadata=client.metadata(os.environ["DET_SESSION_TOKEN"]))
for target in targets:
    request = v1.PostAllocationProxyAddressRequest(
        allocation_id=os.environ["DET_ALLOCATION_ID"], proxy_address=target
    )
    try:
        stub.post_allocation_proxy_address(request, timeout=30)
        print("accepted", target, flush=True)
    except Exception as e:
        found = client.translate(e, os.environ["DET_MASTER"])
        print("refused", target, type(found).__name__, found.message, flush=True)
"""

SERVER = """
import json, os, sys
from aiohttp import web

async def anything(request):
    if request.headers.get("Upgrade", "").lower() == "websocket":
        ws = web.WebSocketResponse(protocols=["echo.v1"])
        await ws.prepare(request)
        async for message in ws:
            if message.type == web.WSMsgType.TEXT:
                await ws.send_str("echo:" + message.data)
            elif message.type == web.WSMsgType.BINARY:
                await ws.send_bytes(message.data[::-1])
        return ws
    return web.json_response({"path": request.path, "headers": dict(request.headers)})

app = web.Application()
app.router.add_route("*", "/{tail:.*}", anything)
host = json.loads(os.environ["DET_CONTAINER_ADDRS"])[0]
web.run_app(app, host=host, port=int(sys.argv[1]), print=lambda *a: print(*a, flush=True))
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    def start(c: Cluster) -> None:
        c.start_master()
        for agent_id, address in AGENTS.items():
            c.spawn_agent(agent_id, "--slots", "1", "--address", address)
        wait_until(
            lambda: {a["id"] for a in c.agents_json() if a["connected"]} == set(AGENTS),
            30,
            "both agents to connect",
        )

    yield from running(Cluster(tmp_path_factory.mktemp("proxy")), start)


def _run_detached(cluster: Cluster, ctx: pathlib.Path, *args: str) -> str:
    return cluster.det("cmd", "run", "-d", "-c", str(ctx), *args).stdout.strip()


def _command(cluster: Cluster, cmd_id: str) -> dict[str, Any]:
    return dict(cluster.get(f"/api/v1/commands/{cmd_id}")["command"])


def test_a_task_may_report_only_its_own_agents_address_and_a_declared_port(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "post.py").write_text(POSTER)
    port = free_port()
    out = cluster.det(
        "cmd",
        "run",
        "-c",
        str(tmp_path),
        "--config",
        f"environment.proxy_ports=[{{proxy_port: {port}}}]",
        "--config",
        f"environment.environment_variables=[DECLARED={port}]",
        "python3",
        "post.py",
    ).stdout
    lines = [line for line in out.splitlines() if line.startswith(("accepted", "refused"))]
    assert len(lines) == 6, out
    *refused, allowed = lines
    for line in refused:
        assert line.startswith("refused") and "PermissionDenied" in line, line
    assert "is not on agent" in refused[0] and "which runs this task" in refused[0]
    assert "is not on agent" in refused[2] and "is not on agent" in refused[3]
    assert "port 22 was not declared for this task" in refused[4]
    assert allowed.startswith("accepted") and allowed.endswith(f":{port}"), allowed


def test_http_and_websockets_reach_a_declared_port_through_the_proxy(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "serve.py").write_text(SERVER)
    port = free_port()
    cmd_id = _run_detached(
        cluster,
        tmp_path,
        "--config",
        f"environment.proxy_ports=[{{proxy_port: {port}}}]",
        "python3",
        "serve.py",
        str(port),
    )
    base = f"/proxy/{cmd_id}/"
    token = cluster.token
    wait_until(lambda: cluster.fetch(base, token)[0] == 200, 60, "the server to answer")
    status, body = cluster.fetch(f"{base}some/page?x=1", token)
    seen = json.loads(body)
    assert status == 200 and seen["path"] == f"{base}some/page"
    # The master's credentials stay with the master.
    assert "Authorization" not in seen["headers"] and token not in json.dumps(seen)
    # Where it forwards: the agent that runs it, at the port it declared.
    agent = _command(cluster, cmd_id)
    tasks = json.loads(cluster.det("task", "list", "--json").stdout)
    (summary,) = [t for t in tasks.values() if t["task_id"] == cmd_id]
    ((resources),) = summary["resources"]
    assert resources["agent_id"] in AGENTS and agent["state"] == "STATE_RUNNING"

    cluster.det("user", "create", "mallory", "--password", "mallory-secret-1")
    mallory = cluster.login("mallory", "mallory-secret-1")
    url = f"ws://{cluster.address}{base}kernels?session=1"

    async def talk() -> None:
        async with aiohttp.ClientSession() as s:
            headers = {"Authorization": f"Bearer {token}"}
            async with s.ws_connect(url, headers=headers, protocols=["echo.v1"]) as ws:
                assert ws.protocol == "echo.v1"
                await ws.send_str("hello")
                assert (await ws.receive()).data == "echo:hello"
                await ws.send_bytes(b"\x00\x01\x02" * 1000)
                assert (await ws.receive()).data == b"\x02\x01\x00" * 1000
            # Refused before anything reaches the task: no session, another user's, another
            # site's page (a WebSocket is not bound by the same-origin policy).
            for bad, status in (
                ({}, 401),
                ({"Authorization": "Bearer wrong-token"}, 401),
                ({"Authorization": f"Bearer {mallory}"}, 403),
                ({**headers, "Origin": "https://evil.example"}, 403),
            ):
                with pytest.raises(aiohttp.WSServerHandshakeError) as e:
                    await s.ws_connect(url, headers=bad)
                assert e.value.status == status, bad
            # Nothing about the task in another user's refusal.
            async with s.get(
                f"http://{cluster.address}{base}", headers={"Authorization": f"Bearer {mallory}"}
            ) as r:
                text = await r.text()
                assert r.status == 403 and "UPDATE_NSC" in text and "mallory" not in text

    asyncio.run(talk())
    assert cluster.fetch(base, mallory)[0] == 403
    cluster.det("cmd", "kill", cmd_id)
    wait_until(lambda: cluster.fetch(base, token)[0] == 404, 30, "the proxy to forget it")


def test_a_declared_port_must_ask_for_a_session(cluster: Cluster) -> None:
    proc = cluster.det(
        "cmd",
        "run",
        "--config",
        "environment.proxy_ports=[{proxy_port: 8080, unauthenticated: true}]",
        "true",
        check=False,
    )
    assert proc.returncode == 1
    assert re.search(r"proxy_ports\[0\]\.unauthenticated: .*always asks", proc.stderr)
