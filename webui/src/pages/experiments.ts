// Experiments: the list, paged on the master (it stays fast with 10,000 experiments),
// filtered by name, label, user, state and archived, sorted by the sortable columns, live.
// A project's page shows the same list scoped to the project.

import { api, errorMessage } from "../api/client";
import { openStream } from "../api/stream";
import type { Experiment } from "../api/types";
import type { Page, PageContext } from "../router";
import { button, h, link, replace } from "../ui/dom";
import { metric, time } from "../ui/format";
import { badge, coalesce, debounce, Notice, progress, type SortState, Table, unmanagedTag } from "../ui/widgets";
import { actionButtons } from "./actions";
import { moveButton } from "./moveDialog";

const STATE_FILTERS: [string, string[]][] = [
  ["All states", []],
  ["Active", ["ACTIVE"]],
  ["Paused", ["PAUSED"]],
  ["Stopping", ["STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR"]],
  ["Completed", ["COMPLETED"]],
  ["Canceled", ["CANCELED"]],
  ["Error", ["ERROR"]],
];
const PAGE_SIZES = [25, 50, 100, 200];

interface ListState {
  name: string;
  /** Labels, comma-separated: experiments with every one of them. */
  label: string;
  /** An owner's username. */
  user: string;
  state: number;
  archived: boolean;
  sort: SortState;
  page: number;
  size: number;
}

function readUrl(): ListState {
  const q = new URLSearchParams(location.search);
  const int = (key: string, fallback: number) => {
    const v = Number.parseInt(q.get(key) ?? "", 10);
    return Number.isFinite(v) && v >= 0 ? v : fallback;
  };
  return {
    name: q.get("name") ?? "",
    label: q.get("label") ?? "",
    user: q.get("user") ?? "",
    state: Math.min(int("state", 0), STATE_FILTERS.length - 1),
    archived: q.get("archived") === "true",
    sort: { key: q.get("sort") ?? "id", descending: q.get("asc") !== "true" },
    page: int("page", 0),
    size: PAGE_SIZES.includes(int("size", 50)) ? int("size", 50) : 50,
  };
}

function writeUrl(path: string, s: ListState): void {
  const q = new URLSearchParams();
  if (s.name) q.set("name", s.name);
  if (s.label) q.set("label", s.label);
  if (s.user) q.set("user", s.user);
  if (s.state) q.set("state", String(s.state));
  if (s.archived) q.set("archived", "true");
  if (s.sort.key !== "id") q.set("sort", s.sort.key);
  if (!s.sort.descending) q.set("asc", "true");
  if (s.page) q.set("page", String(s.page));
  if (s.size !== 50) q.set("size", String(s.size));
  const text = q.toString();
  history.replaceState(null, "", `${path}${text ? `?${text}` : ""}`);
}

export const experimentsPage: Page = (root, _params, ctx) => {
  const head = h("div", { class: "page-head" }, h("h1", {}, "Experiments"), h("span", { class: "count" }));
  return experimentList(root, ctx, { path: "/experiments", head });
};

/** Where a list shows: its page's path (for the URL's filters), the project it is scoped
 * to (none: every project's), and what goes above it (its `.count` shows the total). */
export interface ListScope {
  path: string;
  projectId?: number;
  head: HTMLElement;
  /** Runs after an experiment moved out (the sidebar's counts change). */
  onMoved?: () => void;
}

/** Labels as typed ("a, b") to the list the API takes. */
export function labelList(text: string): string[] {
  return text
    .split(",")
    .map((l) => l.trim())
    .filter((l) => l !== "");
}

export function experimentList(root: HTMLElement, ctx: PageContext, scope: ListScope): () => void {
  const s = readUrl();
  const notice = new Notice();
  let total = 0;

  const table = new Table<Experiment>(
    [
      { title: "ID", sort: "id", class: "num", cell: (e) => link(`/experiments/${e.id}`, String(e.id)) },
      { title: "Name", sort: "name", cell: (e) => link(`/experiments/${e.id}`, e.name) },
      { title: "State", sort: "state", cell: (e) => h("span", {}, badge(e.state), " ", unmanagedTag(e.unmanaged)) },
      { title: "Progress", sort: "progress", cell: (e) => progress(e.progress) },
      {
        title: "Best metric",
        class: "num",
        cell: (e) => h("span", { title: e.searcherMetric }, metric(e.bestTrialSearcherMetric)),
      },
      { title: "Trials", class: "num", cell: (e) => String(e.numTrials) },
      { title: "Labels", cell: (e) => h("span", { class: "labels" }, ...e.labels.map((l) => h("span", { class: "label-tag" }, l))) },
      { title: "User", cell: (e) => e.username },
      { title: "Started", sort: "start_time", cell: (e) => time(e.startTime) },
      {
        title: "Actions",
        cell: (e) => {
          const box = actionButtons(e, (m) => notice.error(m), refresh);
          box.appendChild(
            moveButton(e, () => {
              refresh();
              scope.onMoved?.();
            }),
          );
          return box;
        },
      },
    ],
    {
      empty: "No experiments match.",
      rowKey: (e) => String(e.id),
      sort: s.sort,
      rowClass: (e) => (e.archived ? "archived" : ""),
      onSort: (sort) => {
        s.sort = sort;
        s.page = 0;
        refresh();
      },
    },
  );

  const nameInput = h("input", { type: "search", placeholder: "Filter by name", value: s.name, class: "filter-name" });
  const labelInput = h("input", { type: "search", placeholder: "Labels (a, b)", value: s.label, class: "filter-label" });
  const userInput = h("input", { type: "search", placeholder: "User", value: s.user, class: "filter-user" });
  const stateSelect = h(
    "select",
    { class: "filter-state" },
    ...STATE_FILTERS.map(([label], i) => h("option", { value: String(i) }, label)),
  );
  stateSelect.value = String(s.state);
  const archivedBox = h("input", { type: "checkbox", checked: s.archived });
  const sizeSelect = h("select", {}, ...PAGE_SIZES.map((n) => h("option", { value: String(n) }, `${n} / page`)));
  sizeSelect.value = String(s.size);
  const pageInfo = h("span", { class: "page-info" });
  const prev = button("‹ Prev", () => {
    s.page = Math.max(0, s.page - 1);
    refresh();
  });
  const next = button("Next ›", () => {
    s.page += 1;
    refresh();
  });

  const onName = debounce(() => {
    s.name = nameInput.value.trim();
    s.page = 0;
    refresh();
  }, 250);
  nameInput.addEventListener("input", onName);
  const onLabel = debounce(() => {
    s.label = labelInput.value.trim();
    s.user = userInput.value.trim();
    s.page = 0;
    refresh();
  }, 250);
  labelInput.addEventListener("input", onLabel);
  userInput.addEventListener("input", onLabel);
  stateSelect.addEventListener("change", () => {
    s.state = Number(stateSelect.value);
    s.page = 0;
    refresh();
  });
  archivedBox.addEventListener("change", () => {
    s.archived = archivedBox.checked;
    s.page = 0;
    refresh();
  });
  sizeSelect.addEventListener("change", () => {
    s.size = Number(sizeSelect.value);
    s.page = 0;
    refresh();
  });

  replace(
    root,
    scope.head,
    h(
      "div",
      { class: "toolbar" },
      nameInput,
      labelInput,
      userInput,
      stateSelect,
      h("label", { class: "check" }, archivedBox, "Show archived"),
      h("span", { class: "spacer" }),
      sizeSelect,
      prev,
      pageInfo,
      next,
    ),
    notice.el,
    h("div", { class: "card table-wrap" }, table.el),
  );
  const count = scope.head.querySelector(".count") ?? h("span");

  let generation = 0;
  let loaded = false;
  const load = async () => {
    const mine = ++generation;
    writeUrl(scope.path, s);
    if (!loaded) notice.loading("Loading experiments…");
    try {
      const states = STATE_FILTERS[s.state]?.[1] ?? [];
      const result = await api.experiments({
        limit: s.size,
        offset: s.page * s.size,
        sortBy: `SORT_BY_${s.sort.key.toUpperCase()}`,
        orderBy: s.sort.descending ? "ORDER_BY_DESC" : "ORDER_BY_ASC",
        name: s.name,
        states,
        // Archived experiments are hidden unless asked for, as in Determined.
        archived: s.archived ? undefined : false,
        projectId: scope.projectId,
        labels: labelList(s.label),
        users: s.user ? [s.user] : undefined,
      });
      if (mine !== generation) return;
      total = result.total;
      const pages = Math.max(1, Math.ceil(total / s.size));
      if (s.page >= pages && s.page > 0) {
        s.page = pages - 1;
        void load();
        return;
      }
      table.update(result.experiments);
      const first = total ? s.page * s.size + 1 : 0;
      pageInfo.textContent = `${first}–${s.page * s.size + result.experiments.length} of ${total}`;
      count.textContent = `${total} total`;
      prev.disabled = s.page === 0;
      next.disabled = (s.page + 1) * s.size >= total;
      loaded = true;
      notice.clear();
    } catch (e) {
      if (mine === generation) notice.error(`Could not load experiments: ${errorMessage(e)}`);
    }
  };
  const refresh = coalesce(load);
  const live = debounce(refresh, 300);
  refresh();

  const stream = openStream({}, { experiment: live, trial: live, resync: refresh, status: ctx.setLive });
  return () => {
    stream.close();
    onName.cancel();
    onLabel.cancel();
    live.cancel();
  };
}
