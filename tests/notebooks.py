"""Talking to a notebook's JupyterLab through the master's proxy, as a browser's JupyterLab
does: its REST API and a kernel's WebSocket (Jupyter's messaging protocol, JSON)."""

from __future__ import annotations

import asyncio
import json
import uuid

import aiohttp

from tests.cluster import Cluster


async def run_in_kernel(
    cluster: Cluster, nb_id: str, code: str, token: str, kernel: str | None = None
) -> str:
    """Run ``code`` over its WebSocket in ``kernel`` (a new one started through the proxy
    when None), and return what the cell shows (its execute_result, else its stdout)."""
    base = f"http://{cluster.address}/proxy/{nb_id}/"
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as s:
        if kernel is None:
            async with s.post(base + "api/kernels", json={"name": "python3"}) as r:
                assert r.status == 201, await r.text()
                kernel = (await r.json())["id"]
        session = uuid.uuid4().hex
        url = f"ws://{cluster.address}/proxy/{nb_id}/api/kernels/{kernel}/channels?session_id={session}"
        async with s.ws_connect(url) as ws:
            msg_id = uuid.uuid4().hex
            await ws.send_json(
                {
                    "header": {
                        "msg_id": msg_id,
                        "username": "test",
                        "session": session,
                        "msg_type": "execute_request",
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": True,
                        "user_expressions": {},
                        "allow_stdin": False,
                    },
                    "channel": "shell",
                    "buffers": [],
                }
            )
            shown = ""
            async with asyncio.timeout(60):
                while True:
                    message = json.loads((await ws.receive()).data)
                    if message.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    kind = message["msg_type"]
                    if kind == "execute_result":
                        shown += message["content"]["data"]["text/plain"]
                    elif kind == "stream":
                        shown += message["content"]["text"]
                    elif kind == "error":
                        raise AssertionError(message["content"])
                    elif kind == "status" and message["content"]["execution_state"] == "idle":
                        return shown
    raise AssertionError("unreachable")
