"""The login page, the header's user and Log out, and the way back to where the user was."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cluster import Cluster
from tests.webui.helpers import api, screenshot, sign_in

pytestmark = pytest.mark.webui


def log_in(page: Any, username: str, password: str) -> None:
    form = page.locator("form.login-form")
    form.locator("input.username").fill(username)
    form.locator("input.password").fill(password)
    form.locator("button[type=submit]").click()


def session_cookies(context: Any) -> list[dict[str, Any]]:
    return [c for c in context.cookies() if c["name"] == "det_session"]


def test_a_wrong_password_shows_the_masters_error_and_stays_on_the_login_page(
    cluster: Cluster, anonymous_page: Any, context: Any
) -> None:
    page = anonymous_page
    page.goto(f"http://{cluster.address}/experiments")
    page.wait_for_url(re.compile(r"/login$"))
    # Logged out, the header offers neither the pages nor a user.
    assert not page.locator("header nav").is_visible()
    assert not page.locator("header .user").is_visible()
    log_in(page, "admin", "not-the-password")
    error = page.locator("form.login-form .notice.error")
    error.wait_for()
    assert "invalid username or password" in error.inner_text()
    screenshot(page, "login-refused")
    assert urlsplit(page.url).path == "/login"
    assert page.locator("form.login-form input.password").input_value() == ""
    assert session_cookies(context) == []


def test_logging_in_lands_on_the_experiments_and_logging_out_ends_the_session(
    cluster: Cluster, anonymous_page: Any, context: Any
) -> None:
    page = anonymous_page
    page.goto(f"http://{cluster.address}/")
    page.wait_for_url(re.compile(r"/login$"))
    log_in(page, "admin", cluster.admin_password)
    page.wait_for_url(re.compile(r"/experiments$"))
    page.locator("h1", has_text="Experiments").wait_for()
    page.locator("header .user-name", has_text="admin").wait_for()
    screenshot(page, "logged-in")

    (cookie,) = session_cookies(context)
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    # HttpOnly: the page's scripts cannot read the session.
    assert "det_session" not in page.evaluate("document.cookie")
    token = cookie["value"]
    assert api(cluster, "/api/v1/me", token=token)["user"]["username"] == "admin"

    page.locator("header button.logout").click()
    page.wait_for_url(re.compile(r"/login$"))
    page.locator("form.login-form").wait_for()
    assert session_cookies(context) == []
    assert page.evaluate("fetch('/api/v1/experiments').then((r) => r.status)") == 401
    # The session is over on the master, not only forgotten by the browser.
    with pytest.raises(urllib.error.HTTPError) as refused:
        api(cluster, "/api/v1/me", token=token)
    assert refused.value.code == 401
    # And the app sends a logged-out user to the login page, remembering the page.
    page.goto(f"http://{cluster.address}/cluster")
    page.wait_for_url(re.compile(r"/login\?next=%2Fcluster$"))


def test_a_deep_link_comes_back_to_its_page_after_logging_in(
    cluster: Cluster, anonymous_page: Any
) -> None:
    page = anonymous_page
    page.goto(f"http://{cluster.address}/jobs")
    page.wait_for_url(re.compile(r"/login\?next=%2Fjobs$"))
    log_in(page, "admin", cluster.admin_password)
    page.wait_for_url(re.compile(r"/jobs$"))
    page.locator("h1", has_text="Job queue").wait_for()


def test_a_session_that_ends_sends_the_user_to_log_in_and_back(
    cluster: Cluster, anonymous_page: Any, context: Any
) -> None:
    page = anonymous_page
    token = cluster.login()
    sign_in(context, cluster, token)
    page.goto(f"http://{cluster.address}/cluster")
    page.locator("header .user-name", has_text="admin").wait_for()
    page.locator("td", has_text="agent-0").wait_for()
    # The session ends elsewhere (its token logged out), while the page is open.
    logout = cluster.request("/api/v1/auth/logout", method="POST", body={}, token=token)
    urllib.request.urlopen(logout, timeout=10).close()
    page.locator("header nav a", has_text="Job queue").click()
    page.wait_for_url(re.compile(r"/login\?next=%2Fjobs$"))
    log_in(page, "admin", cluster.admin_password)
    page.wait_for_url(re.compile(r"/jobs$"))
    page.locator("h1", has_text="Job queue").wait_for()
