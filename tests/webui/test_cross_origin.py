"""Another web site cannot make a logged-in browser act on the cluster.

A page served from another origin on loopback, opened in a browser that is logged in to the
master, tries what a malicious site would: a no-cors ``fetch`` that creates (forks) an
experiment whose entrypoint would write a marker file, the same as a CORS request with
``application/json``, a pause of the user's experiment, and an HTML form POST whose
``text/plain`` body is the same JSON. Nothing may be created, run or changed.

From ``127.0.0.1`` on another port the page is same-site with the master, so the browser
sends the SameSite=Strict session cookie along: only the master's same-origin and JSON
checks stop it. From ``localhost`` it is another site, and the cookie stays home too.
"""

from __future__ import annotations

import html
import http.server
import json
import pathlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import ACTIVE_STATES, Cluster, free_port
from tests.webui.helpers import CTX, api, config, screenshot

pytestmark = pytest.mark.webui

# Runs in the attacking page once it loads; the results go to window.attack, then the
# title says it is over.
SCRIPT = """
const tries = {
  "no-cors create": () => fetch(MASTER + "/api/v1/experiments", {
    method: "POST", mode: "no-cors", credentials: "include",
    headers: {"Content-Type": "text/plain"}, body: BODY}),
  "cors json create": () => fetch(MASTER + "/api/v1/experiments", {
    method: "POST", mode: "cors", credentials: "include",
    headers: {"Content-Type": "application/json"}, body: BODY}),
  "no-cors pause": () => fetch(MASTER + "/api/v1/experiments/" + PARENT + "/pause", {
    method: "POST", mode: "no-cors", credentials: "include",
    headers: {"Content-Type": "text/plain"}, body: "{}"}),
};
(async () => {
  const results = {};
  for (const [name, attempt] of Object.entries(tries)) {
    try {
      const r = await attempt();
      results[name] = r.type + " " + r.status;
    } catch (e) {
      results[name] = "refused: " + e;
    }
  }
  const sink = document.querySelector("iframe[name=sink]");
  await new Promise((resolve) => {
    sink.addEventListener("load", resolve, {once: true});
    document.getElementById("form").submit();
  });
  results.form = "submitted";
  window.attack = results;
  document.title = "done";
})();
"""


def attack_page(master: str, body: dict[str, Any], parent: int) -> str:
    text = json.dumps(body)
    # A text/plain form sends "name=value": a name that is the JSON up to an extra field's
    # opening quote, and a value that closes it, make the whole body one JSON object.
    name, value = text[:-1] + ', "pad": "', '"}'
    return (
        "<!doctype html><title>cute cats</title><h1>Cute cats</h1>"
        '<iframe name="sink"></iframe>'
        f'<form id="form" method="POST" enctype="text/plain" target="sink"'
        f' action="{html.escape(master)}/api/v1/experiments">'
        f'<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}"></form>'
        f"<script>const MASTER = {json.dumps(master)}; const BODY = {json.dumps(text)};"
        f" const PARENT = {parent};{SCRIPT}</script>"
    )


class AttackSite:
    """A web server on loopback, another origin than the master's, serving one page."""

    def __init__(self) -> None:
        self.page = ""
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                data = site.page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def site() -> Iterator[AttackSite]:
    s = AttackSite()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def victim(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> int:
    """The admin's running experiment, which the attack forks and tries to pause."""
    exp_id = cluster.create(config(tmp_path_factory.mktemp("victim"), "victim"), CTX)
    cluster.wait_state(exp_id, "RUNNING")
    return exp_id


def experiment_count(cluster: Cluster) -> int:
    return int(api(cluster, "/api/v1/experiments?limit=1")["pagination"]["total"])


@pytest.mark.parametrize(
    "attacker_host", ["127.0.0.1", "localhost"], ids=["same-site", "cross-site"]
)
def test_a_page_from_another_origin_cannot_create_or_steer_experiments(
    cluster: Cluster,
    victim: int,
    site: AttackSite,
    page: Any,
    tmp_path: pathlib.Path,
    attacker_host: str,
) -> None:
    master = f"http://{cluster.address}"
    marker = tmp_path / "attack-ran"
    fork = (
        "name: attack\n"
        f"entrypoint: touch {marker}\n"
        "searcher: {name: single, metric: validation_loss, max_length: 1}\n"
        "max_restarts: 0\n"
    )
    site.page = attack_page(master, {"config": fork, "parentId": victim, "activate": True}, victim)
    # The victim is logged in: the app works and shows the experiment.
    page.goto(f"{master}/experiments")
    page.locator(f"tr[data-key='{victim}']").wait_for()
    before = experiment_count(cluster)

    page.goto(f"http://{attacker_host}:{site.port}/")
    page.wait_for_function("() => document.title === 'done'", timeout=30_000)
    results = page.evaluate("window.attack")
    screenshot(page, f"cross-origin-{attacker_host}")

    # No permissive CORS: the preflight for a JSON request from another origin fails, so
    # that request is never sent.
    assert results["cors json create"].startswith("refused"), results
    # Nothing was created, nothing ran, nothing changed.
    assert experiment_count(cluster) == before, results
    assert not any(
        e["name"] == "attack" for e in api(cluster, "/api/v1/experiments")["experiments"]
    )
    assert cluster.state(victim) in ACTIVE_STATES
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert not marker.exists(), "the attacker's entrypoint ran"
        time.sleep(0.5)
    # The user is still logged in, and may still do what the attacker could not.
    page.goto(f"{master}/experiments/{victim}")
    page.locator(".page-head button.action-pause").wait_for()
