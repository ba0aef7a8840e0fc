"""JSON routes for webhooks, as Determined's REST API has them: GET and POST
``/api/v1/webhooks``, DELETE ``/api/v1/webhooks/{id}`` (admins only, as over gRPC).

A POST body is the webhook itself (Determined's ``body: "webhook"``), read as its message:
camelCase or snake_case keys, enums by name with or without their prefix
(``WEBHOOK_TYPE_SLACK`` or ``SLACK``), a trigger's ``condition`` an object. pydet's WebUI
and older scripts may wrap it as ``{"webhook": {...}}``."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors, protojson
from pydet.master import convert
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service


def webhook(raw: Any) -> v1.Webhook:
    """The webhook a POST body describes (the store validates what it means)."""
    path = ""
    if isinstance(raw, dict) and set(raw) == {"webhook"}:
        raw, path = raw["webhook"], "webhook"
    try:
        found: v1.Webhook = protojson.parse(v1.Webhook, raw, path=path)
    except protojson.ParseError as e:
        raise errors.InvalidArgument(str(e)) from None
    if found.webhook_type == v1.WebhookType.UNSPECIFIED:
        found.webhook_type = v1.WebhookType.DEFAULT
    if found.mode == v1.WebhookMode.UNSPECIFIED:
        found.mode = v1.WebhookMode.WORKSPACE
    return found


def routes(service: Service) -> list[Route]:
    async def list_webhooks(request: Request) -> Response:
        await gateway_auth.authorize(request, "GetWebhooks", v1.GetWebhooksRequest())
        found = await service.webhooks.store.all()
        hooks = [w.to_proto() for w in found]
        return codec.message(
            v1.GetWebhooksResponse(webhooks=hooks, pagination=convert.pagination(len(hooks)))
        )

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
