"""What the gateway's proxy passes on to a task's web server, and what it keeps back."""

from __future__ import annotations

from starlette.requests import Request

from pydet.master.gateway import proxy
from pydet.master.tasks.generic import ProxyTarget

# A notebook's: the proxy adds its token, which the client never sent.
TARGET = ProxyTarget(
    task_id="t",
    address="127.0.0.2:2950",
    owner="alice",
    tcp=False,
    headers={"Authorization": "token notebook-token"},
)


def _request(method: str, headers: dict[str, str]) -> Request:
    return Request(
        {
            "type": "http",
            "method": method,
            "path": "/proxy/t/",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        }
    )


def test_the_masters_credentials_never_reach_the_task() -> None:
    sent = proxy._outgoing_headers(
        _request(
            "GET",
            {
                "Authorization": "Bearer session-token",
                "Cookie": "det_session=secret; tb_pref=dark",
                "Accept": "text/html",
                "Connection": "keep-alive",
                "Host": "master:8080",
            },
        ),
        TARGET,
    )
    lowered = {k.lower(): v for k, v in sent.items()}
    assert lowered["authorization"] == "token notebook-token"
    assert "session-token" not in str(sent) and "secret" not in str(sent)
    assert lowered["cookie"] == "tb_pref=dark"
    assert lowered["accept"] == "text/html"
    assert "connection" not in lowered and "host" not in lowered


def test_only_the_session_cookie_means_no_cookie_is_sent() -> None:
    sent = proxy._outgoing_headers(_request("GET", {"Cookie": "det_session=secret"}), TARGET)
    assert "cookie" not in {k.lower() for k in sent}
