"""WebUI end-to-end tests: Debian's Chromium driven by Playwright for Python against a real
local cluster (tests/cluster.py) serving the built SPA.

Set-up: `scripts/webui.sh build` (the SPA) and `scripts/webui.sh browser` (Chromium and
Playwright). Tests marked ``webui`` skip, saying which step is missing, without them.
Screenshots go to $PYDET_WEBUI_SCREENSHOTS when it is set.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.webui.helpers import CHROMIUM, CHROMIUM_ARGS, missing_browser_setup, start_cluster


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
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(20_000)
    try:
        yield page
    finally:
        shots = os.environ.get("PYDET_WEBUI_SCREENSHOTS")
        if shots:
            path = pathlib.Path(shots) / f"{request.node.name}-final.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(path), full_page=True)
        context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


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
