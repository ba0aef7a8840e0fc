// Cluster: agents with their slots, the elastic pools' instances, and the resource pools.

import { api, errorMessage } from "../api/client";
import type { Agent, Instance, Provisioner, ResourcePool } from "../api/types";
import type { Page } from "../router";
import { h, replace } from "../ui/dom";
import { time } from "../ui/format";
import { coalesce, Notice, section, Table } from "../ui/widgets";

const POLL_MS = 3000;

const INSTANCE_BADGE: Record<string, string> = {
  running: "state-active",
  idle: "state-completed",
  launching: "state-queued",
  "starting agent": "state-queued",
  terminating: "state-canceled",
  stopped: "state-error",
};

// One line per elastic pool: its provider, its bounds, its last decision and any error.
function provisionerLine(p: Provisioner): HTMLElement {
  return h(
    "p",
    { class: "muted" },
    `Pool ${p.resourcePool}: ${p.provider} provider, ${p.minInstances} to ${p.maxInstances} instances.`,
    p.lastDecision ? ` Last decision: ${p.lastDecision}.` : "",
    p.error ? h("span", { class: "badge state-error" }, ` ${p.error}`) : "",
  );
}

function used(a: Agent): number {
  return a.slots.filter((s) => s.allocationId !== "").length;
}

export const clusterPage: Page = (root) => {
  const notice = new Notice();
  const totals = h("div", { class: "stats" });
  const agents = new Table<Agent>(
    [
      { title: "Agent", cell: (a) => a.id },
      { title: "Address", cell: (a) => a.address },
      { title: "Pool", cell: (a) => a.resourcePool },
      { title: "Slots", class: "num", cell: (a) => String(a.slots.length) },
      { title: "Used", class: "num", cell: (a) => String(used(a)) },
      { title: "Free", class: "num", cell: (a) => String(a.slots.filter((s) => s.enabled && !s.allocationId).length) },
      { title: "Type", cell: (a) => [...new Set(a.slots.map((s) => s.type))].join(", ") || "–" },
      {
        title: "Status",
        cell: (a) =>
          h(
            "span",
            { class: `badge ${a.connected ? "state-active" : "state-error"}` },
            !a.connected ? "disconnected" : !a.enabled ? (a.draining ? "draining" : "disabled") : "connected",
          ),
      },
      { title: "Runtime", cell: (a) => a.runtime },
      { title: "Registered", cell: (a) => time(a.registeredTime) },
      {
        title: "Problems",
        cell: (a) =>
          a.problems.length === 0 ? "–" : h("span", { class: "badge state-error" }, a.problems.join("; ")),
      },
    ],
    { empty: "No agents are connected. Start one with det-agent or det deploy local cluster-up.", rowKey: (a) => a.id },
  );
  const instances = new Table<Instance>(
    [
      { title: "Instance", cell: (i) => i.id },
      { title: "Pool", cell: (i) => i.resourcePool },
      {
        title: "State",
        cell: (i) => h("span", { class: `badge ${INSTANCE_BADGE[i.state] ?? "state-paused"}` }, i.state),
      },
      { title: "Agent", cell: (i) => i.agentId },
      { title: "Launched", cell: (i) => time(i.launchedAt) },
      { title: "Idle since", cell: (i) => (i.idleSince ? time(i.idleSince) : "–") },
    ],
    { empty: "No instances: the elastic pools launch them when work is queued.", rowKey: (i) => i.id },
  );
  const provisioning = h("div", { class: "provisioners" });
  const instanceSection = section("Instances", provisioning, h("div", { class: "table-wrap" }, instances.el));
  instanceSection.hidden = true;
  const poolNotice = new Notice();
  const pools = new Table<ResourcePool>(
    [
      { title: "Pool", cell: (p) => (p.isDefault ? h("span", {}, p.name, h("span", { class: "muted" }, " (default)")) : p.name) },
      { title: "Scheduler", cell: (p) => p.scheduler },
      { title: "Fitting", cell: (p) => p.fittingPolicy },
      { title: "Preemption", cell: (p) => (p.preemption ? "yes" : "no") },
      { title: "Agents", class: "num", cell: (p) => String(p.numAgents) },
      { title: "Slots used", class: "num", cell: (p) => `${p.slotsUsed} / ${p.slotsTotal}` },
      { title: "Description", cell: (p) => p.description },
    ],
    { empty: "No resource pools." },
  );

  replace(
    root,
    h("div", { class: "page-head" }, h("h1", {}, "Cluster")),
    notice.el,
    totals,
    section("Agents", h("div", { class: "table-wrap" }, agents.el)),
    instanceSection,
    section("Resource pools", poolNotice.el, h("div", { class: "table-wrap" }, pools.el)),
  );

  const stat = (label: string, n: number) => h("div", { class: "stat" }, h("div", { class: "n" }, String(n)), h("div", { class: "label" }, label));
  let first = true;
  const load = coalesce(async () => {
    if (first) notice.loading("Loading the cluster…");
    try {
      const cluster = await api.agents();
      const list = cluster.agents;
      instanceSection.hidden = cluster.provisioners.length === 0;
      replace(provisioning, ...cluster.provisioners.map(provisionerLine));
      instances.update(cluster.instances);
      const slots = list.flatMap((a) => a.slots);
      const busy = slots.filter((s) => s.allocationId !== "").length;
      replace(
        totals,
        stat("agents", list.length),
        stat("slots", slots.length),
        stat("slots used", busy),
        stat("slots free", slots.filter((s) => s.enabled && !s.allocationId).length),
      );
      agents.update(list);
      notice.clear();
    } catch (e) {
      notice.error(`Could not load agents: ${errorMessage(e)}`);
    }
    try {
      pools.update(await api.resourcePools());
      poolNotice.clear();
    } catch (e) {
      poolNotice.error(`Could not load resource pools: ${errorMessage(e)}`);
    }
    first = false;
  });
  void load();
  // Agents and slots have no live events yet; a short poll keeps the page current.
  const timer = setInterval(() => void load(), POLL_MS);
  return () => clearInterval(timer);
};
