"""Notebooks (`det notebook`): JupyterLab run in the task's context on the slots it asked
for, reached at ``/proxy/<id>/`` with its kernels over WebSockets.

The master declares its port and makes it a token that only the proxy adds to what it
forwards (its users never see it, and nothing else on the agent's host can use the server);
the task reports its address once JupyterLab answers. Its ``idle_timeout`` counts from the
last request through the proxy or the last time the task said it was busy by its
``notebook_idle_type`` (``kernels_or_terminals``, ``kernel_connections``, ``activity``)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from determined.api.gen import v1
from pydet.master.agents.table import Agent
from pydet.master.commands.launcher import shown, start_order
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.generic import GenericTask, GenericTasks, Kind, TaskType

# The notebook's token, and how often its task says whether it is idle.
TOKEN_ENV = "DET_NOTEBOOK_TOKEN"
IDLE_REPORT_ENV = "DET_NOTEBOOK_IDLE_REPORT_SECONDS"
# Determined's check_idle.py reports every 30 s; a shorter idle_timeout gets reports
# often enough to be seen in time.
IDLE_REPORT_SECONDS = 30.0


def new_extra() -> dict[str, object]:
    """What a notebook keeps besides its config: its token, as the proxy sends it."""
    return {"proxy_headers": {"Authorization": f"token {secrets.token_urlsafe(32)}"}}


def to_proto(task: GenericTask) -> v1.Notebook:
    return v1.Notebook(**shown(task), service_address=task.service_address)


def register(generic: GenericTasks) -> None:
    info = generic.info

    def start(
        task: GenericTask, alloc: Allocation, agents: Mapping[str, Agent]
    ) -> v1.StartContainer:
        token = str(task.extra["proxy_headers"]["Authorization"]).removeprefix("token ")
        timeout = task.idle_timeout
        report = IDLE_REPORT_SECONDS if timeout is None else min(30.0, max(1.0, timeout / 4))
        env = {TOKEN_ENV: token, IDLE_REPORT_ENV: f"{report:g}"}
        return start_order(task, alloc, info, agents, env)

    generic.register(TaskType.NOTEBOOK, Kind(start, ports=1))
