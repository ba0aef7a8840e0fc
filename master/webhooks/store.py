"""Webhooks as stored: what admins create, list and delete (PostWebhook, GetWebhooks,
DeleteWebhook), validated at the edge, and the few reads delivery needs.

Each webhook has a unique name (how an experiment's ``integrations.webhooks.webhook_name``
finds it), a URL, a type (DEFAULT JSON or SLACK), a mode (every experiment, or only the
ones that name it) and one or more triggers."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from determined.api.gen import v1
from determined.common import errors, structs
from pydet.master.states import State
from pydet.master.store.db import Database

MAX_WEBHOOKS = 1000
MAX_TRIGGERS = 16
MAX_URL = 2048
MAX_NAME = 128

# Trigger types pydet delivers; the others are refused so that nobody waits for them.
DELIVERED = {v1.TriggerType.EXPERIMENT_STATE_CHANGE, v1.TriggerType.CUSTOM}


@dataclass(frozen=True)
class Trigger:
    id: int
    trigger_type: v1.TriggerType
    condition: dict[str, Any] = field(default_factory=dict)

    def matches_state(self, state: str) -> bool:
        return (
            self.trigger_type == v1.TriggerType.EXPERIMENT_STATE_CHANGE
            and self.condition.get("state") == state
        )


@dataclass(frozen=True)
class Webhook:
    id: int
    name: str
    url: str
    webhook_type: v1.WebhookType
    mode: v1.WebhookMode
    triggers: tuple[Trigger, ...]

    def to_proto(self) -> v1.Webhook:
        return v1.Webhook(
            id=self.id,
            name=self.name,
            url=self.url,
            webhook_type=self.webhook_type,
            mode=self.mode,
            triggers=[
                v1.Trigger(
                    id=t.id,
                    trigger_type=t.trigger_type,
                    condition=structs.struct(t.condition),
                    webhook_id=self.id,
                )
                for t in self.triggers
            ],
        )


def _check_url(url: str) -> str:
    if not url:
        raise errors.InvalidArgument("webhook.url is required")
    if len(url) > MAX_URL:
        raise errors.InvalidArgument(f"webhook.url: longer than {MAX_URL} characters")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise errors.InvalidArgument(
            f"webhook.url: {url!r} is not an http:// or https:// URL with a host"
        )
    try:
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise errors.InvalidArgument(f"webhook.url: {url!r} has a bad port") from None
    return url


def _check_condition(i: int, t: v1.Trigger) -> dict[str, Any]:
    where = f"webhook.triggers[{i}].condition"
    condition = structs.python(t.condition)
    if t.trigger_type == v1.TriggerType.EXPERIMENT_STATE_CHANGE:
        state = condition.get("state")
        if state not in State.__members__:
            raise errors.InvalidArgument(
                f"{where}.state: expected one of {', '.join(State.__members__)}, got {state!r}"
            )
        return {"state": state}
    return {}


def check(w: v1.Webhook) -> tuple[str, list[tuple[v1.TriggerType, dict[str, Any]]]]:
    """The webhook's name and triggers, or InvalidArgument naming the bad field."""
    _check_url(w.url)
    name = w.name or w.url
    if len(name) > MAX_NAME:
        raise errors.InvalidArgument(f"webhook.name: longer than {MAX_NAME} characters")
    if not w.triggers:
        raise errors.InvalidArgument("webhook.triggers: a webhook needs at least one trigger")
    if len(w.triggers) > MAX_TRIGGERS:
        raise errors.InvalidArgument(f"webhook.triggers: at most {MAX_TRIGGERS}")
    triggers = []
    for i, t in enumerate(w.triggers):
        if t.trigger_type not in DELIVERED:
            raise errors.InvalidArgument(
                f"webhook.triggers[{i}].trigger_type: {t.trigger_type.name} is not delivered by"
                " pydet (use EXPERIMENT_STATE_CHANGE or CUSTOM)"
            )
        if t.trigger_type == v1.TriggerType.CUSTOM and w.mode != v1.WebhookMode.SPECIFIC:
            # As Determined: an alert goes to the webhooks its experiment names, so a CUSTOM
            # trigger needs SPECIFIC mode (an unset mode is refused too).
            raise errors.InvalidArgument(
                "custom trigger only works on webhook with mode 'SPECIFIC'."
                f" Got WEBHOOK_MODE_{w.mode.name or 'UNSPECIFIED'}"
            )
        triggers.append((t.trigger_type, _check_condition(i, t)))
    return name, triggers


class WebhookStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, w: v1.Webhook) -> Webhook:
        name, triggers = check(w)
        webhook_type = w.webhook_type or v1.WebhookType.DEFAULT
        mode = w.mode or v1.WebhookMode.WORKSPACE
        async with self._db.atomic():
            row = await self._db.fetch_one("SELECT COUNT(*) AS n FROM webhooks")
            if row is not None and row["n"] >= MAX_WEBHOOKS:
                raise errors.FailedPrecondition(f"the master keeps at most {MAX_WEBHOOKS} webhooks")
            if await self._db.fetch_one("SELECT id FROM webhooks WHERE name = ?", (name,)):
                raise errors.AlreadyExists(f"a webhook named {name!r} exists")
            webhook_id = await self._db.execute(
                "INSERT INTO webhooks (name, url, webhook_type, mode) VALUES (?,?,?,?)",
                (name, w.url, webhook_type.name, mode.name),
            )
            await self._db.execute_many(
                "INSERT INTO webhook_triggers (webhook_id, trigger_type, condition) VALUES (?,?,?)",
                [(webhook_id, t.name, json.dumps(c)) for t, c in triggers],
            )
        found = await self.get(webhook_id)
        assert found is not None
        return found

    async def delete(self, webhook_id: int) -> None:
        async with self._db.atomic():
            if await self._db.fetch_one("SELECT id FROM webhooks WHERE id = ?", (webhook_id,)):
                await self._db.execute("DELETE FROM webhooks WHERE id = ?", (webhook_id,))
                return
        raise errors.NotFound(f"webhook {webhook_id} not found")

    async def get(self, webhook_id: int) -> Webhook | None:
        found = await self._load("WHERE w.id = ?", (webhook_id,))
        return found[0] if found else None

    async def all(self) -> list[Webhook]:
        return await self._load("", ())

    async def _load(self, where: str, params: tuple[Any, ...]) -> list[Webhook]:
        rows = await self._db.fetch_all(
            "SELECT w.id, w.name, w.url, w.webhook_type, w.mode, t.id AS tid, t.trigger_type,"
            " t.condition FROM webhooks w LEFT JOIN webhook_triggers t ON t.webhook_id = w.id "
            f"{where} ORDER BY w.id, t.id",
            params,
        )
        hooks: dict[int, tuple[Any, list[Trigger]]] = {}
        for r in rows:
            _, triggers = hooks.setdefault(r["id"], (r, []))
            if r["tid"] is not None:
                triggers.append(
                    Trigger(r["tid"], v1.TriggerType[r["trigger_type"]], json.loads(r["condition"]))
                )
        return [
            Webhook(
                id=r["id"],
                name=r["name"],
                url=r["url"],
                webhook_type=v1.WebhookType[r["webhook_type"]],
                mode=v1.WebhookMode[r["mode"]],
                triggers=tuple(triggers),
            )
            for r, triggers in hooks.values()
        ]
