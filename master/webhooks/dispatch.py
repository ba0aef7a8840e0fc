"""Which webhooks an event goes to, and what they are sent.

- EXPERIMENT_STATE_CHANGE: when an experiment reaches a state a trigger names, every
  webhook in WORKSPACE mode (all experiments, unless the experiment's config sets
  ``integrations.webhooks.exclude``) and every webhook the experiment names in
  ``integrations.webhooks`` (``webhook_id`` or ``webhook_name``) gets the event.
- CUSTOM: ``core_context.alert()`` in a task goes to the CUSTOM webhooks its experiment
  names in ``integrations.webhooks``, as Determined sends it.

The payloads take Determined's shape (``event_id``, ``event_type``, ``timestamp``,
``condition``, ``event_data``); a SLACK webhook gets a Slack message instead. Delivery is the
sender's (master/webhooks/sender.py): queuing never waits for a receiver.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from determined.api.gen import v1
from determined.common import errors
from pydet.master import queries
from pydet.master.events import EventBus
from pydet.master.store.db import Database
from pydet.master.webhooks.sender import Delivery, Sender
from pydet.master.webhooks.store import Webhook, WebhookStore

log = logging.getLogger(__name__)

LEVELS = ("INFO", "WARN", "DEBUG", "ERROR")
MAX_TITLE = 1024
MAX_DESCRIPTION = 16 * 1024
_REMEMBERED_STATES = 100_000


@dataclass(frozen=True)
class Subscription:
    """An experiment's ``integrations.webhooks``."""

    ids: frozenset[int] = frozenset()
    names: frozenset[str] = frozenset()
    exclude: bool = False

    @staticmethod
    def of(config: dict[str, Any]) -> Subscription:
        section = (config.get("integrations") or {}).get("webhooks") or {}
        return Subscription(
            ids=frozenset(int(i) for i in section.get("webhook_id") or ()),
            names=frozenset(str(n) for n in section.get("webhook_name") or ()),
            exclude=bool(section.get("exclude")),
        )

    def names_it(self, w: Webhook) -> bool:
        return w.id in self.ids or w.name in self.names

    def reached_by(self, w: Webhook) -> bool:
        if self.names_it(w):
            return True
        return w.mode == v1.WebhookMode.WORKSPACE and not self.exclude


def alert_fields(data: v1.CustomWebhookEventData | None) -> dict[str, str]:
    """An alert's title, description and level, checked (InvalidArgument names the field)."""
    if data is None:
        raise errors.InvalidArgument("data is required")
    level = (data.level or "INFO").upper()
    if level not in LEVELS:
        raise errors.InvalidArgument(
            f"data.level: expected one of {', '.join(LEVELS)}, got {data.level!r}"
        )
    if len(data.title) > MAX_TITLE:
        raise errors.InvalidArgument(f"data.title: longer than {MAX_TITLE} characters")
    if len(data.description) > MAX_DESCRIPTION:
        raise errors.InvalidArgument(f"data.description: longer than {MAX_DESCRIPTION} characters")
    return {"title": data.title, "description": data.description, "level": level}


def _event(event_type: str, condition: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "event_type": event_type,
        "timestamp": int(time.time()),
        "condition": condition,
        "event_data": data,
    }


def _slack(text: str) -> dict[str, Any]:
    return {"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


class Webhooks:
    def __init__(self, db: Database, store: WebhookStore, events: EventBus, sender: Sender) -> None:
        self._db = db
        self.store = store
        self._events = events
        self.sender = sender
        self._last_state: dict[int, str] = {}

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.sender.run())
            tg.create_task(self._watch())

    async def _watch(self) -> None:
        async for event in self._events.subscribe(kinds=["experiment"]):
            exp_id, state = int(event.data["id"]), str(event.data["state"])
            if self._last_state.get(exp_id) == state:
                continue
            if len(self._last_state) >= _REMEMBERED_STATES:
                self._last_state.clear()
            self._last_state[exp_id] = state
            try:
                await self.state_changed(exp_id, state)
            except Exception:
                # One bad experiment row must not end deliveries for all the others.
                log.exception("webhooks for experiment %d reaching %s", exp_id, state)

    async def state_changed(self, experiment_id: int, state: str) -> int:
        """Queue the state change for the webhooks that want it; returns how many."""
        hooks = [
            w for w in await self.store.all() if any(t.matches_state(state) for t in w.triggers)
        ]
        if not hooks:
            return 0
        row = await self._db.fetch_one(
            "SELECT name, config, start_time, end_time FROM experiments WHERE id = ?",
            (experiment_id,),
        )
        if row is None:
            return 0
        config = json.loads(row["config"])
        subscription = Subscription.of(config)
        resources = config.get("resources") or {}
        end = row["end_time"] if row["end_time"] is not None else time.time()
        experiment = {
            "id": experiment_id,
            "state": state,
            "name": row["name"],
            "slots_per_trial": resources.get("slots_per_trial", 1),
            "duration": int(end - row["start_time"]),
            "resource_pool": resources.get("resource_pool") or "",
            "workspace": config.get("workspace") or "",
            "project": config.get("project") or "",
        }
        body = _event("EXPERIMENT_STATE_CHANGE", {"state": state}, {"experiment": experiment})
        text = f"Experiment {experiment_id} ({row['name']}) is {state}"
        return self._queue(
            [w for w in hooks if subscription.reached_by(w)], body, text, "EXPERIMENT_STATE_CHANGE"
        )

    async def alert(self, experiment_id: int, trial_id: int, fields: dict[str, str]) -> int:
        """Queue a task's alert for the CUSTOM webhooks its experiment names."""
        config_text = await queries.stored_config(self._db, experiment_id)
        if config_text is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        subscription = Subscription.of(json.loads(config_text))
        hooks = [
            w
            for w in await self.store.all()
            if subscription.names_it(w)
            and any(t.trigger_type == v1.TriggerType.CUSTOM for t in w.triggers)
        ]
        body = _event(
            "CUSTOM",
            {},
            {"custom": fields, "experiment_id": experiment_id, "trial_id": trial_id},
        )
        text = f"[{fields['level']}] {fields['title']}: {fields['description']}"
        text += f" (experiment {experiment_id}, trial {trial_id})"
        return self._queue(hooks, body, text, "CUSTOM")

    def _queue(self, hooks: list[Webhook], body: dict[str, Any], text: str, what: str) -> int:
        queued = 0
        for w in hooks:
            payload = _slack(text) if w.webhook_type == v1.WebhookType.SLACK else body
            queued += self.sender.send(Delivery(w.url, payload, f"webhook {w.id} ({what})"))
        return queued
