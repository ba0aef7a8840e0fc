// A trial's logs: the last lines, filtered on the master by rank, level and text, and
// followed live (new lines are fetched when the master says some arrived).

import { api, errorMessage, type LogQuery } from "../api/client";
import type { TaskLog } from "../api/types";
import { button, h, replace } from "../ui/dom";
import { time } from "../ui/format";
import { coalesce, debounce, Notice } from "../ui/widgets";

const LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];
const TAIL = 1000;
const MAX_LINES = 10_000;

export class LogView {
  readonly el: HTMLElement;
  private readonly lines = h("div", { class: "log-lines", role: "log" });
  private readonly notice = new Notice();
  private readonly follow = h("input", { type: "checkbox", checked: true, class: "follow" });
  private readonly ranks = h("input", { type: "text", placeholder: "ranks, e.g. 0,1", class: "filter-rank" });
  private readonly search = h("input", { type: "search", placeholder: "Search text", class: "filter-search" });
  private readonly levelBoxes = LEVELS.map((l) => h("input", { type: "checkbox", checked: true, value: l }));
  private lastId = 0;
  private count = 0;
  private generation = 0;
  private readonly reload = coalesce(() => this.load(true));
  private readonly more = coalesce(() => this.load(false));
  private readonly onFilter = debounce(() => void this.reload(), 300);

  constructor(private readonly trialId: number) {
    this.ranks.addEventListener("input", this.onFilter);
    this.search.addEventListener("input", this.onFilter);
    for (const box of this.levelBoxes) box.addEventListener("change", () => void this.reload());
    this.follow.addEventListener("change", () => {
      if (this.follow.checked) {
        void this.more();
        this.scrollToEnd();
      }
    });
    this.el = h(
      "section",
      { class: "card logs" },
      h(
        "div",
        { class: "card-head" },
        h("h2", {}, "Logs"),
        h("label", { class: "check" }, this.follow, "Follow"),
        button("Download", () => this.download(), "small"),
      ),
      h(
        "div",
        { class: "toolbar" },
        this.ranks,
        h("span", { class: "levels" }, ...this.levelBoxes.map((b) => h("label", { class: "check" }, b, b.value.toLowerCase()))),
        this.search,
      ),
      this.notice.el,
      this.lines,
    );
  }

  start(): void {
    this.notice.loading("Loading logs…");
    void this.reload();
  }

  /** The master says new lines were stored. */
  onNewLines(): void {
    if (this.follow.checked) void this.more();
  }

  dispose(): void {
    this.onFilter.cancel();
    this.generation++;
  }

  private query(): LogQuery | null {
    const ranks: number[] = [];
    for (const part of this.ranks.value.split(",")) {
      const t = part.trim();
      if (!t) continue;
      if (!/^\d+$/.test(t)) {
        this.notice.error(`Ranks are numbers separated by commas; "${t}" is not one.`);
        return null;
      }
      ranks.push(Number(t));
    }
    const levels = this.levelBoxes.filter((b) => b.checked).map((b) => b.value);
    return {
      rankIds: ranks,
      levels: levels.length === LEVELS.length ? [] : levels,
      searchText: this.search.value,
    };
  }

  private async load(fresh: boolean): Promise<void> {
    const q = this.query();
    if (!q) return;
    const mine = fresh ? ++this.generation : this.generation;
    if (q.levels?.length === 0 && this.levelBoxes.every((b) => !b.checked)) {
      // No level checked: nothing can match.
      replace(this.lines);
      this.count = 0;
      this.notice.info("No log lines match.");
      return;
    }
    try {
      const got = await api.trialLogs(this.trialId, fresh ? { ...q, tail: TAIL } : { ...q, afterId: this.lastId });
      if (mine !== this.generation) return;
      if (fresh) {
        replace(this.lines);
        this.count = 0;
        this.lastId = 0;
        if (got.length === 0) this.notice.info("No log lines match.");
        else this.notice.clear();
      } else if (got.length > 0) {
        this.notice.clear();
      }
      this.add(got);
    } catch (e) {
      if (mine === this.generation) this.notice.error(`Could not load logs: ${errorMessage(e)}`);
    }
  }

  private add(logs: TaskLog[]): void {
    if (logs.length === 0) return;
    const fragment = document.createDocumentFragment();
    for (const line of logs) {
      if (line.id <= this.lastId) continue;
      this.lastId = line.id;
      fragment.appendChild(
        h(
          "div",
          { class: `log-line level-${line.level.toLowerCase()}`, data: { id: String(line.id) } },
          h("span", { class: "ts" }, time(line.timestamp)),
          h("span", { class: "rank" }, line.rankId === null ? "" : `[rank=${line.rankId}]`),
          h("span", { class: "lvl" }, line.level),
          h("span", { class: "msg" }, line.message),
        ),
      );
      this.count++;
    }
    this.lines.appendChild(fragment);
    while (this.count > MAX_LINES && this.lines.firstChild) {
      this.lines.removeChild(this.lines.firstChild);
      this.count--;
    }
    if (this.follow.checked) this.scrollToEnd();
  }

  private scrollToEnd(): void {
    this.lines.scrollTop = this.lines.scrollHeight;
  }

  private download(): void {
    const text = Array.from(this.lines.children, (line) =>
      Array.from(line.children, (part) => part.textContent ?? "").filter(Boolean).join(" "),
    ).join("\n");
    const url = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
    const a = h("a", { href: url });
    a.download = `trial-${this.trialId}-logs.txt`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
}
