// Tasks: the notebooks, shells, commands and TensorBoards that run, as Determined's Tasks
// page lists them (state, owner, slots, pool, when each started); open a notebook or a
// TensorBoard, kill one, follow its logs live; and the "Launch JupyterLab" dialog.

import { api, errorMessage, type TaskKind } from "../api/client";
import type { InteractiveTask, ResourcePool, TaskLog } from "../api/types";
import type { Page } from "../router";
import { button, h, replace } from "../ui/dom";
import { time } from "../ui/format";
import { badge, coalesce, Notice, Table } from "../ui/widgets";

const POLL_MS = 2000;
const TAIL = 1000;

export interface TaskRow extends InteractiveTask {
  kind: TaskKind;
}

const LABELS: Record<TaskKind, string> = {
  notebooks: "Notebook",
  shells: "Shell",
  commands: "Command",
  tensorboards: "TensorBoard",
};

/** Every kind's tasks in one list, the newest first. */
export function taskRows(lists: Record<TaskKind, InteractiveTask[]>): TaskRow[] {
  const rows = (Object.keys(lists) as TaskKind[]).flatMap((kind) => lists[kind].map((t) => ({ ...t, kind })));
  return rows.sort((a, b) => b.startTime - a.startTime);
}

/** Where a running notebook or TensorBoard is opened; null for what has no page. */
export function openPath(row: TaskRow): string | null {
  const pages = row.kind === "notebooks" || row.kind === "tensorboards";
  return pages && row.state === "STATE_RUNNING" && row.serviceAddress ? row.serviceAddress : null;
}

/** One task's lines, fetched again every few seconds from after the last one shown. */
class TaskLogView {
  readonly el = h("section", { class: "card task-logs", hidden: true });
  private readonly lines = h("div", { class: "log-lines", role: "log" });
  private readonly title = h("h2");
  private taskId = "";
  private lastId = 0;
  private readonly more = coalesce(async () => {
    const id = this.taskId;
    if (!id) return;
    const batch: TaskLog[] = await api.taskLogs(id, this.lastId ? { afterId: this.lastId } : { tail: TAIL });
    if (id !== this.taskId) return;
    for (const line of batch) {
      this.lastId = Math.max(this.lastId, line.id);
      this.lines.appendChild(h("div", { class: `log-line ${line.stdtype}` }, `[${time(line.timestamp)}] ${line.message}`));
    }
    if (batch.length) this.lines.scrollTop = this.lines.scrollHeight;
  });

  constructor() {
    replace(this.el, h("div", { class: "card-head" }, this.title, button("Close", () => this.show(null), "small")), this.lines);
  }

  show(row: TaskRow | null): void {
    this.taskId = row?.id ?? "";
    this.lastId = 0;
    replace(this.lines);
    this.el.hidden = row === null;
    if (row) {
      replace(this.title, `Logs of ${row.description || row.id}`);
      void this.more();
    }
  }

  poll(): void {
    void this.more().catch(() => {});
  }
}

export const tasksPage: Page = (root) => {
  const notice = new Notice();
  const logs = new TaskLogView();
  let pools: ResourcePool[] = [];
  const table = new Table<TaskRow>(
    [
      { title: "Type", cell: (r) => LABELS[r.kind] },
      { title: "Name", cell: (r) => r.description },
      { title: "ID", cell: (r) => h("code", { title: r.id }, r.id.slice(0, 8)) },
      { title: "State", cell: (r) => badge(r.state) },
      { title: "Owner", cell: (r) => r.username },
      { title: "Slots", class: "num", cell: (r) => String(r.slots) },
      { title: "Resource pool", cell: (r) => r.resourcePool },
      { title: "Started", cell: (r) => time(r.startTime) },
      { title: "", cell: actions },
    ],
    { empty: "No notebooks, shells, commands or TensorBoards are running.", rowKey: (r) => r.id },
  );
  const dialog = h("dialog", { class: "launch-dialog" });

  replace(
    root,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Tasks"),
      h("span", { class: "spacer" }),
      button("Launch JupyterLab", () => void launchDialog(), "primary launch-jupyterlab"),
    ),
    notice.el,
    h("div", { class: "card table-wrap" }, table.el),
    logs.el,
    dialog,
  );

  function actions(row: TaskRow): Node {
    const cell = h("span", { class: "actions" });
    const path = openPath(row);
    if (path) cell.appendChild(h("a", { href: path, target: "_blank", rel: "noopener", class: "button small open" }, "Open"));
    cell.appendChild(button("Logs", () => logs.show(row), "small logs"));
    const kill = button("Kill", () => {
      kill.disabled = true;
      api.killTask(row.kind, row.id).then(
        () => void load(),
        (e: unknown) => {
          kill.disabled = false;
          notice.error(`Could not kill ${row.description || row.id}: ${errorMessage(e)}`);
        },
      );
    }, "small danger kill");
    cell.appendChild(kill);
    return cell;
  }

  let first = true;
  const load = coalesce(async () => {
    if (first) notice.loading("Loading the tasks…");
    try {
      const [commands, notebooks, shells, tensorboards] = await Promise.all([
        api.commands(),
        api.notebooks(),
        api.shells(),
        api.tensorboards(),
      ]);
      table.update(
        taskRows({
          notebooks,
          shells,
          commands,
          tensorboards: tensorboards.tensorboards.map((t) => ({
            id: t.id,
            description: t.description || `TensorBoard (${t.id.slice(0, 8)})`,
            state: t.state,
            startTime: t.startTime,
            username: t.username,
            resourcePool: t.resourcePool,
            exitStatus: t.exitStatus,
            slots: 0,
            priority: 42,
            serviceAddress: t.serviceAddress,
          })),
        }),
      );
      notice.clear();
    } catch (e) {
      notice.error(`Could not load the tasks: ${errorMessage(e)}`);
    }
    first = false;
  });

  async function launchDialog(): Promise<void> {
    const error = new Notice();
    if (pools.length === 0) {
      try {
        pools = await api.resourcePools();
      } catch (e) {
        notice.error(`Could not load the resource pools: ${errorMessage(e)}`);
        return;
      }
    }
    const name = h("input", { type: "text", placeholder: "JupyterLab (a name of three words)", class: "name" });
    const slots = h("input", { type: "number", min: "0", step: "1", value: "1", class: "slots" });
    const pool = h("select", { class: "resource-pool" }, ...pools.map((p) => h("option", { value: p.name }, p.name)));
    pool.value = (pools.find((p) => p.isDefault) ?? pools[0])?.name ?? "";
    const template = h("input", { type: "text", placeholder: "none", class: "template" });
    const launch = h("button", { type: "submit", class: "primary launch" }, "Launch");
    const form = h(
      "form",
      {},
      h("h2", {}, "Launch JupyterLab"),
      error.el,
      h("label", {}, "Name", name),
      h("label", {}, "Slots (0: no GPU)", slots),
      h("label", {}, "Resource pool", pool),
      h("label", {}, "Template", template),
      h("div", { class: "buttons" }, button("Cancel", () => dialog.close()), launch),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const n = Number(slots.value);
      if (!Number.isInteger(n) || n < 0) return error.error("Slots must be a whole number, 0 or more.");
      const config: Record<string, unknown> = { resources: { slots: n, resource_pool: pool.value } };
      if (name.value.trim()) config.description = name.value.trim();
      launch.disabled = true;
      api.launchNotebook({ config, templateName: template.value.trim() }).then(
        () => {
          dialog.close();
          void load();
        },
        (e: unknown) => {
          launch.disabled = false;
          error.error(`Could not launch JupyterLab: ${errorMessage(e)}`);
        },
      );
    });
    replace(dialog, form);
    dialog.showModal();
  }

  void load();
  const timer = setInterval(() => {
    void load();
    logs.poll();
  }, POLL_MS);
  return () => {
    clearInterval(timer);
    if (dialog.open) dialog.close();
  };
};
