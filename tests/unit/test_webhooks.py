"""Who gets a webhook event, what an alert may carry, and a queue that stays bounded."""

from __future__ import annotations

import logging

import pytest

from determined.api.gen import v1
from determined.common import errors, structs
from pydet.master.webhooks.dispatch import Subscription, alert_fields
from pydet.master.webhooks.sender import Delivery, Sender
from pydet.master.webhooks.store import Trigger, Webhook, check


def hook(webhook_id: int, name: str, mode: v1.WebhookMode) -> Webhook:
    trigger = Trigger(1, v1.TriggerType.CUSTOM)
    return Webhook(webhook_id, name, "http://x/", v1.WebhookType.DEFAULT, mode, (trigger,))


EVERYONE = hook(1, "everyone", v1.WebhookMode.WORKSPACE)
NAMED = hook(2, "named", v1.WebhookMode.SPECIFIC)


def test_workspace_webhooks_reach_every_experiment_unless_it_excludes_itself() -> None:
    assert Subscription.of({}).reached_by(EVERYONE)
    assert not Subscription.of({}).reached_by(NAMED)
    excluded = Subscription.of({"integrations": {"webhooks": {"exclude": True}}})
    assert not excluded.reached_by(EVERYONE)


def test_an_experiment_names_a_webhook_by_id_or_by_name() -> None:
    by_name = Subscription.of({"integrations": {"webhooks": {"webhook_name": ["named"]}}})
    by_id = Subscription.of({"integrations": {"webhooks": {"webhook_id": [2]}}})
    assert by_name.reached_by(NAMED) and by_id.reached_by(NAMED)
    assert by_name.names_it(NAMED) and not by_name.names_it(EVERYONE)


def test_an_alert_level_is_one_of_determineds_and_its_text_is_bounded() -> None:
    fields = alert_fields(v1.CustomWebhookEventData(title="t", level="warn"))
    assert fields == {"title": "t", "description": "", "level": "WARN"}
    assert alert_fields(v1.CustomWebhookEventData())["level"] == "INFO"
    with pytest.raises(errors.InvalidArgument, match=r"data\.level"):
        alert_fields(v1.CustomWebhookEventData(level="LOUD"))
    with pytest.raises(errors.InvalidArgument, match=r"data\.title"):
        alert_fields(v1.CustomWebhookEventData(title="x" * 5000))


def test_a_webhook_needs_an_http_url_and_triggers_pydet_delivers() -> None:
    state = v1.Trigger(
        trigger_type=v1.TriggerType.EXPERIMENT_STATE_CHANGE,
        condition=structs.struct({"state": "ERROR"}),
    )
    name, triggers = check(v1.Webhook(url="https://example.com/h", triggers=[state]))
    assert name == "https://example.com/h"
    assert triggers == [(v1.TriggerType.EXPERIMENT_STATE_CHANGE, {"state": "ERROR"})]
    with pytest.raises(errors.InvalidArgument, match=r"webhook\.url"):
        check(v1.Webhook(url="file:///etc/passwd", triggers=[state]))
    with pytest.raises(errors.InvalidArgument, match=r"triggers\[0\]\.trigger_type"):
        metric = v1.Trigger(trigger_type=v1.TriggerType.METRIC_THRESHOLD_EXCEEDED)
        check(v1.Webhook(url="http://h/", triggers=[metric]))
    with pytest.raises(errors.InvalidArgument, match="at least one trigger"):
        check(v1.Webhook(url="http://h/"))


def test_a_custom_trigger_needs_specific_mode_as_in_determined() -> None:
    custom = v1.Trigger(trigger_type=v1.TriggerType.CUSTOM)
    name, _ = check(v1.Webhook(url="http://h/", mode=v1.WebhookMode.SPECIFIC, triggers=[custom]))
    assert name == "http://h/"
    for mode in (v1.WebhookMode.WORKSPACE, v1.WebhookMode.UNSPECIFIED):
        with pytest.raises(errors.InvalidArgument, match=r"mode 'SPECIFIC'\. Got WEBHOOK_MODE_"):
            check(v1.Webhook(url="http://h/", mode=mode, triggers=[custom]))


async def test_a_full_queue_drops_new_events_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    sender = Sender(queue_limit=3)
    with caplog.at_level(logging.WARNING):
        sent = [sender.send(Delivery("http://h/", {"n": n}, f"event {n}")) for n in range(5)]
    assert sent == [True, True, True, False, False]
    assert "webhook queue full" in caplog.text and "dropped event 3" in caplog.text
