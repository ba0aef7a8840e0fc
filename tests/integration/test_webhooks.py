"""Webhooks on a real cluster: `det webhook` manages them, the master POSTs experiment
state changes and `core_context.alert()` to a receiver on loopback, retrying one that fails."""

from __future__ import annotations

import hashlib
import hmac
import json
import pathlib
import time
import urllib.error

import pytest

from tests.cluster import EXAMPLES, Cluster
from tests.integration.test_experiment_life import make_context
from tests.receiver import receiver


def test_a_completed_experiment_is_posted_again_after_the_receiver_answers_500(
    cluster: Cluster,
) -> None:
    with receiver(fail_first=1) as r:
        out = cluster.det("webhook", "create", r.url("/done"), "--states", "COMPLETED,ERROR")
        assert "Created webhook" in out.stdout
        listed = cluster.det("webhook", "list").stdout
        assert r.url("/done") in listed and "EXPERIMENT_STATE_CHANGE COMPLETED" in listed

        exp_id = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal")
        assert cluster.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
        (event,) = r.wait("/done", 1)
        tries = r.all("/done")
        assert [t.status for t in tries] == [500, 200]
        assert tries[0].body["event_id"] == event["event_id"]
        assert event["event_type"] == "EXPERIMENT_STATE_CHANGE"
        assert event["condition"] == {"state": "COMPLETED"}
        experiment = event["event_data"]["experiment"]
        assert experiment["id"] == exp_id
        assert experiment["state"] == "COMPLETED"
        assert experiment["name"] == "minimal"
        assert experiment["slots_per_trial"] == 1
        # Both tries are signed as Determined signs them, with the key the master generated.
        key = (cluster.root / "master" / "webhook-signing-key").read_text().strip().encode()
        for t in tries:
            stamp = t.headers["X-Determined-AI-Signature-Timestamp"]
            assert abs(int(stamp) - time.time()) < 300
            expected = hmac.new(key, stamp.encode() + b"," + t.raw, hashlib.sha256).hexdigest()
            assert t.headers["X-Determined-AI-Signature"] == expected
            assert json.loads(t.raw) == t.body


def test_core_context_alert_reaches_the_custom_webhook_its_experiment_names(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    with receiver() as r:
        cluster.det("webhook", "create", r.url("/alerts"), "--trigger", "CUSTOM", "--name", "team")
        cluster.det("webhook", "create", r.url("/other"), "--trigger", "CUSTOM", "--name", "other")
        cfg, ctx = make_context(
            tmp_path,
            """
            import determined as det

            with det.core.init() as core_context:
                core_context.alert(title="loss diverged", description="loss=nan", level="WARN")
            """,
            """
            name: alerting
            entrypoint: python3 train.py
            searcher: {name: single, metric: x, max_length: 1}
            max_restarts: 0
            integrations:
              webhooks:
                webhook_name: [team]
            """,
        )
        exp_id = cluster.create(cfg, ctx)
        assert cluster.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
        (event,) = r.wait("/alerts", 1)
        (trial,) = cluster.trials(exp_id)
        assert event["event_type"] == "CUSTOM"
        assert event["event_data"] == {
            "custom": {"title": "loss diverged", "description": "loss=nan", "level": "WARN"},
            "experiment_id": exp_id,
            "trial_id": trial["id"],
        }
        assert r.all("/other") == []  # a CUSTOM webhook the experiment does not name


def test_webhooks_are_listed_deleted_and_bad_ones_refused_clearly(cluster: Cluster) -> None:
    created = cluster.det("webhook", "create", "http://127.0.0.1:9/x", "--name", "gone").stdout
    webhook_id = created.split()[2]
    (listed,) = json.loads(cluster.det("webhook", "list", "--json").stdout)
    assert listed["name"] == "gone" and str(listed["id"]) == webhook_id
    cluster.det("webhook", "delete", webhook_id)
    assert json.loads(cluster.det("webhook", "list", "--json").stdout) == []

    bad = cluster.det("webhook", "create", "ftp://example/x", check=False)
    assert bad.returncode == 1 and "webhook.url" in bad.stderr and "Traceback" not in bad.stderr
    bad = cluster.det("webhook", "create", "http://127.0.0.1:9/", "--states", "DONE", check=False)
    assert bad.returncode == 1 and "condition.state" in bad.stderr
    bad = cluster.det("webhook", "delete", "999", check=False)
    assert bad.returncode == 1 and "webhook 999 not found" in bad.stderr


def test_webhooks_are_managed_over_the_http_api_by_admins_only(cluster: Cluster) -> None:
    body = {
        "url": "http://127.0.0.1:9/http",
        "name": "over-http",
        "webhookType": "WEBHOOK_TYPE_SLACK",
        "triggers": [
            {
                "triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
                "condition": {"state": "COMPLETED"},
            }
        ],
    }
    with cluster.urlopen(cluster.request("/api/v1/webhooks", method="POST", body=body), 30) as r:
        created = json.load(r)["webhook"]
    assert created["name"] == "over-http" and created["webhookType"] == "WEBHOOK_TYPE_SLACK"
    assert created["triggers"][0]["condition"] == {"state": "COMPLETED"}
    listed = cluster.get("/api/v1/webhooks")["webhooks"]
    assert [w["id"] for w in listed] == [created["id"]]
    assert "over-http" in cluster.det("webhook", "list").stdout

    cluster.det("user", "create", "alice", "--password", "alice-password")
    alice = cluster.login("alice", "alice-password")
    for method, path, sent in (
        ("GET", "/api/v1/webhooks", None),
        ("POST", "/api/v1/webhooks", body),
        ("DELETE", f"/api/v1/webhooks/{created['id']}", None),
    ):
        with pytest.raises(urllib.error.HTTPError) as refused:
            cluster.urlopen(cluster.request(path, method=method, body=sent, token=alice), 30)
        assert refused.value.code == 403
        assert "only a user with PERMISSION_TYPE_" in json.load(refused.value)["error"]["error"]

    bad = {**body, "webhookType": "CARRIER_PIGEON"}
    with pytest.raises(urllib.error.HTTPError) as refused:
        cluster.urlopen(cluster.request("/api/v1/webhooks", method="POST", body=bad), 30)
    assert refused.value.code == 400
    assert (
        "webhookType: expected one of WEBHOOK_TYPE_DEFAULT"
        in json.load(refused.value)["error"]["error"]
    )

    path = f"/api/v1/webhooks/{created['id']}"
    with cluster.urlopen(cluster.request(path, method="DELETE"), 30):
        pass
    assert cluster.get("/api/v1/webhooks")["webhooks"] == []
