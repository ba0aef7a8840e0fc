"""`det agent list|enable|disable` and `det slot list|enable|disable`: what the cluster has,
what is using it, and taking agents or single slots out of scheduling (admins)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, listing, render, rpc, task


def add_parser(nouns: Subparsers) -> None:
    agent = nouns.add_parser("agent", aliases=["a"], help="list, enable and disable agents")
    verbs = agent.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("list", aliases=["ls"], help="list agents and their slot usage")
    listing.add_format_flags(p)
    p.set_defaults(func=list_agents)
    p = verbs.add_parser("enable", help="let the scheduler use an agent again")
    _which_agents(p, "enable")
    p.set_defaults(func=enable, drain=False, csv=False, json=False)
    p = verbs.add_parser(
        "disable", help="take an agent out of scheduling (its tasks restart elsewhere)"
    )
    _which_agents(p, "disable")
    p.add_argument(
        "--drain",
        action="store_true",
        help="let running tasks finish instead, and list them (as CSV or JSON if asked)",
    )
    listing.add_format_flags(p)
    p.set_defaults(func=disable)

    slot = nouns.add_parser("slot", aliases=["s"], help="list, enable and disable slots")
    verbs = slot.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    p = verbs.add_parser("list", aliases=["ls"], help="list every agent's slots")
    listing.add_format_flags(p)
    p.set_defaults(func=list_slots)
    for verb, what in (
        ("enable", "let the scheduler use a slot again"),
        ("disable", "take one slot out of scheduling (its task restarts elsewhere)"),
    ):
        p = verbs.add_parser(verb, help=what)
        p.add_argument("agent_id", metavar="AGENT_ID")
        p.add_argument("slot_id", metavar="SLOT_ID", help="as `det slot list` shows it")
        p.set_defaults(func=set_slot, enabled=verb == "enable")


def _which_agents(p: argparse.ArgumentParser, verb: str) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("agent_id", metavar="AGENT_ID", nargs="?")
    which.add_argument("--all", action="store_true", help=f"{verb} every agent")


def _cluster(master: str | None) -> v1.GetAgentsResponse:
    async def body(s: client.Session) -> v1.GetAgentsResponse:
        return await s.call(s.stub.get_agents(v1.GetAgentsRequest()))

    return rpc.run(master, body)


def _agents(master: str | None) -> list[v1.Agent]:
    return list(_cluster(master).agents)


AGENT_HEADERS = ("Agent ID", "Address", "Pool", "Slots", "Runtime", "Connected", "Enabled")


def agent_row(a: v1.Agent) -> list[Any]:
    used = sum(1 for slot in a.slots.values() if slot.allocation_id)
    return [
        a.id,
        ", ".join(a.addresses),
        ", ".join(a.resource_pools),
        f"{used}/{len(a.slots)}",
        a.runtime,
        a.connected,
        a.enabled,
    ]


SLOT_HEADERS = ("Agent ID", "Slot ID", "Type", "Device", "Enabled", "Allocation")


def slot_rows(a: v1.Agent) -> list[list[Any]]:
    return [
        [a.id, s.id, *_device(s), s.enabled, s.allocation_id or "FREE"] for s in a.slots.values()
    ]


def _device(s: v1.Slot) -> tuple[str, str]:
    """(type, device) as `det slot list` shows them: ``cuda`` and the GPU's name."""
    if s.device is None:
        return "", ""
    return str(s.device.type.name).lower(), s.device.brand


INSTANCE_HEADERS = ("Instance ID", "Pool", "State", "Agent ID", "Launched", "Idle Since")


def instance_row(i: v1.Instance) -> list[Any]:
    return [
        i.id,
        i.resource_pool,
        i.state,
        i.agent_id,
        render.local_time(i.launched_at) if i.launched_at else "",
        render.local_time(i.idle_since) if i.idle_since else "",
    ]


def list_agents(args: argparse.Namespace) -> int:
    cluster = _cluster(args.master)
    agents = list(cluster.agents)
    as_json = [render.message_dict(a) for a in agents]
    listing.show(args, AGENT_HEADERS, [agent_row(a) for a in agents], as_json)
    if args.json or args.csv:
        return 0
    for a in agents:
        for problem in a.problems:
            print(f"agent {a.id}: {problem}")
    # Elastic pools (resource_pools[].provider): their instances beside the agents.
    for p in cluster.provisioners:
        instances = [i for i in cluster.instances if i.resource_pool == p.resource_pool]
        print(
            f"\npool {p.resource_pool}: {len(instances)} instance(s) from its {p.provider} "
            f"provider (min {p.min_instances}, max {p.max_instances})"
        )
        if instances:
            print(render.table(INSTANCE_HEADERS, [instance_row(i) for i in instances]))
        if p.last_decision:
            print(f"last decision: {p.last_decision}")
        if p.error:
            print(f"error: {p.error}")
    return 0


def list_slots(args: argparse.Namespace) -> int:
    agents = _agents(args.master)
    slots = [{"agent_id": a.id, **render.message_dict(s)} for a in agents for s in a.slots.values()]
    listing.show(args, SLOT_HEADERS, [row for a in agents for row in slot_rows(a)], slots)
    return 0


def _act(args: argparse.Namespace, *, enabled: bool) -> int:
    verb = "enable" if enabled else "disable"
    if not (args.all or args.agent_id):
        raise errors.InvalidArgument(f"give an agent id or --all (det agent {verb} --help)")

    async def body(s: client.Session) -> tuple[list[v1.Agent], list[v1.AllocationSummary]]:
        if args.all:
            found = await s.call(s.stub.get_agents(v1.GetAgentsRequest()))
            ids = sorted(a.id for a in found.agents)
        else:
            ids = [args.agent_id]
        changed = []
        for agent_id in ids:
            req = v1.AgentActionRequest(agent_id=agent_id, drain=args.drain)
            call = s.stub.enable_agent(req) if enabled else s.stub.disable_agent(req)
            changed.append(rpc.present((await s.call(call)).agent, "agent"))
        if enabled or not args.drain:
            return changed, []
        tasks = (await s.call(s.stub.get_tasks(v1.GetTasksRequest()))).allocation_id_to_summary
        on_them = [t for t in tasks.values() if {r.agent_id for r in t.resources} & set(ids)]
        return changed, on_them

    changed, draining = rpc.run(args.master, body)
    quiet = args.json or args.csv
    for agent in changed:
        what = "enabled" if enabled else ("draining" if agent.draining else "disabled")
        print(f"Agent {agent.id} {what}", file=sys.stderr if quiet else sys.stdout)
    if not enabled and args.drain:
        # As Determined: the tasks the draining agents still run.
        if not quiet:
            print(
                "Tasks still in progress on draining nodes."
                if draining
                else "No tasks in progress on draining nodes."
            )
        listing.show(
            args,
            task.HEADERS,
            [task.row(t) for t in draining],
            {t.allocation_id: render.message_dict(t) for t in draining},
        )
    return 0


def set_slot(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.Slot:
        if args.enabled:
            req = v1.EnableSlotRequest(agent_id=args.agent_id, slot_id=args.slot_id)
            return rpc.present((await s.call(s.stub.enable_slot(req))).slot, "slot")
        off = v1.DisableSlotRequest(agent_id=args.agent_id, slot_id=args.slot_id)
        return rpc.present((await s.call(s.stub.disable_slot(off))).slot, "slot")

    slot = rpc.run(args.master, body)
    print(f"{'Enabled' if args.enabled else 'Disabled'} slot {slot.id} of agent {args.agent_id}")
    return 0


def enable(args: argparse.Namespace) -> int:
    return _act(args, enabled=True)


def disable(args: argparse.Namespace) -> int:
    return _act(args, enabled=False)
