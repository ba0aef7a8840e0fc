"""A notebook's task (``det notebook start``): JupyterLab in the task's working directory,
under the master's proxy path, on the port the master declared for it on its agent's address,
with the token that only the master's proxy sends. Once JupyterLab answers, the address is
reported and the master's ``/proxy/<task id>/`` reaches it; kernels and terminals talk over
WebSockets through the same path.

While it runs, a thread asks JupyterLab every few seconds whether it is idle by the config's
``notebook_idle_type`` (as Determined's ``check_idle.py`` does) and tells the master when it
is not (``IdleNotebook``), which keeps its ``idle_timeout`` from running out:

- ``kernels_or_terminals``: busy while any kernel, terminal or session is open;
- ``kernel_connections``: busy while any kernel has a connection (an open notebook);
- ``activity``: busy while any kernel executes, or a kernel or terminal did something since
  the last look.

Nothing is fetched from the internet: JupyterLab's news and update checks are off.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from types import FrameType
from typing import Any

from determined.exec import _proxied

log = logging.getLogger("determined.exec.notebook")

READY_TIMEOUT = 120.0
IDLE_TYPES = ("kernels_or_terminals", "kernel_connections", "activity")


class _Jupyter:
    """JupyterLab's REST API, as the notebook's own task calls it (with its token)."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self._headers = {"Authorization": f"token {token}"}

    def get(self, path: str) -> Any:
        request = urllib.request.Request(self.base + path, headers=self._headers)
        with urllib.request.urlopen(request, timeout=10) as r:
            return json.load(r)

    def answers(self) -> bool:
        try:
            self.get("api/status")
            return True
        except (urllib.error.URLError, OSError, ValueError):
            return False


class IdleWatch:
    """Whether the notebook is idle, by its ``notebook_idle_type``."""

    def __init__(self, jupyter: _Jupyter, idle_type: str) -> None:
        self._jupyter = jupyter
        self._type = idle_type if idle_type in IDLE_TYPES else IDLE_TYPES[0]
        self._last: str | None = None

    def idle(self) -> bool:
        kernels = self._jupyter.get("api/kernels")
        terminals = self._jupyter.get("api/terminals")
        if self._type == "kernel_connections":
            return all(int(k.get("connections", 0)) == 0 for k in kernels)
        if self._type == "activity":
            last = max((str(x.get("last_activity", "")) for x in kernels + terminals), default=None)
            busy = any(k.get("execution_state") == "busy" for k in kernels)
            changed, self._last = last != self._last, last
            return not busy and not changed
        sessions = self._jupyter.get("api/sessions")
        return not kernels and not terminals and not sessions


def _report_idleness(watch: IdleWatch, every: float, env: Mapping[str, str]) -> None:
    from determined.api import lite as v1
    from determined.common import client

    channel = client.blocking_channel(
        env["DET_MASTER"], cert_file=env.get("DET_MASTER_CERT_FILE") or None
    )
    stub = v1.stub(channel.unary, metadata=client.metadata(env["DET_SESSION_TOKEN"]))
    notebook_id = env["DET_TASK_ID"]
    while True:
        try:
            idle = watch.idle()
            stub.idle_notebook(
                v1.IdleNotebookRequest(notebook_id=notebook_id, idle=idle), timeout=30
            )
        except Exception as e:  # a busy JupyterLab or master: say so and look again later
            log.warning("could not tell the master whether the notebook is idle: %s", e)
        threading.Event().wait(every)


# JupyterLab's own entry, without rfc3987_syntax: jsonschema (through jupyter_events) builds
# that module's grammar as it is imported, more than half of JupyterLab's start, for a
# format check (IRIs in event payloads) that it skips when the module is missing.
_LAB = (
    "import sys; sys.modules['rfc3987_syntax'] = None; "
    "from jupyterlab.labapp import main; sys.exit(main())"
)


def command(host: str, port: int, env: Mapping[str, str]) -> list[str]:
    """JupyterLab's command line: under the proxy path, with the task's token."""
    return [
        sys.executable,
        "-c",
        _LAB,
        f"--ServerApp.ip={host}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={env['DET_PROXY_PATH']}",
        f"--IdentityProvider.token={env['DET_NOTEBOOK_TOKEN']}",
        # The master's proxy checks who may come and from which origin; behind it, Host
        # and Origin are the master's.
        "--ServerApp.allow_origin=*",
        "--ServerApp.allow_remote_access=True",
        "--ServerApp.allow_root=True",
        "--ServerApp.open_browser=False",
        f"--ServerApp.root_dir={os.getcwd()}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=",
    ]


def serve(config: Mapping[str, Any], env: Mapping[str, str] = os.environ) -> int:
    """Run JupyterLab until it exits (or the task is killed); its exit status."""
    logging.getLogger().setLevel(logging.INFO)
    import importlib.util

    if importlib.util.find_spec("jupyterlab") is None:
        return _proxied.fail(
            f"JupyterLab is not installed in this task's Python ({sys.executable}); install "
            "it where the agent runs tasks (pip install jupyterlab), or use an image with it"
        )
    try:
        host, port = _proxied.address(env)
    except _proxied.NotServing as e:
        return _proxied.fail(str(e))
    runtime = tempfile.mkdtemp(prefix="jupyter-runtime-")
    child_env = {**env, "JUPYTER_RUNTIME_DIR": runtime, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command(host, port, env), env=child_env)

    def stop(signum: int, frame: FrameType | None) -> None:
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    jupyter = _Jupyter(f"http://{host}:{port}{env['DET_PROXY_PATH']}", env["DET_NOTEBOOK_TOKEN"])
    try:
        _proxied.wait_until(jupyter.answers, proc, READY_TIMEOUT, "JupyterLab")
    except _proxied.NotServing as e:
        if proc.poll() is None:
            proc.kill()
        _proxied.fail(str(e))
        return proc.wait() or 1
    _proxied.report(host, port, env=env)
    log.info("JupyterLab is ready at %s through the master", env["DET_PROXY_PATH"])
    every = float(env.get("DET_NOTEBOOK_IDLE_REPORT_SECONDS") or 30)
    watch = IdleWatch(jupyter, str(config.get("notebook_idle_type") or IDLE_TYPES[0]))
    threading.Thread(
        target=_report_idleness, args=(watch, every, env), name="idle-watch", daemon=True
    ).start()
    return proc.wait()
