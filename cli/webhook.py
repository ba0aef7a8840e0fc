"""`det webhook create|list|delete`: URLs the master POSTs experiment events and alerts to
(admins only, as in Determined)."""

from __future__ import annotations

import argparse

from determined.api.gen import v1
from determined.common import client, errors, structs
from pydet.cli import Subparsers, render, rpc

TRIGGERS = ("EXPERIMENT_STATE_CHANGE", "CUSTOM")
TYPES = {"default": v1.WebhookType.DEFAULT, "slack": v1.WebhookType.SLACK}
MODES = {"workspace": v1.WebhookMode.WORKSPACE, "specific": v1.WebhookMode.SPECIFIC}


def add_parser(nouns: Subparsers) -> None:
    # `det w` is workspace, as in Determined; webhooks are `det webhook`.
    webhook = nouns.add_parser("webhook", help="manage webhooks")
    verbs = webhook.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("create", help="create a webhook")
    p.add_argument("url", metavar="URL", help="where the master POSTs events")
    p.add_argument(
        "--trigger",
        "--trigger-type",
        dest="trigger",
        choices=TRIGGERS,
        type=str.upper,
        default="EXPERIMENT_STATE_CHANGE",
        help="what fires it (default: EXPERIMENT_STATE_CHANGE)",
    )
    p.add_argument(
        "--states",
        default="COMPLETED,ERROR",
        help="for EXPERIMENT_STATE_CHANGE: comma-separated experiment states"
        " (default: COMPLETED,ERROR)",
    )
    p.add_argument(
        "--name",
        default="",
        help="its name (default: the URL); experiments name it"
        " in integrations.webhooks.webhook_name",
    )
    p.add_argument(
        "--type",
        "--webhook-type",
        dest="webhook_type",
        choices=sorted(TYPES),
        type=str.lower,
        default="default",
        help="DEFAULT JSON events or Slack messages",
    )
    p.add_argument(
        "--mode",
        choices=sorted(MODES),
        type=str.lower,
        default=None,
        help="workspace: every experiment; specific: only experiments that name it"
        " (default: workspace, specific for CUSTOM)",
    )
    p.set_defaults(func=create)
    p = verbs.add_parser("list", aliases=["ls"], help="list webhooks")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_webhooks)
    p = verbs.add_parser("delete", help="delete a webhook")
    p.add_argument("webhook_id", metavar="WEBHOOK_ID", type=int)
    p.set_defaults(func=delete)


def _triggers(args: argparse.Namespace) -> list[v1.Trigger]:
    if args.trigger == "CUSTOM":
        return [v1.Trigger(trigger_type=v1.TriggerType.CUSTOM)]
    states = [s.strip().upper() for s in args.states.split(",") if s.strip()]
    if not states:
        raise errors.InvalidArgument("--states: name at least one experiment state")
    return [
        v1.Trigger(
            trigger_type=v1.TriggerType.EXPERIMENT_STATE_CHANGE,
            condition=structs.struct({"state": s}),
        )
        for s in states
    ]


def create(args: argparse.Namespace) -> int:
    mode = args.mode or ("specific" if args.trigger == "CUSTOM" else "workspace")
    webhook = v1.Webhook(
        url=args.url,
        name=args.name,
        webhook_type=TYPES[args.webhook_type],
        mode=MODES[mode],
        triggers=_triggers(args),
    )

    async def body(s: client.Session) -> v1.Webhook:
        resp = await s.call(s.stub.post_webhook(v1.PostWebhookRequest(webhook=webhook)))
        return rpc.present(resp.webhook, "webhook")

    created = rpc.run(args.master, body)
    print(f"Created webhook {created.id} ({created.name})")
    return 0


def _describe(t: v1.Trigger) -> str:
    if t.trigger_type == v1.TriggerType.EXPERIMENT_STATE_CHANGE:
        return f"EXPERIMENT_STATE_CHANGE {structs.python(t.condition).get('state', '')}"
    return t.trigger_type.name


def list_webhooks(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> list[v1.Webhook]:
        return list((await s.call(s.stub.get_webhooks(v1.GetWebhooksRequest()))).webhooks)

    hooks = rpc.run(args.master, body)
    if args.json:
        print(render.to_json([render.message_dict(w) for w in hooks]))
        return 0
    rows = [
        [
            w.id,
            w.name,
            w.url,
            w.webhook_type.name,
            w.mode.name,
            ", ".join(_describe(t) for t in w.triggers),
        ]
        for w in hooks
    ]
    print(render.table(("ID", "Name", "URL", "Type", "Mode", "Triggers"), rows))
    return 0


def delete(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        await s.call(s.stub.delete_webhook(v1.DeleteWebhookRequest(id=args.webhook_id)))

    rpc.run(args.master, body)
    print(f"Deleted webhook {args.webhook_id}")
    return 0
