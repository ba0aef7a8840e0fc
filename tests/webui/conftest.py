"""WebUI end-to-end tests: Debian's Chromium driven by Playwright for Python against a real
local cluster (tests/cluster.py) serving the built SPA.

Set-up: `scripts/webui.sh build` (the SPA) and `scripts/webui.sh browser` (Chromium and
Playwright). Tests marked ``webui`` skip, saying which step is missing, without them.
Screenshots go to $PYDET_WEBUI_SCREENSHOTS when it is set.

``page`` is logged in to the test's ``cluster`` as admin, with a session of its own (so
that a test that logs out ends no one else's); ``anonymous_page`` is logged in nowhere.
Either fails its test if the page threw, or if the app sent a change (POST, PUT, PATCH) to
the API that was not a JSON body marked ``application/json``: the master refuses those.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cluster import Cluster
from tests.webui.helpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    missing_browser_setup,
    sign_in,
    start_cluster,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "webui: drives the WebUI in headless Chromium")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    reason = missing_browser_setup()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # Playwright gives the browser a fresh, empty profile of its own.
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser profile: no cookies, so logged in nowhere."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(20_000)
    try:
        yield context
    finally:
        context.close()


def not_json(request: Any) -> str | None:
    """Why an API change the app itself sent (not another site's page) is not JSON."""
    if request.method not in ("POST", "PUT", "PATCH") or "/api/v1/" not in request.url:
        return None
    own = urlsplit(request.frame.url).netloc == urlsplit(request.url).netloc
    if not own:
        return None
    kind = request.headers.get("content-type", "")
    if kind.split(";")[0].strip() != "application/json":
        return f"{request.method} {request.url} sent Content-Type {kind!r}"
    try:
        json.loads(request.post_data or "")
    except ValueError:
        return f"{request.method} {request.url} sent a body that is not JSON"
    return None


def watched(page: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Yield ``page``; then save its screenshot (when asked) and fail on uncaught errors
    and on changes the app sent without a JSON body."""
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: errors.extend(filter(None, [not_json(r)])))
    try:
        yield page
    finally:
        shots = os.environ.get("PYDET_WEBUI_SCREENSHOTS")
        if shots:
            path = pathlib.Path(shots) / f"{request.node.name}-final.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(path), full_page=True)
    assert not errors, f"errors in the page: {errors}"


@pytest.fixture
def anonymous_page(context: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from watched(context.new_page(), request)


@pytest.fixture
def page(context: Any, cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Any]:
    sign_in(context, cluster, cluster.login())
    yield from watched(context.new_page(), request)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if missing_browser_setup():
        pytest.skip(str(missing_browser_setup()))
    c = start_cluster(tmp_path_factory.mktemp("webui-cluster"), slots=2)
    try:
        yield c
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()
