// Job queue: the same table as `det job list`, and a Manage dialog that changes priority
// or weight, the resource pool, or the job's place (ahead of / behind another job).

import { api, errorMessage } from "../api/client";
import { openStream } from "../api/stream";
import type { Job, JobUpdate, ResourcePool } from "../api/types";
import type { Page } from "../router";
import { button, h, link, replace } from "../ui/dom";
import { time } from "../ui/format";
import { coalesce, debounce, Notice, Table } from "../ui/widgets";

const POLL_MS = 5000;

export const jobsPage: Page = (root, _params, ctx) => {
  const notice = new Notice();
  const poolSelect = h("select", { class: "pool" });
  let pools: ResourcePool[] = [];
  let jobs: Job[] = [];
  const table = new Table<Job & { position: number }>(
    [
      { title: "#", class: "num", cell: (j) => String(j.position) },
      { title: "ID", cell: (j) => h("code", {}, j.jobId) },
      { title: "Type", cell: (j) => j.type.replace(/^TYPE_/, "") },
      {
        title: "Job Name",
        cell: (j) => (j.entityId && j.type === "TYPE_EXPERIMENT" ? link(`/experiments/${j.entityId}`, j.name || `experiment ${j.entityId}`) : j.name),
      },
      { title: "Priority", class: "num", cell: (j) => (currentPool()?.scheduler === "fair_share" ? `weight ${j.weight}` : String(j.priority)) },
      { title: "Submitted", cell: (j) => time(j.submissionTime) },
      { title: "Slots (acquired/needed)", class: "num", cell: (j) => `${j.acquiredSlots}/${j.neededSlots}` },
      { title: "Status", cell: (j) => h("span", { class: `badge job-${j.state.toLowerCase()}` }, j.state.replace(/^STATE_/, "").toLowerCase()) },
      { title: "User", cell: (j) => j.username },
      { title: "", cell: (j) => button("Manage", () => manage(j), "small manage") },
    ],
    { empty: "The queue is empty.", rowKey: (j) => j.jobId },
  );
  const dialog = h("dialog", { class: "manage-dialog" });

  replace(
    root,
    h("div", { class: "page-head" }, h("h1", {}, "Job queue"), h("span", { class: "spacer" }), h("label", {}, "Resource pool ", poolSelect)),
    notice.el,
    h("div", { class: "card table-wrap" }, table.el),
    dialog,
  );

  const currentPool = () => pools.find((p) => p.name === poolSelect.value);

  let first = true;
  const load = coalesce(async () => {
    if (first) notice.loading("Loading the queue…");
    try {
      if (pools.length === 0) {
        pools = await api.resourcePools();
        replace(poolSelect, ...pools.map((p) => h("option", { value: p.name }, p.name)));
        const def = pools.find((p) => p.isDefault) ?? pools[0];
        if (def) poolSelect.value = def.name;
      }
      jobs = await api.jobs(poolSelect.value);
      // Numbered from 0, as `det job list` does.
      table.update(jobs.map((j, i) => ({ ...j, position: i })));
      notice.clear();
    } catch (e) {
      notice.error(`Could not load the job queue: ${errorMessage(e)}`);
    }
    first = false;
  });
  poolSelect.addEventListener("change", () => void load());

  function manage(job: Job): void {
    const pool = currentPool();
    const fair = pool?.scheduler === "fair_share";
    const error = new Notice();
    const priority = h("input", { type: "number", min: "1", max: "99", step: "1", value: String(job.priority), class: "priority" });
    const weight = h("input", { type: "number", min: "0", step: "any", value: String(job.weight), class: "weight" });
    const poolChoice = h("select", { class: "resource-pool" }, ...pools.map((p) => h("option", { value: p.name }, p.name)));
    poolChoice.value = job.resourcePool || pool?.name || "";
    const others = jobs.filter((j) => j.jobId !== job.jobId);
    const place = h(
      "select",
      { class: "place" },
      h("option", { value: "" }, "Keep its place"),
      ...others.flatMap((o) => [
        h("option", { value: `ahead:${o.jobId}` }, `Ahead of ${o.jobId} (${o.name})`),
        h("option", { value: `behind:${o.jobId}` }, `Behind ${o.jobId} (${o.name})`),
      ]),
    );
    const save = h("button", { type: "submit", class: "primary save" }, "Save");
    const form = h(
      "form",
      {},
      h("h2", {}, `Manage job ${job.jobId}`),
      h("p", { class: "muted" }, job.name),
      error.el,
      fair ? h("label", {}, "Weight", weight) : h("label", {}, "Priority (1–99, lower runs first)", priority),
      h("label", {}, "Resource pool", poolChoice),
      fair ? null : h("label", {}, "Position in the queue", place),
      h("div", { class: "buttons" }, button("Cancel", () => dialog.close()), save),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const update: JobUpdate = { jobId: job.jobId };
      if (fair) {
        const w = Number(weight.value);
        if (!(w >= 0)) return error.error("Weight must be a number >= 0.");
        if (w !== job.weight) update.weight = w;
      } else {
        const p = Number(priority.value);
        if (!Number.isInteger(p) || p < 1 || p > 99) return error.error("Priority must be a whole number from 1 to 99.");
        if (p !== job.priority) update.priority = p;
      }
      if (poolChoice.value && poolChoice.value !== (job.resourcePool || pool?.name)) update.resourcePool = poolChoice.value;
      const [where, other] = place.value.split(":");
      if (where === "ahead" && other) update.aheadOf = other;
      if (where === "behind" && other) update.behindOf = other;
      if (Object.keys(update).length === 1) {
        dialog.close();
        return;
      }
      save.disabled = true;
      api.updateJobs([update]).then(
        () => {
          dialog.close();
          void load();
        },
        (e: unknown) => {
          save.disabled = false;
          error.error(`Could not update job ${job.jobId}: ${errorMessage(e)}`);
        },
      );
    });
    replace(dialog, form);
    dialog.showModal();
  }

  void load();
  const live = debounce(() => void load(), 300);
  const stream = openStream({}, { experiment: live, trial: live, resync: live, status: ctx.setLive });
  const timer = setInterval(() => void load(), POLL_MS);
  return () => {
    stream.close();
    live.cancel();
    clearInterval(timer);
    if (dialog.open) dialog.close();
  };
};
