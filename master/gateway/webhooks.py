"""JSON routes for webhooks, as Determined's REST API has them: GET and POST
``/api/v1/webhooks``, DELETE ``/api/v1/webhooks/{id}`` (admins only, as over gRPC).

A POST body is the webhook in the shape GET answers (snake_case keys; Determined's
camelCase ones are accepted too), enums by name with or without their prefix
(``WEBHOOK_TYPE_SLACK`` or ``SLACK``), a trigger's ``condition`` as an object or JSON text."""

from __future__ import annotations

import enum
import json
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service

E = TypeVar("E", bound=enum.Enum)


def _get(raw: dict[str, Any], snake: str, camel: str) -> Any:
    return raw.get(snake, raw.get(camel))


def _enum(kind: type[E], value: Any, prefix: str, where: str) -> E | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.InvalidArgument(f"{where}: expected the name of a {kind.__name__}")
    name = value.upper().removeprefix(prefix)
    try:
        return kind[name]
    except KeyError:
        choices = ", ".join(f"{prefix}{m.name}" for m in kind if m.name != "UNSPECIFIED")
        raise errors.InvalidArgument(f"{where}: unknown {value!r} (one of {choices})") from None


def _trigger(raw: Any, index: int) -> v1.Trigger:
    where = f"webhook.triggers[{index}]"
    if not isinstance(raw, dict):
        raise errors.InvalidArgument(f"{where}: expected an object")
    kind = _enum(
        v1.TriggerType,
        _get(raw, "trigger_type", "triggerType"),
        "TRIGGER_TYPE_",
        f"{where}.trigger_type",
    )
    condition = raw.get("condition") or {}
    if isinstance(condition, dict):
        condition = json.dumps(condition)
    if not isinstance(condition, str):
        raise errors.InvalidArgument(f"{where}.condition: expected an object")
    return v1.Trigger(trigger_type=kind or v1.TriggerType.UNSPECIFIED, condition=condition)


def webhook(raw: Any) -> v1.Webhook:
    """The webhook a POST body describes (the store validates what it means)."""
    if isinstance(raw, dict) and isinstance(raw.get("webhook"), dict):
        raw = raw["webhook"]
    if not isinstance(raw, dict):
        raise errors.InvalidArgument("request body: expected the webhook as an object")
    triggers = raw.get("triggers") or []
    if not isinstance(triggers, list):
        raise errors.InvalidArgument("webhook.triggers: expected a list")
    kind = _enum(
        v1.WebhookType,
        _get(raw, "webhook_type", "webhookType"),
        "WEBHOOK_TYPE_",
        "webhook.webhook_type",
    )
    mode = _enum(v1.WebhookMode, raw.get("mode"), "WEBHOOK_MODE_", "webhook.mode")
    return v1.Webhook(
        url=codec.field(raw, "url", str, ""),
        name=codec.field(raw, "name", str, ""),
        webhook_type=kind or v1.WebhookType.DEFAULT,
        mode=mode or v1.WebhookMode.WORKSPACE,
        triggers=[_trigger(t, i) for i, t in enumerate(triggers)],
    )


def routes(service: Service) -> list[Route]:
    async def list_webhooks(request: Request) -> Response:
        await gateway_auth.authorize(request, "GetWebhooks", v1.GetWebhooksRequest())
        found = await service.webhooks.store.all()
        return codec.message(v1.GetWebhooksResponse(webhooks=[w.to_proto() for w in found]))

    async def create_webhook(request: Request) -> Response:
        req = v1.PostWebhookRequest(webhook=webhook(await codec.json_body(request)))
        await gateway_auth.authorize(request, "PostWebhook", req)
        assert req.webhook is not None
        created = await service.webhooks.store.create(req.webhook)
        return codec.message(v1.PostWebhookResponse(webhook=created.to_proto()))

    async def delete_webhook(request: Request) -> Response:
        req = v1.DeleteWebhookRequest(id=codec.integer(request, "id"))
        await gateway_auth.authorize(request, "DeleteWebhook", req)
        await service.webhooks.store.delete(req.id)
        return JSONResponse({})

    return [
        Route("/api/v1/webhooks", list_webhooks, methods=["GET"]),
        Route("/api/v1/webhooks", create_webhook, methods=["POST"]),
        Route("/api/v1/webhooks/{id:int}", delete_webhook, methods=["DELETE"]),
    ]
