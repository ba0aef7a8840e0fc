"""What the WebUI tests share: the browser set-up check, screenshots, a cluster, logging a
browser in, and experiments with a slow trial that reports metrics, checkpoints and logs
every step (ctx/train.py), in configs made per test."""

from __future__ import annotations

import json
import os
import pathlib
import urllib.request
from typing import Any

from pydet.master.gateway import spa
from tests.cluster import Cluster, wait_until

CTX = pathlib.Path(__file__).resolve().parent / "ctx"
CHROMIUM = "/usr/bin/chromium"
# Playwright cannot download its own browser here; these flags keep Debian's Chromium from
# reaching for the network (refused connections, failing Google lookups) on every start.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# What the master serves: the build in its package (scripts/webui.sh build writes it).
DIST = spa.packaged_build() / "index.html"


def missing_browser_setup() -> str | None:
    if not DIST.is_file():
        return "the WebUI is not built: run scripts/webui.sh build"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing: run scripts/webui.sh browser"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is missing: run scripts/webui.sh browser"
    return None


def screenshot(page: Any, name: str) -> None:
    shots = os.environ.get("PYDET_WEBUI_SCREENSHOTS")
    if shots:
        pathlib.Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(pathlib.Path(shots) / f"{name}.png"), full_page=True)


def start_cluster(root: pathlib.Path, *, slots: int) -> Cluster:
    c = Cluster(root)
    try:
        c.start_master()
        c.start_agent("agent-0", slots)
    except BaseException:
        print(c.dump_logs())
        c.close()
        raise
    return c


def config(tmp: pathlib.Path, name: str, *, trials: int = 1, slots: int = 1) -> pathlib.Path:
    searcher = (
        "searcher: {name: single, metric: validation_loss, max_length: 3000}"
        if trials == 1
        else "searcher: {name: random, metric: validation_loss, max_length: 3000,"
        f" max_trials: {trials}, max_concurrent_trials: {trials}}}"
    )
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        "entrypoint: python3 train.py\n"
        "hyperparameters:\n"
        "  lr: {type: double, minval: 0.05, maxval: 0.5}\n"
        "  steps: 3000\n"
        f"{searcher}\n"
        "max_restarts: 0\n"
        f"resources: {{slots_per_trial: {slots}}}\n"
    )
    return path


def create(cluster: Cluster, tmp: pathlib.Path, name: str, **kw: Any) -> int:
    return cluster.create(config(tmp, name, **kw), CTX)


def api(cluster: Cluster, path: str, *, token: str | None = None) -> Any:
    """GET a JSON document from the master as the admin (or as ``token``'s user)."""
    with urllib.request.urlopen(cluster.request(path, token=token), timeout=10) as r:
        return json.load(r)


def sign_in(context: Any, cluster: Cluster, token: str) -> None:
    """Give a browser context the session cookie the master's login sets (``token`` from
    ``cluster.login``), as if it had logged in through the login page."""
    context.add_cookies(
        [
            {
                "name": "det_session",
                "value": token,
                "url": f"http://{cluster.address}",
                "httpOnly": True,
                "sameSite": "Strict",
            }
        ]
    )


def running_trial(cluster: Cluster, exp_id: int, *, min_steps: int = 1) -> int:
    """Wait until the experiment's first trial runs and has reported `min_steps` steps."""

    def check() -> int | None:
        trials = api(cluster, f"/api/v1/experiments/{exp_id}/trials")["trials"]
        for t in trials:
            metrics = api(cluster, f"/api/v1/trials/{t['id']}/metrics?group=training")
            if t["state"] == "STATE_RUNNING" and len(metrics) >= min_steps:
                return int(t["id"])
        return None

    return int(wait_until(check, 90, f"a trial of experiment {exp_id} to report metrics", 0.5))


def job_order(cluster: Cluster) -> list[str]:
    return [j["jobId"] for j in api(cluster, "/api/v1/jobs")["jobs"]]
